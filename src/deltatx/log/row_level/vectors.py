"""The deletion vectors of a rebase plan: read them while settling, write them to publish.

A :class:`~deltatx.kernel.row_level.plan.RebasePlan` holds the vectors a rebased commit must
carry as row sets. While settling, the commit's own planned rows are read from the plan
(:func:`own_rows`); the commit loop writes them with :func:`write_planned_vectors`, into one
DV file, just before the attempt that publishes. An attempt that loses and re-plans deletes
the file it never published (:func:`discard_unpublished`), and once published the vectors the
transaction staged but the rebase superseded are deleted (:func:`discard_superseded`): a
commit leaves only DV files its published version references.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from deltatx.errors import InvalidArgumentError, InvalidTableError
from deltatx.kernel.actions import Action, AddFile, DeletionVectorDescriptor, RemoveFile
from deltatx.kernel.commits import PendingCommit
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.log.deletion_vectors import DvReader, write_dvs

if TYPE_CHECKING:
    from deltatx.log.delta_log import DeltaLog

_log = logging.getLogger(__name__)


def own_rows(reader: DvReader, plan: RebasePlan, action: AddFile | RemoveFile) -> frozenset[int]:
    """The deleted rows of one of the pending commit's own file actions, planned ones first."""
    if isinstance(action, AddFile) and plan.is_planned(action):
        return plan.vectors[action.path]
    return reader.rows_of(action)


@dataclass(frozen=True, slots=True)
class WrittenVectors:
    """A plan's deletion vectors as written to storage (one DV file).

    Attributes:
        rows: What was written: data file path -> its deleted rows.
        descriptors: Data file path -> the descriptor of its vector.
        location: The DV file's path relative to the table root (None: nothing written).
    """

    rows: Mapping[str, frozenset[int]]
    descriptors: Mapping[str, DeletionVectorDescriptor]
    location: str | None

    def actions(self, plan: RebasePlan) -> tuple[Action, ...]:
        """The plan's actions with each planned add carrying its written vector."""
        if set(self.rows) != set(plan.vectors):
            raise ValueError("these vectors were written for another plan")
        if not plan.vectors:
            return plan.pending.actions
        return tuple(
            replace(a, deletion_vector=self.descriptors[a.path])
            if isinstance(a, AddFile) and plan.is_planned(a)
            else a
            for a in plan.pending.actions
        )


NOTHING_WRITTEN = WrittenVectors(MappingProxyType({}), MappingProxyType({}), None)


def write_planned_vectors(
    log: DeltaLog, plan: RebasePlan, previous: WrittenVectors = NOTHING_WRITTEN
) -> WrittenVectors:
    """Writes the plan's vectors into one new DV file, unless ``previous`` holds them already.

    ``previous`` is what the last attempt wrote and did not publish: it is reused when the
    plan wants the same rows, and deleted otherwise, so a commit that retries leaves at most
    the one DV file it publishes.
    """
    if dict(previous.rows) == dict(plan.vectors):
        return previous
    discard_unpublished(log, previous)
    if not plan.vectors:
        return NOTHING_WRITTEN
    paths = list(plan.vectors)
    descriptors = write_dvs(log, [plan.vectors[p] for p in paths])
    return WrittenVectors(
        rows=MappingProxyType(dict(plan.vectors)),
        descriptors=MappingProxyType(dict(zip(paths, descriptors, strict=True))),
        location=descriptor_location(descriptors[0]),
    )


def discard_unpublished(log: DeltaLog, written: WrittenVectors) -> None:
    """Deletes a DV file that no published commit references (a lost or failed attempt)."""
    if written.location is not None:
        log.store.delete(f"{log.table_path.rstrip('/')}/{written.location}")


def discard_superseded(
    log: DeltaLog, staged: PendingCommit, written: WrittenVectors, plan: RebasePlan
) -> None:
    """Deletes the DV files this transaction staged that its rebased commit no longer uses.

    A deletion-vector DML writes its vectors before committing (a new file of its own); when
    settlement rebased a file's vector, or moved the file onto a compaction's output, the
    published commit carries the plan's vector instead and the staged one is referenced by
    nothing. Only the vectors of the staged commit's own ``remove(P)`` + ``add(P, new
    vector)`` pairs are candidates, and only files that no action of the published commit and
    no file the transaction read refers to. A failure is logged; the commit stands and VACUUM
    removes the file later.
    """
    if plan.pending.actions == staged.actions:
        return  # nothing was rebased
    removed = {a.path: a for a in staged.actions if isinstance(a, RemoveFile)}
    candidates = {
        loc
        for a in staged.actions
        if isinstance(a, AddFile)
        and a.path in removed
        and removed[a.path].dv_id != a.dv_id
        and (loc := _dv_location(a)) is not None
    }
    published = written.actions(plan)
    keep = {_dv_location(a) for a in published if isinstance(a, AddFile | RemoveFile)}
    keep |= {_dv_location(a) for a in staged.actions if isinstance(a, RemoveFile)}
    keep |= {_dv_location(a) for a in staged.read_set.read_files.values()}
    for location in sorted(candidates - keep):
        try:
            log.store.delete(f"{log.table_path.rstrip('/')}/{location}")
        except OSError:
            _log.warning("could not delete the superseded DV file %s", location, exc_info=True)


def _dv_location(a: AddFile | RemoveFile) -> str | None:
    dv = a.deletion_vector
    if dv is None or dv.storage_type != "u":
        return None
    try:
        return descriptor_location(dv)
    except (InvalidTableError, InvalidArgumentError):
        return None

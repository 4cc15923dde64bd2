"""The deletion vectors of a rebase plan: read them while settling, write them to publish.

A :class:`~deltatx.kernel.row_level.plan.RebasePlan` holds the vectors a rebased commit must
carry as row sets. While settling, the commit's own planned rows are read from the plan
(:func:`own_rows`); the commit loop writes them with :func:`write_planned_vectors`, into one
DV file, just before the attempt that publishes. An attempt that loses and re-plans deletes
the file it never published (:func:`discard_unpublished`), so a commit leaves at most the one
DV file its published version references.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from deltatx.kernel.actions import Action, AddFile, DeletionVectorDescriptor, RemoveFile
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.log.deletion_vectors import DvReader, write_dvs

if TYPE_CHECKING:
    from deltatx.log.delta_log import DeltaLog


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

"""The plan a conflict settlement returns: the rebased commit and the vectors it must carry.

Settling a pending commit against a winner decides, it does not write. When rows allow the
commit to land after the winner, the result is a :class:`RebasePlan`: the pending commit with
its removes naming the entries now in force (files a compaction moved replaced by its outputs,
files with no row left only removed) and, per data file, the union of deleted rows its add
must carry. Those vectors are row sets here; the commit loop writes them once, into one DV
file, just before it publishes ``N.json`` (:mod:`deltatx.log.row_level.vectors`). So a commit
rebased over many winners leaves no DV file per winner behind, and explaining a conflict
(``deltatx conflicts``) writes nothing at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from deltatx.kernel.actions import Action, AddFile, DeletionVectorDescriptor
from deltatx.kernel.commits import PendingCommit
from deltatx.kernel.deletion_vectors import loose_stats
from deltatx.kernel.transaction import ReadSet


def _no_vectors() -> Mapping[str, frozenset[int]]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RebasePlan:
    """What a pending commit must carry after settling against winners; nothing is written.

    Attributes:
        pending: The pending commit, rebased: removes name the entries now in force, files
            a winner compacted are replaced by its outputs, files with nothing left are only
            removed. Until the plan is materialised, an add whose path is in ``vectors``
            carries a stale deletion vector descriptor (or none).
        vectors: Data file path -> every physical row its add must delete (the union of the
            winners' rows and this transaction's): the deletion vectors still to be written.
    """

    pending: PendingCommit
    vectors: Mapping[str, frozenset[int]] = field(default_factory=_no_vectors)

    def rebased(
        self,
        actions: Iterable[Action],
        *,
        vectors: Mapping[str, frozenset[int]] | None = None,
        read_set: ReadSet | None = None,
        compaction_baseline: Mapping[str, DeletionVectorDescriptor | None] | None = None,
    ) -> RebasePlan:
        """This plan with new actions, more planned vectors, and a new read set or baseline.

        Planned vectors of files no longer added are dropped.
        """
        acts = tuple(actions)
        merged = {**self.vectors, **(vectors or {})}
        added = {a.path for a in acts if isinstance(a, AddFile)}
        kept = {p: rows for p, rows in merged.items() if p in added}
        pending = replace(
            self.pending,
            actions=acts,
            read_set=self.pending.read_set if read_set is None else read_set,
            compaction_baseline=(
                self.pending.compaction_baseline
                if compaction_baseline is None
                else compaction_baseline
            ),
        )
        return RebasePlan(pending, MappingProxyType(kept))

    def is_planned(self, add: AddFile) -> bool:
        """Whether ``add`` (one of the pending actions) gets a vector from this plan."""
        return add.path in self.vectors

    def has_vector(self, add: AddFile) -> bool:
        """Whether ``add`` (one of the pending actions) deletes rows (planned or stored)."""
        return add.deletion_vector is not None or self.is_planned(add)


def with_deleted_rows(
    add: AddFile, deleted: frozenset[int], *, physical_rows: int | None
) -> AddFile | None:
    """``add`` with loose statistics, to carry ``deleted`` as its vector; None if no row is left.

    Args:
        add: The file entry.
        deleted: Every row its vector must delete (what it deleted already and the new rows).
        physical_rows: How many rows the file stores, or None when unknown (then the file is
            kept even if every row is deleted).
    """
    if physical_rows is not None and len(deleted) >= physical_rows:
        return None
    # Deleted rows may have held the bounds.
    return replace(add, stats=loose_stats(add.stats))

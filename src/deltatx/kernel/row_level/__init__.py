"""Row-level concurrency, the pure part: what rows decide and what a rebase must carry.

On tables with deletion vectors, Delta Lake's isolation-level documentation lets concurrent
UPDATE, DELETE and MERGE conflict only when they change the same rows, and OPTIMIZE without
ZORDER BY conflict with none of them. This package holds the protocol side of that, with no I/O:

* :mod:`~deltatx.kernel.row_level.limitations`: when row-level concurrency does not apply
  (non-deterministic conditions, subqueries, complex types, identity columns); conflicts are
  then detected per file.
* :mod:`~deltatx.kernel.row_level.rules`: which winner/loser pairs need rows compared; the
  checker raises what rows cannot settle and returns the rest as data.
* :mod:`~deltatx.kernel.row_level.provenance`: where a compaction put the rows of each source
  (the tag on its outputs) and how a row position maps through it.
* :mod:`~deltatx.kernel.row_level.plan`: the frozen plan a settlement returns: the rebased
  commit and the deletion vectors (row sets) it must carry, not yet written.

Reading deletion vectors and data files is I/O: :mod:`deltatx.log.row_level` does it.
"""

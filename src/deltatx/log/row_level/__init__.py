"""Row-level concurrency, the I/O part: read the rows, settle the winner, write the vectors.

The kernel (:mod:`deltatx.kernel.row_level`) says which rows must be compared; this package
reads deletion vectors and data files (pyarrow, no Spark) to decide:

* :mod:`~deltatx.log.row_level.resolution`: the entry point; DML vs DML by rows, appended
  rows under Serializable, and the rows of a data file a condition matches.
* :mod:`~deltatx.log.row_level.compaction_races`: OPTIMIZE and REORG vs DML, in either commit
  order, by following rows through a compaction's provenance.
* :mod:`~deltatx.log.row_level.vectors`: the plan's deletion vectors: read planned rows, and
  write them once, into one DV file, when the commit loop is about to publish.

Settling reads and never writes; only the commit loop writes (through ``vectors``).
"""

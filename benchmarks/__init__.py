"""deltatx benchmarks: ``make bench`` / ``make bench-quick`` (see benchmarks/README.md)."""

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv peer-venv demo test lint typecheck imports unit spark interop peer stress bench bench-quick docs chromium clean

# delta-spark, the peer engine (issue 17): its jars are vendored beside the repository or named
# by DELTATX_DELTA_SPARK_JARS. They need PySpark 4.2, so the peer suite runs delta-spark in an
# environment of its own, built only when the jars are there (a fresh clone without them skips
# the peer suite with a one-line reason).
PEER_VENV := .venv-peer
PEER_STAMP := $(PEER_VENV)/.installed
DELTA_SPARK_JARS ?= $(or $(DELTATX_DELTA_SPARK_JARS),../shared/vendor/delta-spark)
PEER_FOUND := $(wildcard $(DELTA_SPARK_JARS)/jars/delta-spark_*.jar $(DELTA_SPARK_JARS)/delta-spark_*.jar)
PEER_DEPS := $(if $(PEER_FOUND),$(PEER_STAMP))

# --no-compile: pip would byte-compile every module of every package (half of the install's
# time); Python compiles the few modules a run imports, once, on first import.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "deltatx needs Python 3.11 or newer")'
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

$(PEER_STAMP): tests/peer/requirements.txt
	test -d $(PEER_VENV) || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install --quiet --upgrade pip
	$(PEER_VENV)/bin/pip install --quiet --no-compile -r tests/peer/requirements.txt
	touch $(PEER_STAMP)

peer-venv: $(PEER_STAMP)

demo: $(STAMP)
	@$(BIN)/python -m deltatx.java_check
	$(BIN)/deltatx demo

lint: $(STAMP)
	$(BIN)/ruff format --check src tests
	$(BIN)/ruff check src tests

typecheck: $(STAMP)
	$(BIN)/mypy src

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

# pytest runs in TEST_WORKERS processes, each test file whole in one of them (its module
# fixtures built once), and the files whose tests share a JVM of their own (delta-spark's,
# the stress tests' writers) all in one, which starts it once (tests/conftest.py). On two
# cores, two workers finish in about four fifths of one worker's time: the unit tests, and
# the tests that wait for processes of their own, run beside the Spark tests. A Spark test
# alone already keeps one and a half cores busy, so a third worker only makes the JVMs
# compete (pytest took 1,660 s with three, 1,447 to 1,507 s with two).
# Each worker runs its own SparkSession (2 GB of heap by default): raise the count only where
# cores and memory allow it; TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2

test: lint typecheck imports docs chromium $(PEER_DEPS)
	$(BIN)/pytest tests -q -p no:cacheprovider --durations=30 -n $(TEST_WORKERS) --dist loadfile

# The documentation site: mkdocs + mkdocstrings (API reference from the docstrings) -> site/.
# --strict turns every warning (a broken link, a docstring that does not parse) into an error.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# The report test renders the demo's HTML in headless Chromium. Install Debian's package when
# it is missing and apt-get is usable as root; otherwise that test skips with its reason.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium for the report test (apt-get)"; \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1)) || \
		echo "could not install chromium; the report test will skip"; \
	else \
		echo "chromium not found and apt-get not usable as root; the report test will skip"; \
	fi

# The delta-spark side-by-side suite alone (skips with its reason when the jars are absent).
peer: $(STAMP) $(PEER_DEPS)
	DELTATX_PEER_FULL=1 $(BIN)/pytest tests/peer -q -p no:cacheprovider

# The stress suites at full size, then every case of the tables `make test` samples
# (pytest -m sample; the peer suite's are `make peer`'s).
stress: $(STAMP) $(PEER_DEPS)
	DELTATX_STRESS_FULL=1 DELTATX_PEER_APPEND_SECONDS=$${DELTATX_PEER_APPEND_SECONDS:-60} \
		$(BIN)/pytest tests/stress tests/peer/test_blind_appends.py tests/spark/test_s3_conflict_table.py \
		tests/spark/test_driver_update.py tests/spark/test_row_level_concurrency.py \
		tests/unit/kernel/test_conflicts_batched.py \
		tests/unit/kernel/test_evaluation.py tests/unit/kernel/test_file_predicate.py \
		tests/unit/kernel/test_file_columns.py \
		-q -s -p no:cacheprovider
	DELTATX_STRESS_FULL=1 $(BIN)/pytest tests/spark tests/interop -m sample -q -p no:cacheprovider

# Benchmarks (issue 7): deltatx next to delta-rs, plain Spark and the disk, measured in one
# run. Full suite -> benchmarks/results/latest.{json,md}; quick -> benchmarks/results/quick/.
bench: $(STAMP) $(PEER_DEPS)
	@$(BIN)/python -m deltatx.java_check
	$(BIN)/python -m benchmarks.run

bench-quick: $(STAMP)
	@$(BIN)/python -m deltatx.java_check
	$(BIN)/python -m benchmarks.run --quick

clean:
	rm -rf $(VENV) $(PEER_VENV) build dist *.egg-info src/*.egg-info site test-output

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck imports unit spark interop stress bench bench-quick clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "deltatx needs Python 3.11 or newer")'
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

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

test: lint typecheck imports
	$(BIN)/pytest tests -q -p no:cacheprovider

stress: $(STAMP)
	DELTATX_STRESS_FULL=1 $(BIN)/pytest tests/stress -q -s -p no:cacheprovider

# Benchmarks (issue 7): deltatx next to delta-rs, plain Spark and the disk, measured in one
# run. Full suite -> benchmarks/results/latest.{json,md}; quick -> benchmarks/results/quick/.
bench: $(STAMP)
	@$(BIN)/python -m deltatx.java_check
	$(BIN)/python -m benchmarks.run

bench-quick: $(STAMP)
	@$(BIN)/python -m deltatx.java_check
	$(BIN)/python -m benchmarks.run --quick

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info

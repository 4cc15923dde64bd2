PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck imports unit spark interop stress bench bench-quick docs chromium clean

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

test: lint typecheck imports docs chromium
	$(BIN)/pytest tests -q -p no:cacheprovider

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
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info site test-output

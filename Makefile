# The two commands of the README:
#   make demo   sets up a virtual environment and runs the examples on ./durableq.db
#               (a library tour, then a job queue run by `durableq worker`)
#   make test   sets up everything (Python packages, Java and the SQLite JDBC driver
#               for Spark) and runs the whole test suite
#   make docs   builds the documentation site into site/ (strict: a broken link fails)
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: demo test check docs setup setup-test system-deps clean lock

# durableq itself: enough for the demo (and the benchmark and stress runs, which add their own).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

# Plus the test extra: pytest, Hypothesis, pyspark, boto3, the AWS CLI,
# and the docs extra (MkDocs); at the versions of
# constraints/dev.txt, so that lint, types and tests give the same answer on every machine.
LOCK = constraints/dev.txt
$(BIN)/.installed-test: $(BIN)/.installed $(LOCK)
	$(BIN)/pip install --quiet -e '.[test]' -c $(LOCK)
	touch $@

setup: $(BIN)/.installed

setup-test: $(BIN)/.installed-test

system-deps:
	scripts/install-system-deps

demo: setup
	$(BIN)/python examples/quickstart.py durableq.db
	$(BIN)/python examples/jobs/producer.py durableq.db
	$(BIN)/durableq --db durableq.db worker thumbnails examples.jobs.handlers:make_thumbnail \
		--concurrency 4 --idle-timeout 5
	$(BIN)/durableq --db durableq.db stats

# Lint, formatting, strict types and the import contracts (configured in pyproject.toml), before the tests.
check: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The suite on PYTEST_WORKERS pytest-xdist workers (`make test PYTEST_WORKERS=2`: CI's two cores),
# or in one process as a plain `python -m pytest` (0, for now: two workers become the default once
# two whole runs under them are clean; docs/development.md). `--dist loadgroup`: tests/conftest.py
# keeps the tests that share a Spark session, a browser or a module's server on one worker.
PYTEST_WORKERS ?= 0
test: setup-test system-deps check
	$(BIN)/python -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build site *.egg-info

# The documentation site (mkdocs.yml, pages in docs/), strict: broken links, anchors and
# references fail the build. `$(BIN)/mkdocs serve` shows it while you edit.
$(BIN)/.installed-docs: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[docs]' -c $(LOCK)
	touch $@

docs: $(BIN)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Refresh constraints/dev.txt: the newest versions pyproject.toml allows, installed in a fresh
# virtual environment and frozen (review the diff, run `make test`, commit it).
LOCK_VENV = .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[test]'
	{ sed -n '/^#/p' $(LOCK) | sed 's/on Python [0-9.]*,/on '"$$($(LOCK_VENV)/bin/python --version)"',/'; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(LOCK_VENV)

# The benchmark harness of issue 8: every workload, results in bench/results/ (about 10-20 minutes).
.PHONY: bench
bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench

# The long mode of the reliability suite (issue 7): kills, faults and hostile input for MINUTES (default 60);
# then the hostile mix (issue 27: every public call composed at random, on a file, on PostgreSQL and
# through the endpoint) for HOSTILE_MINUTES (default 30; HOSTILE_ENGINE=sqlite|postgresql|endpoint|all).
# OUT=FILE.json and HOSTILE_OUT=FILE.json also write the figures there.  Fails if either failed.
.PHONY: stress
stress: setup-test system-deps
	status=0; \
	$(BIN)/python -m tests.reliability.stress --minutes $${MINUTES:-60} $${OUT:+--out "$$OUT"} || status=1; \
	$(BIN)/python -m tests.reliability.hostile --minutes $${HOSTILE_MINUTES:-30} --engine $${HOSTILE_ENGINE:-all} \
		$${HOSTILE_OUT:+--out "$$HOSTILE_OUT"} || status=1; \
	exit $$status

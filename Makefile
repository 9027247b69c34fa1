# The two commands of the README:
#   make demo   sets up a virtual environment and runs the example on ./durableq.db
#   make test   sets up everything (Python packages, Java and the SQLite JDBC driver
#               for Spark) and runs the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: demo test setup system-deps clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/.installed

system-deps:
	scripts/install-system-deps

demo: setup
	$(BIN)/python examples/quickstart.py durableq.db

test: setup system-deps
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info

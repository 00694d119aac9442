# Two commands a newcomer needs: `make demo` and `make test`. Both start from a bare Python.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf]'
	$(BIN)/byref demo

test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,pdf,postgres,s3,mcp]'
	./scripts/services.sh
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/pytest

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf,postgres,s3]'
	$(BIN)/byref bench context --sizes 2MB,20MB,200MB
	$(BIN)/byref bench dispatch
	$(BIN)/byref bench store
	$(BIN)/byref bench search

clean:
	rm -rf $(VENV) .byref byref-demo .pytest_cache .mypy_cache .ruff_cache

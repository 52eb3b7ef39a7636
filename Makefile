# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# What is installed into $(VENV): everything the tests use (.[test]), or only what the demo runs (.[demo]).
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
CHROMIUM ?= /usr/bin/chromium
# pytest's parallel workers for `make test` (pytest-xdist); each test file stays on one worker, so
# the module- and session-wide fixtures of a file (servers, recorded conversations) run once. Files
# go out in collection order, the slow ones first (tests/conftest.py), not the most numerous first.
TEST_WORKERS ?= 4
PYTEST_ARGS ?= -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

PHOENIX_VENV := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# The peers bench.peers compares with (Finchvox pulls Pipecat): virtualenvs of their own, built once.
PEERS_STAMP := .venv-peers/finchvox/.installed

.PHONY: demo test test-phoenix bench venv browser phoenix peers screenshots clean

# pip with a line of progress every 5 s; its own output goes to $(VENV)/install.log.
PIP_INSTALL := .ci/pip-install $(VENV)

$(BIN)/python:
	@echo "[1/2] creating the virtualenv $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP_INSTALL) --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	@echo "[2/2] installing otel-session and everything its tests use into $(VENV) (2-4 minutes; log: $(VENV)/install.log)"
	@$(PIP_INSTALL) -e '.[test]'
	@touch $(STAMP) $(DEMO_STAMP)
	@echo "      done: run commands as $(BIN)/otel-session ..., or '. $(BIN)/activate' once, then otel-session ..."

# The demo needs only its extra (.[test] holds it too: after `make test`, nothing to install).
$(DEMO_STAMP): $(BIN)/python pyproject.toml
	@echo "[2/2] installing otel-session and what its demo runs into $(VENV) (under a minute; log: $(VENV)/install.log)"
	@$(PIP_INSTALL) -e '.[demo]'
	@touch $(DEMO_STAMP)

venv: $(STAMP)

# Debian's chromium for the browser tests, Node.js for the viewer's script tests and npm for
# tests/node's packages (never a browser downloaded by a test tool). apt only when one is missing;
# .ci/apt-install waits for another apt run's lock (up to 10 min, saying so).
browser:
	@missing=; [ -x $(CHROMIUM) ] || missing=" chromium"; command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then echo "installing Debian's$$missing with apt-get"; .ci/apt-install $$missing; fi

# Arize Phoenix, a real OTLP backend for tests/demo/test_phoenix.py, in a virtualenv of its own
# (~850 MB; its dependencies and pytest plugin stay out of .venv). If its install fails, the test
# says so and skips; everything else still runs.
$(PHOENIX_STAMP):
	@echo "installing Arize Phoenix into $(PHOENIX_VENV) for the test against a real OTLP backend (about a minute)"
	@$(PYTHON) -m venv $(PHOENIX_VENV)
	@if .ci/pip-install $(PHOENIX_VENV) --quiet --upgrade pip && .ci/pip-install $(PHOENIX_VENV) arize-phoenix; then touch $@; \
	else echo "WARNING: could not install arize-phoenix; the Phoenix test will skip"; fi

phoenix: $(PHOENIX_STAMP)

# The whole suite (browser, frameworks, voice and the Phoenix test included), on parallel workers.
# Exit status 5 (no test collected) means the suite was not found: an error, never a pass.
test: $(STAMP) browser phoenix
	@OTEL_SESSION_PHOENIX_BIN=$(CURDIR)/$(PHOENIX_VENV)/bin/phoenix $(BIN)/python -m pytest $(PYTEST_ARGS) tests; \
	status=$$?; if [ $$status = 5 ]; then echo "make test: pytest collected no tests"; exit 1; fi; exit $$status

# The whole stack on 127.0.0.1 (collector, viewer, mock LLM, booking agent, driver); Ctrl-C stops it.
demo: $(DEMO_STAMP)
	@$(BIN)/otel-session demo

# docs/screenshots/demo-*.png, the README's pictures: the demo's own pages, light, dark and 800 px.
screenshots: $(STAMP) browser
	$(BIN)/python -m otel_session.demo.screenshots docs/screenshots

# Only the test against a real OTLP backend (Arize Phoenix on loopback).
test-phoenix: $(STAMP) phoenix
	OTEL_SESSION_PHOENIX_BIN=$(CURDIR)/$(PHOENIX_VENV)/bin/phoenix $(BIN)/python -m pytest -m otlp_backend tests/demo

# Finchvox for bench.peers, in .venv-peers/finchvox (the recipe is bench/peers.py's; if the install
# fails, bench.peers reports Finchvox as not measured).
$(PEERS_STAMP): | $(STAMP)
	@$(BIN)/python -m bench.peers --install

peers: $(PEERS_STAMP)

bench: $(STAMP) phoenix peers
	OTEL_SESSION_PHOENIX_BIN=$(abspath $(PHOENIX_VENV))/bin/phoenix $(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) .venv-peers .venv-thirdparty .venv-anthropic0 .venv-zero-code .venv-*.lock otel-session-data bench/results.json

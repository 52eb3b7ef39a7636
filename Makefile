# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

PHOENIX_VENV := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# The peers bench.peers compares with (Finchvox pulls Pipecat): virtualenvs of their own, built once.
PEERS_STAMP := .venv-peers/finchvox/.installed

.PHONY: demo test test-phoenix bench venv browser phoenix peers clean

INSTALL_LOG := $(VENV)/install.log
# pip's own output goes to $(INSTALL_LOG); on failure its end is shown.
PIP := $(BIN)/python -m pip install --disable-pip-version-check --quiet
LOGGED = >>$(INSTALL_LOG) 2>&1 || { tail -n 30 $(INSTALL_LOG); echo "failed; the whole log: $(INSTALL_LOG)"; exit 1; }

$(BIN)/python:
	@echo "[1/2] creating the virtualenv $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip $(LOGGED)

$(STAMP): $(BIN)/python pyproject.toml
	@echo "[2/2] installing otel-session and its dependencies into $(VENV) (about a minute; log: $(INSTALL_LOG))"
	@$(PIP) -e '.[test]' $(LOGGED)
	@touch $(STAMP)
	@echo "      done: run commands as $(BIN)/otel-session ..., or '. $(BIN)/activate' once, then otel-session ..."

venv: $(STAMP)

# Debian's chromium for the browser tests (never a browser downloaded by a test tool).
browser:
	@if [ ! -x $(CHROMIUM) ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi
	@command -v node >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs >/dev/null; }

# Arize Phoenix, a real OTLP backend for tests/demo/test_phoenix.py, in a virtualenv of its own
# (~850 MB; its dependencies and pytest plugin stay out of .venv). If its install fails, the test
# says so and skips; everything else still runs.
$(PHOENIX_STAMP):
	$(PYTHON) -m venv $(PHOENIX_VENV)
	@if $(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	    $(PHOENIX_VENV)/bin/python -m pip install --quiet arize-phoenix; then touch $@; \
	else echo "WARNING: could not install arize-phoenix; the Phoenix test will skip"; fi

phoenix: $(PHOENIX_STAMP)

test: $(STAMP) browser phoenix
	OTEL_SESSION_PHOENIX_BIN=$(CURDIR)/$(PHOENIX_VENV)/bin/phoenix $(BIN)/python -m pytest

# The whole stack on 127.0.0.1 (collector, viewer, mock LLM, booking agent, driver); Ctrl-C stops it.
demo: $(STAMP)
	@$(BIN)/otel-session demo

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
	rm -rf $(VENV) $(PHOENIX_VENV) .venv-peers otel-session-data bench/results.json

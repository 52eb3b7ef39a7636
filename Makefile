# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test test-phoenix bench venv browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

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

test: $(STAMP) browser
	$(BIN)/python -m pytest

# The whole stack on 127.0.0.1 (collector, viewer, mock LLM, booking agent, driver); Ctrl-C stops it.
demo: $(STAMP)
	$(BIN)/otel-session demo

# The demo's spans in a real OTLP backend, Arize Phoenix on loopback. Kept out of `make test`:
# the [phoenix] extra is ~850 MB and adds 100-175 s (install 53-130 s, the test ~45 s).
test-phoenix: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,phoenix]'
	$(BIN)/python -m pytest -m otlp_backend tests/demo

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) otel-session-data bench/results.json

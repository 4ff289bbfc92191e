# simroll: `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl

.PHONY: demo test test-slow lint format bench clean-venv browser

$(STAMP): pyproject.toml setup.py plugins/lerobot_env_simroll/pyproject.toml plugins/lerobot_policy_simvla/pyproject.toml
	@if [[ ! -x $(PY) ]]; then \
	  py=$$(scripts/find_python.sh) || exit 1; \
	  echo "creating $(VENV) with $$py"; \
	  "$$py" -m venv $(VENV) || exit 1; \
	fi
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install -e '.[dev]' -e plugins/lerobot_env_simroll -e plugins/lerobot_policy_simvla
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/simroll demo

test: $(STAMP) browser
	$(PY) -m pytest -q

# Headless chromium + chromedriver for the report's browser tests. Never fails the build: without
# apt-get or root the browser tests skip, saying why.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
	if command -v apt-get >/dev/null && $$sudo apt-get update -qq && \
	   $$sudo apt-get install -y -qq chromium chromium-driver >/dev/null; then \
	  echo "browser: installed chromium and chromium-driver"; \
	else \
	  echo "browser: could not install chromium (no apt-get or no root); browser tests will skip"; \
	fi

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) scripts/bench_env.py

clean-venv:
	rm -rf $(VENV)

# simroll: `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl

.PHONY: demo test test-slow lint format bench clean-venv

$(STAMP): pyproject.toml plugins/lerobot_env_simroll/pyproject.toml plugins/lerobot_policy_simvla/pyproject.toml
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

test: $(STAMP)
	$(PY) -m pytest -q

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

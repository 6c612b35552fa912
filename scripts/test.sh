#!/usr/bin/env bash
# Quick start, part 2: install ckpt with its test tools into .venv, then lint, type-check and run the
# tests. The Postgres tests need the server at CKPT_TEST_PG_DSN (default 127.0.0.1:5432, user postgres)
# and fail rather than skip unless CKPT_REQUIRE_POSTGRES=0.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# Editable, so the compiled judge (deerflow_ckpt/native/_inert.c) is built beside the sources the tests import.
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
# DeerFlow's pinned Postgres saver (its lock: 3.1.1), beside the installed one: compatibility tests put it first
# on a probe's PYTHONPATH (tests/conftest.py, pinned_saver). Installed here so no test reaches the network.
pinned=.venv/pinned/langgraph-checkpoint-postgres-3.1.1
if [ ! -e "$pinned/langgraph/checkpoint/postgres/__init__.py" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target "$pinned" \
    'langgraph-checkpoint-postgres==3.1.1'
fi
.venv/bin/ruff check deerflow_ckpt tests fixtures benchmarks scripts setup.py
.venv/bin/ruff format --check deerflow_ckpt tests fixtures benchmarks scripts setup.py
.venv/bin/mypy
# Bytecode for the sources the tests' ckpt processes import: under PYTHONDONTWRITEBYTECODE (set on some CI
# hosts) each of those processes would otherwise compile the package again (measured: fast loop 92 s -> 70 s).
.venv/bin/python -m compileall -q deerflow_ckpt fixtures tests > /dev/null
export CKPT_REQUIRE_POSTGRES="${CKPT_REQUIRE_POSTGRES:-1}"
# Two workers: the slow tests spend much of their time waiting (timeouts, signals, stalled proxies), which the
# second worker fills (2-core machine, 2026-12-07: the slow tests 312 s at -n 2 against 521 s serially, the fast
# loop 88 s against 90 s). A caller's own -n comes later and wins (-n 0: serial).
.venv/bin/python -m pytest -q -n 2 "$@"

#!/usr/bin/env bash
# Quick start, part 1: install ckpt into .venv, write a demo DeerFlow project (a legacy config.yaml and
# the embedded SQLite default, .deer-flow/data/deerflow.db, written by real LangGraph graphs with a few
# faults), then run the main job on it: migrate-config --diff, verify-shape, inspect thread.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check '.[fixtures]'
.venv/bin/python -m fixtures.demo demo
export PATH="$root/.venv/bin:$PATH"
cd demo

step() {
  printf '\n$ %s\n' "$*"
  set +e
  "$@"
  status=$?
  set -e
  printf '(exit %s)\n' "$status"
}
step ckpt migrate-config --diff
step ckpt verify-shape
step ckpt inspect thread mixed-writers-k10-k1000-k10

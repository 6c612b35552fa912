#!/usr/bin/env bash
# By hand, not in CI: build the compiled judge with AddressSanitizer, feed it damaged real rows, json payloads
# and deep ext chains in exact-size buffers for SECONDS (default 60), each summary it gives checked against
# the Python judge, stream DATABASE through the compiled SQLite reader (through its read-ahead layer; then again
# handing the deep proof its rows) and run the reader's, the layer's and the handover's tests under the same build,
# then rebuild it normally.
# Usage: scripts/fuzz-native.sh DATABASE [SECONDS]   (any SQLite checkpoint database, e.g. a fixture)
set -euo pipefail
cd "$(dirname "$0")/.."
database="$1"
seconds="${2:-60}"
rebuild() { env -u LD_PRELOAD -u PYTHONMALLOC -u ASAN_OPTIONS .venv/bin/python -m pip install -q --disable-pip-version-check -e . ; }
trap rebuild EXIT
CFLAGS="-fsanitize=address -fno-omit-frame-pointer -O1 -g" .venv/bin/python -m pip install -q --disable-pip-version-check -e .
export PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
.venv/bin/python scripts/fuzz_native.py "$database" "$seconds"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_sqlite_native.py \
  tests/test_deep_proof.py::test_rows_the_scan_hands_over_are_the_rows_read_again \
  tests/test_deep_proof.py::test_the_deep_scan_proves_from_the_handover \
  tests/test_deep_proof.py::test_the_handover_budget_is_a_threads \
  tests/test_deep_proof.py::test_the_compiled_reader_refuses_a_query_it_would_misread

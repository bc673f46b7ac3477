#!/usr/bin/env bash
# The Python package's checks, as CI runs them (a step of scripts/test.sh):
#   1. a virtual environment in python/.venv (created when missing; --fresh
#      deletes it first);
#   2. pip install "./python[dev,ray]": pip runs setup.py, which builds the Rust
#      library with cargo (target/) and packs it into the wheel;
#   3. ruff format --check, ruff check, mypy --strict on python/; ruff and
#      mypy (untyped bodies checked) on bench/;
#   4. cargo build --release --bin embd (test_families.py converts the family
#      models with it; skipped when EMBD_BIN or EMBD_FAMILIES_DIR is set);
#   5. pytest python/tests from outside the source tree (so the installed
#      wheel is what is tested), the Ray test required.
# Options: --fresh (new venv), --no-ray (skip installing Ray; its test is then
# skipped), -- <pytest args>.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export EMBD_SHARED_DIR="${EMBD_SHARED_DIR:-$root/../shared}"
venv="${EMBD_PY_VENV:-$root/python/.venv}"
fresh=0
ray=1
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fresh) fresh=1 ;;
    --no-ray) ray=0 ;;
    --) shift; pytest_args=("$@"); break ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$fresh" = 1 ]; then rm -rf "$venv"; fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
extras="dev"
if [ "$ray" = 1 ]; then extras="dev,ray"; fi
"$py" -m pip install -q "$root/python[$extras]"
# Always the library of this checkout: reinstall the package itself.
"$py" -m pip install -q --no-deps --force-reinstall "$root/python"

# test_families.py converts the reference family folders with the embd binary.
if [ -z "${EMBD_BIN:-}" ] && [ -z "${EMBD_FAMILIES_DIR:-}" ]; then
  (cd "$root" && cargo build --release --quiet --bin embd)
  export EMBD_BIN="${CARGO_TARGET_DIR:-$root/target}/release/embd"
fi

cd "$root/python"
"$venv/bin/ruff" format --check .
"$venv/bin/ruff" check .
"$venv/bin/mypy"
# The benchmark scripts, with the same pinned tools (settings: bench/pyproject.toml).
cd "$root/bench"
"$venv/bin/ruff" format --check .
"$venv/bin/ruff" check .
"$venv/bin/mypy"

cd "$root/python/tests"  # not python/: import the installed package, not src/
if [ "$ray" = 1 ]; then export EMBD_REQUIRE_RAY=1; fi
"$py" -m pytest -p no:cacheprovider -q -rs . "${pytest_args[@]+"${pytest_args[@]}"}"

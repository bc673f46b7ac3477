#!/usr/bin/env bash
# Creates the ignored .venv/ used by the container interop tests
# (tests/it/containers.rs skips those checks with a message when it is absent).
# PyPI finalfusion 0.7.1 ships only an sdist (Cython): it needs numpy and cython
# installed first and --no-build-isolation.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m venv .venv
.venv/bin/pip install -q numpy cython setuptools wheel
.venv/bin/pip install -q coremltools==9.0
.venv/bin/pip install -q --no-build-isolation finalfusion==0.7.1

#!/usr/bin/env bash
# Installs the system tools the build and tests need, only when missing.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v valgrind >/dev/null || need+=(valgrind)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v c++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  echo "note: go is at /usr/local/go/bin/go but not on PATH" >&2
fi

"""Runs embd-serve for the client tests: on 127.0.0.1, a free port, two engine
threads, stopped with SIGTERM (it must exit 0)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def serve(binary: Path, args: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Starts `binary ARGS --host 127.0.0.1 --port 0 --threads 2` (with `env`
    added to the environment); yields its URL."""
    proc = subprocess.Popen(
        [str(binary), *args, "--host", "127.0.0.1", "--port", "0", "--threads", "2"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "listening on http://" not in line:
        proc.kill()
        pytest.fail(f"embd-serve did not start: {line}{proc.stderr.read()}")
    url = line.split("listening on ")[1].split(" ")[0]
    # Keep draining stderr so that the server never blocks on it.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        assert code == 0, f"embd-serve exited {code} after SIGTERM"

"""Computation runs without the GIL: Python threads sharing one Embedder run
in parallel."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pytest

import embedder


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_other_python_threads_run_during_a_call(model_file: Path, corpus: List[str]) -> None:
    """While one thread is inside encode, a pure-Python loop in another thread
    keeps running (it could not if the call held the GIL)."""
    with embedder.Embedder(model_file, threads=1) as m:
        texts = corpus[:48]
        ticks = 0
        done = threading.Event()

        def spin() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            before = ticks
            m.encode(texts)  # one foreign call (batch_size >= len(texts))
            during = ticks - before
        finally:
            done.set()
            t.join()
        assert during > 1000, f"the other thread advanced only {during} times"


def two_threads_speedup(work_a: Callable[[], None], work_b: Callable[[], None]) -> float:
    """Time of a then b in one thread over the time of a and b in two threads."""

    def parallel() -> None:
        ts = [threading.Thread(target=work_a), threading.Thread(target=work_b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def serial() -> None:
        work_a()
        work_b()

    one = timed(serial)
    two = timed(parallel)
    return one / two


def control_speedup(model_file: Path, texts: List[str]) -> float:
    """What this machine gives two threads of this very work right now: the
    same texts encoded in one call with one worker thread, then with two (the
    library's own workers; no Python thread and no GIL involved). Hashing or
    any other stand-in can read 1.7x where two GEMM threads read 1.1x (two
    vCPUs that are one core's hyperthreads, a memory bus shared with other
    guests), so only the same work says what two threads can reach."""
    with (
        embedder.Embedder(model_file, threads=1) as one,
        embedder.Embedder(model_file, threads=2) as two,
    ):
        two.encode(texts[:4])  # warm up (one was warmed by the caller's embedder)
        return timed(lambda: one.encode(texts)) / timed(lambda: two.encode(texts))


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs")
def test_two_threads_finish_faster_than_one(model_file: Path, corpus: List[str]) -> None:
    """Two Python threads, each encoding a batch on one shared Embedder with one
    worker thread per call, finish faster than one thread encoding both
    batches: with the GIL held through a call they would take as long as one
    (1.0x). The bar is most of what the same work reaches on two of the
    library's own workers in the same round (the control), at most 1.3x; when
    the control itself stays under 1.3x (no second core free for this work)
    the test is skipped rather than reporting the machine as a GIL problem.
    Best of 5 rounds: the machine may be shared."""
    a, b = corpus[:48], corpus[48:96]
    with embedder.Embedder(model_file, threads=1) as m:
        m.encode(a[:4])  # warm up
        want = {"a": m.encode(a), "b": m.encode(b)}
        got: Dict[str, np.ndarray] = {}

        def enc(name: str, texts: List[str]) -> Callable[[], None]:
            return lambda: got.__setitem__(name, m.encode(texts))

        def bar(ctrl: float) -> float:
            # 1 + 0.6 * (ctrl - 1) is at least 1.18 once ctrl >= 1.3: far
            # above the 1.0x (+- a few %) of calls that do not overlap.
            return min(1.3, 1.0 + 0.6 * (ctrl - 1.0))

        rounds = []
        for _ in range(5):
            ours = two_threads_speedup(enc("a", a), enc("b", b))
            ctrl = control_speedup(model_file, a + b)
            rounds.append((ours, ctrl))
            if ctrl >= 1.3 and ours >= bar(ctrl):
                break
        assert np.array_equal(got["a"], want["a"]) and np.array_equal(got["b"], want["b"])
        print("GIL speedup (ours, control) per round:", [f"{o:.2f}x/{c:.2f}x" for o, c in rounds])
        if max(c for _, c in rounds) < 1.3:
            pytest.skip(f"no second core free for this work: two workers reach only {rounds}")
        assert any(c >= 1.3 and o >= bar(c) for o, c in rounds), rounds

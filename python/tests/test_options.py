"""The embedding options through the Python package: dimensions, prompts,
long-text windows, token info, output precision, progress and cancellation.

The quantized outputs are checked against numpy implementations of
sentence-transformers' ``quantize_embeddings`` formulas written here,
independently of the library (as ``scripts/quantize/check_quantize.py`` does
against the upstream file itself)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import pytest

from embedder import CancelledError, Embedder, InvalidArgumentError, Status
from embedder._native import lib

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map sentences to vectors.",
    "A third, rather different sentence about cooking pasta.",
    "",
]
LONG = "antidisestablishmentarianism and " * 200


def _open(model_file: Path, **kwargs: Any) -> Iterator[Embedder]:
    m = Embedder(model_file, **kwargs)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture(scope="module")
def ranges(model: Embedder, corpus: List[str]) -> npt.NDArray[np.float32]:
    """Caller ranges narrower than the data (values clamp at both ends), one
    dimension of zero width (step 1), as scripts/quantize/check_quantize.py."""
    calib = model.encode(corpus[:200])
    r = np.vstack((np.percentile(calib, 10, axis=0), np.percentile(calib, 90, axis=0)))
    r = r.astype(np.float32)
    r[1, 5] = r[0, 5]
    return r


# ------------------------------------------------------------ numpy reference


def ref_uint8(x: npt.NDArray[np.float32], r: npt.NDArray[np.float32]) -> npt.NDArray[np.uint8]:
    lo, hi = r[0].astype(np.float32), r[1].astype(np.float32)
    step = (hi - lo) / np.float32(255)
    step = np.where(step == 0, np.float32(1), step).astype(np.float32)
    q = np.clip(np.floor((x.astype(np.float32) - lo) / step), 0, 255)
    out: npt.NDArray[np.uint8] = q.astype(np.uint8)
    return out


def ref_int8(x: npt.NDArray[np.float32], r: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
    return (ref_uint8(x, r).astype(np.int16) - 128).astype(np.int8)


def ref_ubinary(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint8]:
    return np.packbits(x > 0, axis=-1)


def ref_binary(x: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
    return (ref_ubinary(x).astype(np.int16) - 128).astype(np.int8)


# ----------------------------------------------------------------- dimensions


@pytest.mark.parametrize("kw", ["dimensions", "truncate_dim"])
def test_dimensions_cut_and_renormalized(model: Embedder, model_file: Path, kw: str) -> None:
    full = model.encode(TEXTS[:3])
    cut = full[:, :128] / np.linalg.norm(full[:, :128], axis=1, keepdims=True)
    for m in _open(model_file, **{kw: 128}):
        assert m.dim == 128
        got = m.encode(TEXTS[:3])
        assert got.shape == (3, 128) and got.dtype == np.float32
        np.testing.assert_allclose(got, cut, rtol=0, atol=1e-6)
        assert m.encode(TEXTS[0]).shape == (128,)


def test_dimensions_errors(model_file: Path) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        Embedder(model_file, dimensions=1000)
    assert e.value.status == Status.INVALID_ARGUMENT
    assert "1000" in e.value.message and "384" in e.value.message  # the library's message
    with pytest.raises(InvalidArgumentError, match="alias"):
        Embedder(model_file, dimensions=64, truncate_dim=128)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        Embedder(model_file, dimensions=-1)
    with pytest.raises(TypeError):
        Embedder(model_file, dimensions="64")  # type: ignore[arg-type]


# -------------------------------------------------------------------- prompts


def test_prompt_equals_prompt_plus_text(model: Embedder, model_file: Path) -> None:
    want = model.encode(["query: " + t for t in TEXTS])
    for m in _open(model_file, prompt="query: "):
        got, tokens, _ = m.encode(TEXTS, return_token_info=True)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert tokens.tolist() == [model.count_tokens("query: " + t) for t in TEXTS]


def test_prompt_errors(model_file: Path) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        Embedder(model_file, prompt_name="no-such-prompt")
    assert "no-such-prompt" in e.value.message
    with pytest.raises(InvalidArgumentError):
        Embedder(model_file, prompt="query: ", prompt_name="query")
    with pytest.raises(InvalidArgumentError, match="NUL"):
        Embedder(model_file, prompt="a\0b")
    with pytest.raises(TypeError):
        Embedder(model_file, prompt=b"query: ")  # type: ignore[arg-type]


# ----------------------------------------------------------------- token info


def test_token_info_matches_count_tokens(model: Embedder) -> None:
    texts = TEXTS + [LONG]
    vecs, tokens, truncated = model.encode(texts, return_token_info=True, batch_size=2)
    np.testing.assert_array_equal(vecs, model.encode(texts))
    assert tokens.dtype == np.int64 and truncated.dtype == np.bool_
    assert tokens.tolist() == [model.count_tokens(t) for t in texts]
    assert tokens[-1] == model.max_seq_length
    assert truncated.tolist() == [False] * len(TEXTS) + [True]
    v, t, tr = model.encode(LONG, return_token_info=True)
    assert v.shape == (model.dim,) and t.shape == () and tr.shape == ()
    assert int(t) == model.max_seq_length and bool(tr)


def test_window_overlap(model: Embedder, model_file: Path) -> None:
    for m in _open(model_file, window_overlap=32):
        vecs, tokens, truncated = m.encode(TEXTS[:2] + [LONG], return_token_info=True)
        np.testing.assert_allclose(vecs[:2], model.encode(TEXTS[:2]), rtol=0, atol=1e-6)
        assert tokens[2] > m.max_seq_length and not truncated.any()
        assert abs(float(np.linalg.norm(vecs[2])) - 1.0) < 1e-5
        assert not np.allclose(vecs[2], model.encode(LONG), atol=1e-3)
    with pytest.raises(InvalidArgumentError):
        Embedder(model_file, window_overlap=10_000)


# ----------------------------------------------------------- output precision


def test_int8_uint8_with_caller_ranges(
    model_file: Path, corpus: List[str], ranges: npt.NDArray[np.float32]
) -> None:
    texts = corpus[200:300]
    for m in _open(model_file, output_ranges=ranges):
        x = m.encode(texts)
        u = m.encode(texts, precision="uint8", batch_size=7)
        assert u.dtype == np.uint8 and u.shape == x.shape
        want = ref_uint8(x, ranges)
        assert (want == 0).any() and (want == 255).any()  # clamping happened
        np.testing.assert_array_equal(u, want)
        i = m.encode(texts, precision="int8")
        assert i.dtype == np.int8
        np.testing.assert_array_equal(i, ref_int8(x, ranges))
        one = m.encode(texts[0], precision="int8")
        assert one.shape == (m.dim,)
        np.testing.assert_array_equal(one, i[0])
        out = np.empty((len(texts), m.dim), np.uint8)
        assert m.encode(texts, precision="uint8", out=out) is out
        np.testing.assert_array_equal(out, u)


def test_int8_with_dimensions_and_ranges(
    model_file: Path, corpus: List[str], ranges: npt.NDArray[np.float32]
) -> None:
    r = np.ascontiguousarray(ranges[:, :100])
    for m in _open(model_file, dimensions=100, output_ranges=r):
        x = m.encode(corpus[:50])
        np.testing.assert_array_equal(m.encode(corpus[:50], precision="int8"), ref_int8(x, r))


@pytest.mark.parametrize("dims", [None, 100])
def test_binary_ubinary(model_file: Path, corpus: List[str], dims: Optional[int]) -> None:
    texts = corpus[:60]
    for m in _open(model_file, dimensions=dims):
        x = m.encode(texts)
        ub = m.encode(texts, precision="ubinary")
        assert ub.dtype == np.uint8 and ub.shape == (len(texts), (m.dim + 7) // 8)
        np.testing.assert_array_equal(ub, ref_ubinary(x))
        b = m.encode(texts, precision="binary", batch_size=9)
        assert b.dtype == np.int8
        np.testing.assert_array_equal(b, ref_binary(x))
        np.testing.assert_array_equal(b, (ub.astype(np.int16) - 128).astype(np.int8))
        assert m.encode(texts[0], precision="binary").shape == ((m.dim + 7) // 8,)


def test_output_precision_errors(model: Embedder, model_file: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="accepted"):
        model.encode("x", precision="float16")
    if not lib().embd_has_output_ranges(model._handle()):
        with pytest.raises(InvalidArgumentError) as e:  # no ranges: the library refuses
            model.encode("x", precision="int8")
        assert e.value.message
    with pytest.raises(InvalidArgumentError, match=r"\(2, dim\)"):
        Embedder(model_file, output_ranges=np.zeros(384, np.float32))
    with pytest.raises(InvalidArgumentError):  # 2 x 100 ranges for 384 dimensions
        Embedder(model_file, output_ranges=np.zeros((2, 100), np.float32))
    with pytest.raises(InvalidArgumentError, match="dtype"):
        model.encode(["x"], precision="ubinary", out=np.empty((1, 48), np.int8))


def test_compute_precision(model_file: Path) -> None:
    for m in _open(model_file, compute_precision="bf16"):
        assert m.precision == "bf16"
    for m in _open(model_file, precision="f32"):  # the older name still works
        assert m.precision == "f32"
    with pytest.raises(InvalidArgumentError):
        Embedder(model_file, precision="f32", compute_precision="bf16")
    with pytest.raises(InvalidArgumentError):
        Embedder(model_file, compute_precision="float32")


# ------------------------------------------------- progress and cancellation


def test_progress_callback_rising(model: Embedder, corpus: List[str]) -> None:
    texts = corpus[:40]
    calls: List[Tuple[int, int]] = []
    vecs = model.encode(texts, batch_size=16, progress_callback=lambda d, t: calls.append((d, t)))
    np.testing.assert_array_equal(vecs, model.encode(texts))
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(done) >= 3
    assert {t for _, t in calls} == {40}
    assert calls[-1] == (40, 40)
    assert {16, 32, 40} <= set(done)


def test_show_progress_bar(model: Embedder, capsys: pytest.CaptureFixture[str]) -> None:
    model.encode(TEXTS, show_progress_bar=True)
    assert f"{len(TEXTS)}/{len(TEXTS)}" in capsys.readouterr().err


def test_cancel_by_callback(model: Embedder, corpus: List[str]) -> None:
    texts = corpus[:100]

    def boom(done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(CancelledError) as e:
        model.encode(texts, progress_callback=boom)
    assert e.value.status == Status.CANCELLED and int(e.value.status) == 7
    assert isinstance(e.value.__cause__, RuntimeError)
    with pytest.raises(CancelledError):
        model.encode(texts, progress_callback=lambda d, t: True)
    # The model is fine afterwards, and the hook does not outlive its call.
    np.testing.assert_array_equal(model.encode(texts[:3]), model.encode(texts[:3], batch_size=1))


def test_progress_from_another_thread(model: Embedder) -> None:
    calls: List[int] = []
    errors: List[BaseException] = []

    def run() -> None:
        try:
            model.encode(TEXTS, progress_callback=lambda d, t: calls.append(d))
            model.encode(TEXTS, progress_callback=lambda d, t: True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert calls and calls[-1] == len(TEXTS)
    assert len(errors) == 1 and isinstance(errors[0], CancelledError)


@pytest.mark.skipif(not hasattr(signal, "raise_signal"), reason="needs signal.raise_signal")
@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="needs the main thread"
)
def test_ctrl_c_cancels(model: Embedder, corpus: List[str]) -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a custom SIGINT handler is installed")
    texts = corpus[:300]
    seen: List[int] = []

    def press_ctrl_c(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 1:
            signal.raise_signal(signal.SIGINT)
            os.sched_yield()

    with pytest.raises(KeyboardInterrupt):
        model.encode(texts, batch_size=len(texts), progress_callback=press_ctrl_c)
    assert max(seen) < len(texts)  # stopped early
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    assert model.encode(TEXTS[0]).shape == (model.dim,)

"""The Reranker against sentence-transformers' CrossEncoder reference
(``shared/reference/families/minilm-reranker_*``): ids and types, scores and
logits on every line, the rank file's order, the return shapes of predict and
rank, and misuse."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from conftest import REPO, model_path, shared_dir

import embedder


def reranker_path() -> Path:
    env = os.environ.get("EMBD_RERANK_MODEL")
    return Path(env) if env else REPO / "models" / "minilm-reranker.weights"


@pytest.fixture(scope="module")
def reranker() -> Any:
    p = reranker_path()
    if not p.is_file():
        pytest.fail(f"{p} is missing: run scripts/fetch_reranker.sh or set EMBD_RERANK_MODEL")
    # The reference was made with CrossEncoder(max_length=256).
    r = embedder.Reranker(p, max_length=256)
    yield r
    r.close()


def families(name: str) -> Path:
    p = shared_dir() / "reference" / "families" / name
    for folder in ("architectures", "encoders"):
        if not p.is_file():
            p = shared_dir() / "reference" / folder / name
    if not p.is_file():
        pytest.fail(f"{p} is missing: set EMBD_SHARED_DIR to the shared/ folder")
    return p


@pytest.fixture(scope="module")
def lines() -> List[Dict[str, Any]]:
    with families("minilm-reranker_reference.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_scores_and_logits_on_every_line(reranker: Any, lines: List[Dict[str, Any]]) -> None:
    assert len(lines) == 151
    pairs = [(x["query"], x["passage"]) for x in lines]
    scores, tokens, truncated = reranker.predict(pairs, batch_size=16, return_token_info=True)
    logits = reranker.predict(pairs, raw=True)
    assert scores.dtype == np.float32 and scores.shape == (151,)
    want_s = np.array([x["score"] for x in lines], np.float64)
    want_l = np.array([x["logit"] for x in lines], np.float64)
    assert np.max(np.abs(scores - want_s)) <= 1e-5
    assert np.max(np.abs(logits - want_l)) <= 1e-4
    assert list(tokens) == [len(x["input_ids"]) for x in lines]
    assert truncated.any()  # the reference has pairs that need the cut
    # One pair (not in a list) gives one value.
    one = reranker.predict(pairs[1])
    assert one.shape == () and abs(float(one) - lines[1]["score"]) <= 1e-5


def test_rank_order_and_shapes(reranker: Any) -> None:
    with families("minilm-reranker_rank.json").open(encoding="utf-8") as f:
        ref = json.load(f)
    got = reranker.rank(ref["query"], ref["documents"])
    assert [g["corpus_id"] for g in got] == [r["corpus_id"] for r in ref["ranking"]]
    for g, r in zip(got, ref["ranking"]):
        assert set(g) == {"corpus_id", "score"}
        assert abs(g["score"] - r["score"]) <= 1e-5
    top = reranker.rank(ref["query"], ref["documents"], top_k=10, return_documents=True)
    assert [g["corpus_id"] for g in top] == [r["corpus_id"] for r in ref["ranking"][:10]]
    assert all(g["text"] == ref["documents"][g["corpus_id"]] for g in top)


def test_misuse(reranker: Any) -> None:
    docs = ["a passage", "another one"]
    for kwargs in ({"query": "", "documents": docs}, {"query": "q", "documents": []}):
        with pytest.raises(embedder.InvalidArgumentError):
            reranker.rank(**kwargs)
    for k in (0, 3):
        with pytest.raises(embedder.InvalidArgumentError, match="top_k"):
            reranker.rank("q", docs, top_k=k)
    with pytest.raises(embedder.InvalidArgumentError, match="pair"):
        reranker.predict([("only one",)])
    # A NUL is text (cleaned away as a control character).
    a = reranker.predict([("q", "a passage")])
    b = reranker.predict([("q", "a pas\0sage")])
    c = reranker.predict([("q", "a passage\0")])
    assert a[0] == b[0] == c[0]
    # An embedding model is not a reranker.
    if model_path().is_file():
        with pytest.raises(embedder.ModelFileError, match="embedder"):
            embedder.Reranker(model_path())
    r = embedder.Reranker(reranker_path(), max_length=256)
    r.close()
    with pytest.raises(embedder.ClosedError):
        r.predict([("q", "p")])


# ---- both reference cross-encoders, line by line ----------------------------


def _tiny_path(env: str, name: str) -> Path:
    """$env, else models/<name>.weights (scripts/fetch_reranker.sh converts it)."""
    return Path(os.environ.get(env) or REPO / "models" / f"{name}.weights")


def _tiny_reranker(env: str, name: str, max_length: int | None = None) -> Any:
    """`_tiny_path` opened at the model's own maximum length (each reference's),
    checked against `max_length` where given."""
    p = _tiny_path(env, name)
    if not p.is_file():
        pytest.fail(f"{p} is missing: run scripts/fetch_reranker.sh or set {env}")
    r = embedder.Reranker(p)
    if max_length is not None:
        assert r.max_length == max_length
    return r


@pytest.fixture(scope="module")
def xlmr_reranker() -> Any:
    r = _tiny_reranker("EMBD_XLMR_RERANK_MODEL", "xlmr-reranker-tiny", 128)
    yield r
    r.close()


@pytest.fixture(scope="module")
def modernbert_reranker() -> Any:
    # CrossEncoder's max_length 256 (the tokenizer's).
    r = _tiny_reranker("EMBD_MODERNBERT_RERANK_MODEL", "modernbert-reranker-tiny")
    yield r
    r.close()


@pytest.fixture(scope="module")
def qwen3_reranker() -> Any:
    r = _tiny_reranker("EMBD_QWEN3_RERANK_MODEL", "qwen3-reranker-tiny", 512)
    yield r
    r.close()


@pytest.fixture(scope="module")
def deberta_reranker() -> Any:
    r = _tiny_reranker("EMBD_DEBERTA_RERANK_MODEL", "deberta-reranker-tiny", 512)
    yield r
    r.close()


def _reference(name: str) -> List[Dict[str, Any]]:
    with families(f"{name}_reference.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize(
    "which,name,n_lines",
    [
        ("reranker", "minilm-reranker", 151),
        ("xlmr_reranker", "xlmr-reranker-tiny", 260),
        ("modernbert_reranker", "modernbert-reranker-tiny", 213),
        ("deberta_reranker", "deberta-reranker-tiny", 213),
    ],
)
def test_reference_every_line_ids_scores_logits(
    request: Any, which: str, name: str, n_lines: int
) -> None:
    r = request.getfixturevalue(which)
    lines = _reference(name)
    assert len(lines) == n_lines
    for i, x in enumerate(lines):
        ids, types = r.tokenize(x["query"], x["passage"])
        assert ids == x["input_ids"], f"{name} line {i + 1}"
        # A file without token types: all 0 (RoBERTa/XLM-R). DeBERTa-v2's
        # model has no token-type table (type_vocab_size 0): the reranker
        # gives 0s where its tokenizer writes the passage's 1s.
        if name != "deberta-reranker-tiny":
            assert types == x.get("token_type_ids", [0] * len(ids)), f"{name} line {i + 1}"
    pairs = [(x["query"], x["passage"]) for x in lines]
    scores = r.predict(pairs)
    logits = r.predict(pairs, raw=True)
    ds = np.max(np.abs(scores - np.array([x["score"] for x in lines], np.float64)))
    dl = np.max(np.abs(logits - np.array([x["logit"] for x in lines], np.float64)))
    print(f"{name}: max |score diff| {ds:.3g}, max |logit diff| {dl:.3g}")
    assert ds <= 1e-5 and dl <= 1e-4


def test_qwen3_reranker_every_line_and_prompt(qwen3_reranker: Any) -> None:
    """The LLM reranker (chat template, yes/no logits at the last token):
    every reference line's score and logit, the last 30 under their
    instruction per call, and the same instruction given at open."""
    lines = _reference("qwen3-reranker-tiny")
    assert len(lines) == 243
    groups: Dict[Any, List[Dict[str, Any]]] = {}
    for x in lines:
        groups.setdefault(x.get("prompt"), []).append(x)
    assert len(groups) == 2
    for prompt, xs in groups.items():
        pairs = [(x["query"], x["passage"]) for x in xs]
        scores = qwen3_reranker.predict(pairs, prompt=prompt)
        logits = qwen3_reranker.predict(pairs, raw=True, prompt=prompt)
        ds = np.max(np.abs(scores - np.array([x["score"] for x in xs], np.float64)))
        dl = np.max(np.abs(logits - np.array([x["logit"] for x in xs], np.float64)))
        print(f"qwen3-reranker-tiny prompt={prompt!r}: |score| {ds:.3g}, |logit| {dl:.3g}")
        assert ds <= 1e-5 and dl <= 1e-4
        if prompt is not None:
            with embedder.Reranker(qwen3_reranker_path(), prompt=prompt) as at_open:
                assert np.array_equal(at_open.predict(pairs), scores)
            docs = [x["passage"] for x in xs]
            ranked = qwen3_reranker.rank(xs[0]["query"], docs, prompt=prompt)
            one = qwen3_reranker.predict([(xs[0]["query"], d) for d in docs], prompt=prompt)
            want = sorted(range(len(xs)), key=lambda i: (-float(one[i]), i))
            assert [g["corpus_id"] for g in ranked] == want
    with pytest.raises(embedder.InvalidArgumentError):
        qwen3_reranker.predict([("q", "p")], prompt="a\0b")


def test_a_prompt_is_refused_by_a_classic_cross_encoder(modernbert_reranker: Any) -> None:
    with pytest.raises(embedder.InvalidArgumentError, match="takes no prompt"):
        modernbert_reranker.predict([("q", "p")], prompt="x")
    with pytest.raises(embedder.InvalidArgumentError, match="takes no prompt"):
        modernbert_reranker.rank("q", ["p"], prompt="x")


def qwen3_reranker_path() -> Path:
    return _tiny_path("EMBD_QWEN3_RERANK_MODEL", "qwen3-reranker-tiny")


@pytest.mark.parametrize(
    "which,name",
    [
        ("xlmr_reranker", "xlmr-reranker-tiny"),
        ("modernbert_reranker", "modernbert-reranker-tiny"),
        ("qwen3_reranker", "qwen3-reranker-tiny"),
        ("deberta_reranker", "deberta-reranker-tiny"),
    ],
)
def test_rank_order(request: Any, which: str, name: str) -> None:
    with families(f"{name}_rank.json").open(encoding="utf-8") as f:
        ref = json.load(f)
    got = request.getfixturevalue(which).rank(ref["query"], ref["documents"])
    # A document whose text another one repeats may take that one's place:
    # identical pairs score identically here (ties by index), while the
    # reference's batched, padded run breaks them by rounding noise.
    docs = ref["documents"]
    assert [docs[g["corpus_id"]] for g in got] == [docs[r["corpus_id"]] for r in ref["ranking"]]
    for g, r in zip(got, ref["ranking"]):
        assert abs(g["score"] - r["score"]) <= 1e-5


def test_tokenize_long_pair_and_misuse(reranker: Any) -> None:
    # Longer than the first buffer: the full cut pair comes back.
    ids, types = reranker.tokenize("word " * 300, "other " * 300)
    assert len(ids) == len(types) == reranker.max_length
    with pytest.raises(TypeError):
        reranker.tokenize(None, "p")

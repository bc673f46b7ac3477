"""`embd serve` from the clients people use: the OpenAI Python SDK (float and
base64), huggingface_hub's InferenceClient (TEI's client), requests; a
bounded schemathesis run against /openapi.json; a bounded load test of 64
concurrent keep-alive clients. Embeddings are compared with the
sentence-transformers reference (shared/reference/minilm_reference.jsonl).

Only loopback addresses; every loop is bounded in count and time.
Env: EMBD_SERVE_BIN (default target/release/embd-serve), EMBD_TEST_MODEL
(default models/all-MiniLM-L6-v2.weights), EMBD_SHARED_DIR (default
../shared beside the repository), SCHEMATHESIS_EXAMPLES (default 25),
LOAD_REQUESTS (per client, default 16).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from serve_process import serve

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("EMBD_SERVE_BIN", REPO / "target" / "release" / "embd-serve"))
MODEL = Path(os.environ.get("EMBD_TEST_MODEL", REPO / "models" / "all-MiniLM-L6-v2.weights"))
# The reference cross-encoder (scripts/fetch_reranker.sh), served beside MODEL.
RERANKER = REPO / "models" / "minilm-reranker.weights"


def shared_dir() -> Path:
    env = os.environ.get("EMBD_SHARED_DIR")
    if env:
        return Path(env)
    for p in (REPO.parent / "shared", REPO.parent.parent / "shared"):
        if (p / "reference").is_dir():
            return p
    return REPO.parent / "shared"


@pytest.fixture(scope="session")
def reference() -> list[dict[str, Any]]:
    p = shared_dir() / "reference" / "minilm_reference.jsonl"
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """embd-serve on 127.0.0.1, a free port; stopped with SIGTERM (must exit 0)."""
    for p in (BIN, MODEL, RERANKER):
        if not p.exists():
            pytest.fail(
                f"{p} is missing (cargo build --release -p embd-server; "
                "scripts/fetch_model.sh; scripts/fetch_reranker.sh)"
            )
    args = [
        "-m",
        str(MODEL),
        "-m",
        f"rr={RERANKER}",
        # CrossEncoder's max_length of the reference (MiniLM's own is 256).
        "--max-input-length",
        "256",
        "--max-client-batch-size",
        "64",
    ]
    with serve(BIN, args) as url:
        yield url


def close(a: np.ndarray, b: list[float]) -> None:
    v = np.asarray(a, dtype=np.float32)
    w = np.asarray(b, dtype=np.float32)
    assert v.shape == w.shape
    cos = float(v @ w / (np.linalg.norm(v) * np.linalg.norm(w)))
    assert cos > 0.9999, cos
    assert float(np.max(np.abs(v - w))) < 2e-3


def texts_of(reference: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first n reference lines with words (OpenAI refuses "", and the
    token-id inputs need ids)."""
    return [r for r in reference if len(r["input_ids"]) > 2][:n]


def test_openai_sdk_base64_and_float(server: str, reference: list[dict[str, Any]]) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=60)
    rows = texts_of(reference, 24)
    texts = [r["text"] for r in rows]
    # The SDK's default: base64 (decoded by the SDK itself).
    got = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    assert len(got.data) == len(texts)
    assert got.usage.prompt_tokens == sum(len(r["input_ids"]) for r in rows)
    for d, r in zip(got.data, rows):
        close(np.asarray(d.embedding), r["embedding"])
    flt = client.embeddings.create(model="m", input=texts, encoding_format="float")
    for a, b in zip(got.data, flt.data):
        assert a.index == b.index
        assert np.array_equal(
            np.asarray(a.embedding, np.float32), np.asarray(b.embedding, np.float32)
        )
    # Token ids in, and a single string.
    ids = [r["input_ids"][1:-1] for r in rows[:4]]
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    for d, r in zip(by_ids.data, rows):
        close(np.asarray(d.embedding), r["embedding"])
    one = client.embeddings.create(model="m", input=texts[0], dimensions=64)
    assert len(one.data[0].embedding) == 64
    # Errors reach the SDK as its own exceptions, with our message.
    import openai

    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="m", input="")
    with pytest.raises(openai.UnprocessableEntityError, match="vocabulary"):
        client.embeddings.create(model="m", input=[[1, 99999999]])


def test_huggingface_inference_client(server: str, reference: list[dict[str, Any]]) -> None:
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=server, timeout=60)
    for r in texts_of(reference, 6):
        v = client.feature_extraction(r["text"])
        v = np.asarray(v)
        assert v.shape == (1, 384), v.shape
        close(v[0], r["embedding"])


def test_requests_tokenize_similarity_rerank(server: str, reference: list[dict[str, Any]]) -> None:
    s = requests.Session()
    rows = [r for r in reference if len(r["input_ids"]) < 256][:20]
    got = s.post(server + "/tokenize", json={"inputs": [r["text"] for r in rows]}, timeout=60)
    assert got.status_code == 200
    for toks, r in zip(got.json(), rows):
        assert [t["id"] for t in toks] == r["input_ids"], r["text"]
    sims = s.post(
        server + "/similarity",
        json={
            "inputs": {
                "source_sentence": rows[1]["text"],
                "sentences": [rows[1]["text"], rows[2]["text"]],
            }
        },
        timeout=60,
    ).json()
    assert abs(sims[0] - 1.0) < 1e-5
    # Rerank against CrossEncoder.rank of the reference cross-encoder.
    with open(shared_dir() / "reference" / "families" / "minilm-reranker_rank.json") as f:
        rank = json.load(f)
    got = s.post(
        server + "/rerank",
        json={"query": rank["query"], "texts": rank["documents"][:32]},
        timeout=60,
    ).json()
    want = [w for w in rank["ranking"] if w["corpus_id"] < 32]
    assert [g["index"] for g in got] == [w["corpus_id"] for w in want]
    for g, w in zip(got, want):
        assert abs(g["score"] - w["score"]) <= 1e-5
    got = s.post(
        server + "/v1/rerank",
        json={"model": "rr", "query": rank["query"], "documents": rank["documents"][:32],
              "top_n": 3, "return_documents": True},
        timeout=60,
    ).json()
    assert [g["index"] for g in got["results"]] == [w["corpus_id"] for w in want[:3]]
    assert got["results"][0]["document"]["text"] == rank["documents"][want[0]["corpus_id"]]
    r = s.post(server + "/rerank", json={"query": "q", "texts": ["a"], "model": "x"}, timeout=60)
    assert r.status_code == 200
    r = s.post(server + "/embed", json={"inputs": "a", "model": "rr"}, timeout=60)
    assert r.status_code == 424 and r.json()["error_type"] == "backend"
    # Token vectors: one per token of the reference ids.
    tv = s.post(server + "/embed_all", json={"inputs": rows[3]["text"]}, timeout=60).json()
    assert len(tv[0]) == len(rows[3]["input_ids"]) and len(tv[0][0]) == 384
    info = s.get(server + "/info", timeout=60).json()
    assert info["max_input_length"] == 256
    assert "embd_requests_total" in s.get(server + "/metrics", timeout=60).text


def test_schemathesis_finds_no_server_error(server: str) -> None:
    """schemathesis generates requests from /openapi.json (bounded); none may
    get a 5xx or break the connection."""
    n = os.environ.get("SCHEMATHESIS_EXAMPLES", "25")
    st = Path(sys.executable).parent / "schemathesis"
    cmd = [
        str(st),
        "run",
        server + "/openapi.json",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        n,
        "--request-timeout",
        "30",
    ]
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    print(out[-4000:])
    assert p.returncode == 0, out[-4000:]
    # The server is still up and right.
    assert requests.get(server + "/health", timeout=10).status_code == 200


def test_load_64_concurrent_clients(server: str, reference: list[dict[str, Any]]) -> None:
    """64 keep-alive clients, each sending LOAD_REQUESTS single-text requests
    (bounded at 240 s in all); every answer must be complete and match the
    reference."""
    per = int(os.environ.get("LOAD_REQUESTS", "16"))
    rows = texts_of(reference, 200)
    deadline = time.monotonic() + 240

    def client(k: int) -> int:
        s = requests.Session()
        done = 0
        for j in range(per):
            if time.monotonic() > deadline:
                raise TimeoutError(f"client {k}: load test over its time bound")
            r = rows[(k * per + j) % len(rows)]
            got = s.post(server + "/embed", json={"inputs": r["text"]}, timeout=120)
            assert got.status_code == 200, got.text
            v = got.json()
            assert len(v) == 1 and len(v[0]) == 384
            close(np.asarray(v[0]), r["embedding"])
            done += 1
        return done

    with ThreadPoolExecutor(max_workers=64) as pool:
        total = sum(pool.map(client, range(64)))
    assert total == 64 * per
    text = requests.get(server + "/metrics", timeout=10).text
    assert 'status="500"' not in text


def test_tokenize_offsets_match_hf_tokenizers(server: str) -> None:
    """/tokenize's ids and byte offsets against HF `tokenizers` (from PyPI) on
    the model's own tokenizer.json, over the reference's WordPiece edge cases
    (accents, CJK, controls, specials written in the text, long words)."""
    from tokenizers import Tokenizer

    hf_json = REPO / "models" / "all-MiniLM-L6-v2-hf" / "tokenizer.json"
    if not hf_json.is_file():
        pytest.fail(f"{hf_json} is missing (scripts/fetch_model.sh)")
    hf = Tokenizer.from_file(str(hf_json))
    hf.no_truncation()
    hf.no_padding()
    with open(shared_dir() / "reference" / "wordpiece_cases.jsonl", encoding="utf-8") as f:
        cases = [json.loads(line)["text"] for line in f if line.strip()]
    cases = [c for c in cases if len(c.encode()) < 20000]
    s = requests.Session()
    checked = 0
    for k in range(0, len(cases), 32):
        batch = cases[k : k + 32]
        got = s.post(server + "/tokenize", json={"inputs": batch}, timeout=120)
        assert got.status_code == 200, got.text
        for text, toks in zip(batch, got.json()):
            enc = hf.encode(text)
            assert [t["id"] for t in toks] == enc.ids, text
            for t, (a, b) in zip(toks[1:-1], enc.offsets[1:-1]):
                # HF gives character offsets; ours are bytes.
                want = (len(text[:a].encode()), len(text[:b].encode()))
                assert (t["start"], t["stop"]) == want, (text, t, want)
                checked += 1
    assert checked > 8000, checked

"""`embd serve` from the clients people use: the OpenAI Python SDK (float and
base64), LangChain's OpenAIEmbeddings (its default token ids refused with a
422 that says what to set; texts with check_embedding_ctx_length=False),
huggingface_hub's InferenceClient (TEI's client), Cohere's SDK (ClientV2 on
/v2/rerank), requests (gzip bodies, content types, a CORS preflight); a
bounded schemathesis run against /openapi.json; a bounded load test of 64
concurrent keep-alive clients. Embeddings are compared with the
sentence-transformers reference (shared/reference/minilm_reference.jsonl)
and with `embd encode`.

Only loopback addresses; every loop is bounded in count and time.
Env: EMBD_SERVE_BIN (default target/release/embd-serve), EMBD_BIN (default
target/release/embd), EMBD_TEST_MODEL (default
models/all-MiniLM-L6-v2.weights), EMBD_SHARED_DIR (default ../shared beside
the repository), SCHEMATHESIS_EXAMPLES (default 25), LOAD_REQUESTS (per
client, default 16).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
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
EMBD = Path(os.environ.get("EMBD_BIN", REPO / "target" / "release" / "embd"))
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


# The origin of the page in the CORS tests.
PAGE = "http://localhost:5173"


@pytest.fixture(scope="session")
def flagged_server() -> Iterator[str]:
    """embd-serve with the embedder alone, --accept-token-ids and
    --cors-allow-origin PAGE."""
    for p in (BIN, MODEL):
        if not p.exists():
            pytest.fail(f"{p} is missing (cargo build --release -p embd-server; "
                        "scripts/fetch_model.sh)")
    args = ["-m", str(MODEL), "--accept-token-ids", "--cors-allow-origin", PAGE]
    with serve(BIN, args) as url:
        yield url


def embd_encode(texts: list[str]) -> np.ndarray:
    """`embd encode` of texts (JSONL in and out), one float32 row each."""
    if not EMBD.exists():
        pytest.fail(f"{EMBD} is missing (cargo build --release --bin embd)")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "texts.jsonl"
        src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        out = subprocess.run(
            [str(EMBD), "encode", "-m", str(MODEL), "--jsonl", "--input", str(src)],
            check=True, capture_output=True, text=True, timeout=300,
        ).stdout
    rows = [json.loads(line)["embedding"] for line in out.splitlines() if line.strip()]
    assert len(rows) == len(texts)
    return np.asarray(rows, dtype=np.float32)


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
    one = client.embeddings.create(model="m", input=texts[0], dimensions=64)
    assert len(one.data[0].embedding) == 64
    # Errors reach the SDK as its own exceptions, with our message; token ids
    # are refused by default (they would be read in the model's vocabulary).
    import openai

    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="m", input="")
    ids = [r["input_ids"][1:-1] for r in rows[:4]]
    with pytest.raises(openai.UnprocessableEntityError, match="--accept-token-ids"):
        client.embeddings.create(model="m", input=ids)


def test_openai_sdk_token_ids_with_the_flag(
    flagged_server: str, reference: list[dict[str, Any]]
) -> None:
    """--accept-token-ids: ids of the model's own vocabulary give its vectors;
    ids beyond the vocabulary are refused."""
    import openai
    from openai import OpenAI

    client = OpenAI(base_url=flagged_server + "/v1", api_key="unused", max_retries=0, timeout=60)
    rows = texts_of(reference, 4)
    ids = [r["input_ids"][1:-1] for r in rows]
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    for d, r in zip(by_ids.data, rows):
        close(np.asarray(d.embedding), r["embedding"])
    with pytest.raises(openai.UnprocessableEntityError, match="vocabulary"):
        client.embeddings.create(model="m", input=[[1, 99999999]])


def byte_encoding() -> Any:
    """A tiktoken encoding made here: one token per byte (ids 0..255). It
    stands in for cl100k_base, whose file tiktoken downloads from outside any
    package registry; LangChain sends its ids the same way (lists of ints),
    and all of them are valid ids of MiniLM's vocabulary, which is what made
    the default setting give wrong vectors with status 200."""
    import tiktoken

    return tiktoken.Encoding(
        name="embd-test-bytes",
        pat_str=r"""\S+|\s+""",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={},
    )


def test_langchain_openai_embeddings(
    server: str, reference: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai
    import tiktoken
    from langchain_openai import OpenAIEmbeddings

    enc = byte_encoding()
    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda _name: enc)
    monkeypatch.setattr(tiktoken, "get_encoding", lambda _name: enc)
    texts = [r["text"] for r in texts_of(reference, 6)]
    # Default settings: LangChain tokenizes with tiktoken and sends ids.
    default = OpenAIEmbeddings(
        model="text-embedding-3-small", base_url=server + "/v1", api_key="unused", max_retries=0
    )
    with pytest.raises(openai.UnprocessableEntityError) as err:
        default.embed_documents(texts)
    msg = str(err.value)
    for part in ("own vocabulary", "tiktoken", "check_embedding_ctx_length=False"):
        assert part in msg, msg
    # The setting the message names: texts, and the vectors of `embd encode`.
    fixed = OpenAIEmbeddings(
        model="text-embedding-3-small",
        base_url=server + "/v1",
        api_key="unused",
        max_retries=0,
        check_embedding_ctx_length=False,
    )
    want = embd_encode(texts)
    got = np.asarray(fixed.embed_documents(texts), dtype=np.float32)
    assert got.shape == want.shape
    assert np.array_equal(got, want), float(np.max(np.abs(got - want)))
    q = np.asarray(fixed.embed_query(texts[2]), dtype=np.float32)
    assert np.array_equal(q, want[2])


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


def test_cohere_v2_client_rerank(server: str) -> None:
    """Cohere's SDK (ClientV2, as LiteLLM's cohere/ provider calls it) on
    /v2/rerank, against CrossEncoder.rank of the reference cross-encoder."""
    import cohere

    with open(shared_dir() / "reference" / "families" / "minilm-reranker_rank.json") as f:
        rank = json.load(f)
    docs = rank["documents"][:32]
    want = [w for w in rank["ranking"] if w["corpus_id"] < 32]
    co = cohere.ClientV2(api_key="unused", base_url=server, timeout=60)
    got = co.rerank(model="rr", query=rank["query"], documents=docs, top_n=5)
    assert [r.index for r in got.results] == [w["corpus_id"] for w in want[:5]]
    for g, w in zip(got.results, want):
        assert abs(g.relevance_score - w["score"]) <= 1e-5
    assert got.id
    assert got.meta is not None and got.meta.api_version is not None
    assert got.meta.api_version.version == "2"
    # Errors come back as the SDK's own exceptions.
    with pytest.raises(cohere.errors.UnprocessableEntityError):
        co.rerank(model="rr", query=rank["query"], documents=docs, top_n=0)


def test_requests_bodies_and_cors_preflight(flagged_server: str) -> None:
    """gzip bodies are decoded, a body that is not JSON by its type is 415,
    and a browser's preflight from the allowed page is answered."""
    s = requests.Session()
    url = flagged_server + "/embed"
    body = json.dumps({"inputs": ["a cat sits outside"]}).encode()
    plain = s.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert plain.status_code == 200
    zipped = s.post(
        url,
        data=gzip.compress(body),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=60,
    )
    assert zipped.status_code == 200 and zipped.json() == plain.json()
    r = s.post(url, data=body, headers={"Content-Type": "text/plain"}, timeout=60)
    assert r.status_code == 415 and r.json()["error_type"] == "validation"
    # What a browser sends before a page at PAGE calls the OpenAI route.
    pre = requests.options(
        flagged_server + "/v1/embeddings",
        headers={
            "Origin": PAGE,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
        timeout=60,
    )
    assert pre.status_code == 204
    assert pre.headers["Access-Control-Allow-Origin"] == PAGE
    assert pre.headers["Access-Control-Allow-Methods"] == "POST"
    assert pre.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    call = s.post(
        flagged_server + "/v1/embeddings",
        json={"input": "a cat", "encoding_format": "float"},
        headers={"Origin": PAGE},
        timeout=60,
    )
    assert call.status_code == 200
    assert call.headers["Access-Control-Allow-Origin"] == PAGE
    other = requests.options(
        flagged_server + "/v1/embeddings",
        headers={"Origin": "http://elsewhere.example", "Access-Control-Request-Method": "POST"},
        timeout=60,
    )
    assert "Access-Control-Allow-Origin" not in other.headers
    # /info names models, never their files.
    info = s.get(flagged_server + "/info", timeout=60).json()
    assert info["model_id"] == "all-MiniLM-L6-v2"
    assert ".weights" not in json.dumps(info)


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

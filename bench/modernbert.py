#!/usr/bin/env python3
"""ModernBERT and NomicBERT: a random-weight, full-size ModernBERT-base or nomic-embed-text-v1.5
next to its peers.

Run through `bench/run.sh --modernbert [...]` or `bench/run.sh --nomic [...]` (`--model nomic`),
which prepare `bench/.venv-torch` (torch, transformers, sentence-transformers; + OpenVINO/NNCF
and onnxscript from `requirements-modernbert.txt`) and call `modernbert.py prepare` before
`modernbert.py run`.

prepare [--model base|tiny|nomic|nomic-tiny|...]   (idempotent: rebuilt when this script's
  fixture definition or the pins change)
  bench/.cache/modernbert-<model>/
    st/              sentence-transformers folder: Transformer (ModernBertModel) -> mean
                     Pooling -> Normalize. base: built here, seeded random weights of
                     ModernBERT-base's shape (22 layers, 768 wide, 12 heads, GeGLU 1152,
                     window 128, global every 3rd layer, RoPE 160,000 / 10,000, vocab
                     50,368, 8,192 positions, no biases) with the tokenizer of
                     shared/reference/architectures/modernbert-tiny (5,056 ids; only the
                     embedding rows < 5,056 are ever read, which changes nothing in speed).
                     tiny: that shared reference folder itself (the sanity check: its
                     reference vectors are sentence-transformers' own).
                     nomic: shared/reference/encoders/nomic-embed-tiny scaled to
                     nomic-embed-text-v1.5's shape (12 layers, 768 wide, 12 heads, SwiGLU
                     3,072, rotary base 1,000, 8,192 positions, no biases, vocabulary 30,528,
                     its bert-base-uncased WordPiece of 30,522 ids), config.json in
                     transformers 5's native `nomic_bert` layout; st-hub/ is the same folder
                     with the hub's remote-code config.json (both layouts go through `embd
                     convert`). nomic-tiny: the shared tiny folder, config.json turned into
                     the native layout.
    check.txt        the texts every engine's accuracy is measured on (32 corpus texts,
                     evenly spaced; tiny: the reference file's texts)
    ref.npy          their vectors by transformers (ModernBertModel, one text per call, no
                     padding, masked mean pooling, L2 normalization, float32)
    long.txt         base: one text of exactly 8,192 tokens ([CLS] and [SEP] included)
    model.onnx       torch.onnx.export of ModernBertModel + pooling + normalization
                     (inputs input_ids, attention_mask; output sentence_embedding)
    model.int8.onnx  onnxruntime.quantization.quantize_dynamic (QInt8, per channel)
    ov/fp32.xml, ov/int8.xml   OpenVINO IR and nncf.quantize(TRANSFORMER) on 100 corpus texts
                     (ModernBERT and NomicBERT)
    ours.weights     `embd convert st/` (when our converter takes ModernBERT)

run [--model base|tiny|nomic|nomic-tiny|...] [--rounds N] [--limit N] [--threads 1,2]
    [--no-long] [--check]
  1. accuracy: every engine's vectors of check.txt (sorted, padded batches of 32, its own
     tokenizer) vs ref.npy: worst and mean cosine;
  2. throughput: the first `limit` corpus texts, sorted padded batches of 32, tokenization
     included, in a fresh worker process per configuration and round (interleaved):
     ORT fp32 and ORT int8 (ORT_ENABLE_ALL), OpenVINO fp32 and NNCF int8
     (INFERENCE_PRECISION_HINT f32), sentence-transformers on torch (fp32), ours f32 /
     bf16 / int8 (`embd bench`), at 1 and 2 threads; peak RSS of each worker;
  3. long input (base): long.txt alone through ORT fp32 and ours: time and peak RSS.
  Ours is skipped with "ours: not available yet" while `embd convert` refuses the folder.
  Results: a table on stdout and bench/out/modernbert-<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

import harness  # bench/harness.py: what this script shares with bench/splade.py
from harness import (
    BATCH,
    F32,
    Runner,
    bench_cmd,
    config_of,
    cosines,
    make_tokenizer,
    max_len_of,
    pad,
    read_lines,
    shared_dir,
    sorted_batches,
    vm_rss_mb,
    write_lines,
)

HERE = os.path.abspath(__file__)

# ModernBERT-base's shape (answerdotai/ModernBERT-base's config.json), random weights.
BASE_CONFIG: dict[str, Any] = {
    "vocab_size": 50368,
    "hidden_size": 768,
    "intermediate_size": 1152,
    "num_hidden_layers": 22,
    "num_attention_heads": 12,
    "local_attention": 128,
    "global_attn_every_n_layers": 3,
    "global_rope_theta": 160000.0,
    "local_rope_theta": 10000.0,
    "max_position_embeddings": 8192,
    "attention_bias": False,
    "mlp_bias": False,
    "norm_bias": False,
    "norm_eps": 1e-5,
    "hidden_activation": "gelu",
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
}
# Qwen3-Embedding-0.6B's shape (Qwen/Qwen3-Embedding-0.6B's config.json) and
# EmbeddingGemma-300m's (google/embeddinggemma-300m's), random weights, with the tiny
# reference folders' tokenizers (6,026 and 4,000 ids instead of 151,669 and 262,144: only
# the embedding table's size changes, a gather per token, and the ONNX graph stays under
# protobuf's 2 GB).
QWEN3_CONFIG: dict[str, Any] = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "layer_types": ["full_attention"] * 28,
    "max_window_layers": 28,
    "initializer_range": 0.02,
}
GEMMA_CONFIG: dict[str, Any] = {
    "hidden_size": 768,
    "intermediate_size": 1152,
    "num_hidden_layers": 24,
    "num_attention_heads": 3,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "query_pre_attn_scalar": 256,
    "sliding_window": 512,
    "_sliding_window_pattern": 6,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 4,
    "initializer_range": 0.02,
}
# nomic-embed-text-v1.5's shape (nomic-ai/nomic-embed-text-v1.5's config.json), in the hub's
# remote-code layout (the keys of shared/reference/encoders/nomic-embed-tiny/config.json; turned
# into transformers 5's native layout by native_config), random weights. Its tokenizer: the tiny
# folder's, bert-base-uncased's WordPiece (30,522 ids), which is the real model's vocabulary.
NOMIC_CONFIG: dict[str, Any] = {
    "vocab_size": 30528,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": 3072,
    "n_positions": 8192,
    "max_trained_positions": 2048,
    "rotary_emb_base": 1000,
    "initializer_range": 0.02,
}
# --model NAME: (cache folder, shared reference folder, shape to scale it to or None for the
# reference folder itself, max_seq_length, Dense layers of the ST pipeline (in, out))
FIXTURES: dict[str, tuple[str, str, dict[str, Any] | None, int, list[tuple[int, int]]]] = {
    "base": ("modernbert-base", "modernbert-tiny", BASE_CONFIG, 8192, []),
    "tiny": ("modernbert-tiny", "modernbert-tiny", None, 256, []),
    "qwen3": ("qwen3-embedding-0.6b-shape", "qwen3-embedding-tiny", QWEN3_CONFIG, 8192, []),
    "qwen3-tiny": ("qwen3-embedding-tiny", "qwen3-embedding-tiny", None, 256, []),
    "gemma": (
        "embeddinggemma-300m-shape",
        "embeddinggemma-tiny",
        GEMMA_CONFIG,
        2048,
        [(768, 3072), (3072, 768)],
    ),
    "gemma-tiny": ("embeddinggemma-tiny", "embeddinggemma-tiny", None, 256, []),
    "nomic": ("nomic-embed-v1.5-shape", "nomic-embed-tiny", NOMIC_CONFIG, 8192, []),
    "nomic-tiny": ("nomic-embed-tiny", "nomic-embed-tiny", None, 512, []),
}
# The families whose reference vectors are transformers' bare model + masked mean pooling
# (exported as Pooled, with OpenVINO peers); the others' are sentence-transformers' pipeline.
BARE_MODEL_REFERENCE = ["modernbert-tiny", "nomic-embed-tiny"]
SEED = 29
PREPARE_VERSION = 1
LONG_TOKENS = 8192
CHECK_TEXTS = 32
CALIB_TEXTS = 100
REQUIREMENTS = ["requirements.txt", "requirements-torch.txt", "requirements-modernbert.txt"]


# --------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------


def cache_dir(model: str) -> str:
    return os.path.join(harness.CACHE, FIXTURES[model][0])


def tiny_folder(name: str = "modernbert-tiny") -> str:
    """A shared reference folder: shared/reference/architectures/<name> or .../encoders/<name>
    (its reference file beside it: <folder>_reference.jsonl)."""
    for kind in ("architectures", "encoders"):
        d = os.path.join(shared_dir(), "reference", kind, name)
        if os.path.isdir(d):
            return d
    sys.exit(f"{harness.prog()}: no shared reference folder {name}")


def bare_model_reference(model: str) -> bool:
    return FIXTURES[model][1] in BARE_MODEL_REFERENCE


def native_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A NomicBERT config.json in the hub's remote-code layout (`n_embd`, ...) turned into
    transformers 5's native `NomicBertConfig` keys, as the shared reference's README maps them
    (the remote code rounds `n_inner` up to a multiple of 256); any other config unchanged."""
    if cfg.get("model_type") != "nomic_bert" or "n_embd" not in cfg:
        return cfg
    h, heads = cfg["n_embd"], cfg["n_head"]
    return {
        "architectures": ["NomicBertModel"],
        "model_type": "nomic_bert",
        "vocab_size": cfg["vocab_size"],
        "hidden_size": h,
        "num_hidden_layers": cfg["n_layer"],
        "num_attention_heads": heads,
        "head_dim": h // heads,
        "intermediate_size": -(-cfg["n_inner"] // 256) * 256,
        "hidden_act": "silu",
        "max_position_embeddings": cfg["n_positions"],
        "type_vocab_size": cfg.get("type_vocab_size", 2),
        "layer_norm_eps": cfg.get("layer_norm_epsilon", 1e-12),
        "rope_parameters": {"rope_type": "default", "rope_theta": float(cfg["rotary_emb_base"])},
        "initializer_range": cfg.get("initializer_range", 0.02),
        "pad_token_id": 0,
    }


def flops_per_token(cfg: dict[str, Any]) -> int:
    """Useful linear-layer FLOPs per token, per layer: q, k, v, o projections (query and
    key/value heads counted apart) and a gated MLP (h x 2i up, i x h down); ModernBERT:
    Wqkv (h x 3h), Wo (h x h), Wi (h x 2i), mlp Wo (i x h)."""
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or h // heads
    kv = cfg.get("num_key_value_heads") or heads
    attn = h * heads * hd * 2 + 2 * h * kv * hd
    return int(2 * (attn + 3 * h * i) * n)


def key_of(model: str) -> str:
    """What a prepared folder depends on: the fixture's definition, how it is built
    (PREPARE_VERSION, bumped when prepare() changes its outputs) and the pins."""
    return harness.key_of(f"{PREPARE_VERSION} {SEED} {json.dumps(FIXTURES[model])}", REQUIREMENTS)


# --------------------------------------------------------------------------
# prepare: the folder, the reference vectors, the peers' models
# --------------------------------------------------------------------------


def build_base_folder(dst: str) -> None:
    """A seeded random ModernBertModel of ModernBERT-base's shape, saved as a
    sentence-transformers folder with the tiny reference folder's tokenizer. config.json
    is written in the hub checkpoints' key layout (the tiny folder's keys, scaled), which
    transformers 5 loads into the same model."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import AutoConfig, AutoModel

    tiny = tiny_folder()
    hub_cfg = config_of(tiny) | BASE_CONFIG
    with tempfile.TemporaryDirectory() as hf:
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(hub_cfg, f, indent=2)
        cfg = AutoConfig.from_pretrained(hf)
        torch.manual_seed(SEED)
        model = AutoModel.from_config(  # type: ignore[no-untyped-call]
            cfg
        ).eval()
        model.save_pretrained(hf)
        shutil.copy(os.path.join(tiny, "tokenizer.json"), hf)
        with open(os.path.join(tiny, "tokenizer_config.json")) as f:
            tc = json.load(f)
        tc["model_max_length"] = BASE_CONFIG["max_position_embeddings"]
        with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
            json.dump(tc, f, indent=2)
        tr = models.Transformer(hf, max_seq_length=BASE_CONFIG["max_position_embeddings"])
        pool = models.Pooling(BASE_CONFIG["hidden_size"], pooling_mode="mean")
        st = SentenceTransformer(modules=[tr, pool, models.Normalize()], device="cpu")
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        st.save(dst)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(hub_cfg, f, indent=2)


def build_scaled_folder(model: str, dst: str) -> None:
    """The shared tiny reference folder of that family, its config.json scaled to the real
    model's shape (same key layout), seeded random weights (the bare model's, as the tiny
    folder stores them), the pooling dimension and the Dense layers resized."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModel

    _, tiny_name, shape, max_len, dense = FIXTURES[model]
    assert shape is not None
    shutil.copytree(tiny_folder(tiny_name), dst)
    hub_cfg = config_of(dst) | shape
    cfg_d = native_config(hub_cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg_d, f, indent=2)
    torch.manual_seed(SEED)
    m = AutoModel.from_config(  # type: ignore[no-untyped-call]
        AutoConfig.from_pretrained(dst)
    ).eval()
    with tempfile.TemporaryDirectory() as tmp:
        m.save_pretrained(tmp)
        shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(dst, "model.safetensors"))
    pool = os.path.join(dst, "1_Pooling", "config.json")
    with open(pool) as f:
        pc = json.load(f)
    pc["embedding_dimension"] = cfg_d["hidden_size"]
    with open(pool, "w") as f:
        json.dump(pc, f, indent=4)
    for k, (n_in, n_out) in enumerate(dense):
        dd = os.path.join(dst, f"{k + 2}_Dense")
        with open(os.path.join(dd, "config.json")) as f:
            dc = json.load(f)
        dc["in_features"], dc["out_features"] = n_in, n_out
        with open(os.path.join(dd, "config.json"), "w") as f:
            json.dump(dc, f, indent=4)
        w = torch.empty(n_out, n_in).normal_(0.0, n_in**-0.5)
        save_file({"linear.weight": w.contiguous()}, os.path.join(dd, "model.safetensors"))
    tcp = os.path.join(dst, "tokenizer_config.json")
    with open(tcp) as f:
        tc = json.load(f)
    tc["model_max_length"] = max_len
    with open(tcp, "w") as f:
        json.dump(tc, f, indent=2)
    if cfg_d is not hub_cfg:
        hub_layout_copy(dst, hub_cfg)


def hub_layout_copy(st: str, hub_cfg: dict[str, Any]) -> None:
    """<st>-hub/: the folder st with the hub's remote-code config.json (every other file a
    link to st's), for `embd convert` of the other layout."""
    dst = st.rstrip("/") + "-hub"
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for name in os.listdir(st):
        if name != "config.json":
            os.symlink(os.path.join(os.path.abspath(st), name), os.path.join(dst, name))
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(hub_cfg, f, indent=2)


def transformers_vectors(folder: str, texts: list[str], max_len: int) -> F32:
    """transformers' bare model (ModernBertModel, NomicBertModel), one text per call (no
    padding), masked mean pooling and L2 normalization in float32: the reference every engine
    is compared with."""
    import torch
    from transformers import AutoModel

    tok = make_tokenizer(folder, max_len)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    rows = []
    with torch.inference_mode():
        for t in texts:
            ids = torch.tensor([tok.encode(t).ids])
            h = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            v = h[0].mean(0)
            rows.append((v / v.norm().clamp_min(1e-12)).numpy())
    return np.stack(rows).astype(np.float32)


def long_text(tok: Any, corpus: list[str], n_tokens: int) -> str:
    """Corpus texts joined by spaces and cut so that the text is exactly n_tokens tokens
    with [CLS] and [SEP]."""
    text, k = "", 0
    while len(tok.encode(text).ids) < n_tokens + 16:
        text += (" " if text else "") + corpus[k % len(corpus)]
        k += 1
    enc = tok.encode(text)
    cut = enc.offsets[n_tokens - 2][1]  # end of the last content token that fits
    text = text[:cut]
    while len(tok.encode(text).ids) > n_tokens:
        text = text[:-1]
    while len(tok.encode(text).ids) < n_tokens:
        text += "a"
        if len(tok.encode(text).ids) > n_tokens:
            raise RuntimeError("cannot build a text of exactly the requested token count")
    return text


class Pooled:
    """The bare model (ModernBertModel, NomicBertModel) + masked mean pooling + L2
    normalization, for torch.onnx.export."""

    def __new__(cls, folder: str) -> Any:
        import torch
        from transformers import AutoModel

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = AutoModel.from_pretrained(
                    folder, dtype=torch.float32, attn_implementation="sdpa"
                ).eval()

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                h = self.model(input_ids=input_ids, attention_mask=attention_mask)
                h = h.last_hidden_state
                m = attention_mask.unsqueeze(-1).to(h.dtype)
                v = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
                return v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)

        return Module().eval()


class WholeST:
    """A sentence-transformers folder's whole pipeline (Transformer, Pooling, Dense,
    Normalize) as one module, for torch.onnx.export."""

    def __new__(cls, folder: str) -> Any:
        import torch
        from sentence_transformers import SentenceTransformer

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.st = SentenceTransformer(folder, device="cpu").eval()

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                out = self.st({"input_ids": input_ids, "attention_mask": attention_mask})
                return out["sentence_embedding"]

        return Module().eval()


def export_onnx(folder: str, dst: str, modernbert: bool = True) -> str:
    """torch.onnx.export of the pooled model with dynamic batch and sequence axes.
    Returns which exporter wrote the file."""
    import torch

    mod = Pooled(folder) if modernbert else WholeST(folder)
    ids = torch.tensor([[7, 100, 200, 300, 400, 9], [7, 101, 201, 9, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    names = {"input_names": ["input_ids", "attention_mask"], "output_names": ["sentence_embedding"]}
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    tried = []
    for dynamo in (False, True):
        try:
            with torch.inference_mode():
                torch.onnx.export(
                    mod,
                    (ids, mask),
                    dst,
                    opset_version=17 if not dynamo else 18,
                    dynamic_axes=axes | {"sentence_embedding": {0: "batch"}},
                    dynamo=dynamo,
                    external_data=False,
                    **names,  # type: ignore[arg-type]
                )
            return "dynamo" if dynamo else "torchscript"
        except Exception as e:  # noqa: BLE001 (the next exporter is tried)
            tried.append(f"dynamo={dynamo}: {type(e).__name__}: {str(e)[:300]}")
    raise RuntimeError("torch.onnx.export failed:\n  " + "\n  ".join(tried))


def openvino_models(onnx_path: str, d: str, calib: list[list[int]]) -> None:
    import nncf
    import openvino as ov

    os.makedirs(d, exist_ok=True)
    ov.save_model(ov.convert_model(onnx_path), os.path.join(d, "fp32.xml"), compress_to_fp16=False)
    feeds = [
        {"input_ids": np.array([x], np.int64), "attention_mask": np.ones((1, len(x)), np.int64)}
        for x in calib
    ]
    q = nncf.quantize(
        ov.convert_model(onnx_path),
        nncf.Dataset(feeds),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(feeds),
    )
    ov.save_model(q, os.path.join(d, "int8.xml"), compress_to_fp16=False)


def prepare(model: str) -> None:
    d = cache_dir(model)
    key = key_of(model)
    if harness.up_to_date(d, key):
        return
    import torch

    # One thread: on this shared 2-core machine two torch threads waiting on each other's
    # barriers made the one-text-per-call reference 5-10x slower than one thread.
    torch.set_num_threads(1)
    harness.fresh_dir(d)
    shared = shared_dir()
    corpus = read_lines(os.path.join(shared, "bench", "corpus.txt"))
    meta: dict[str, Any] = {"model": model, "seconds": {}}
    _, tiny_name, shape, _, _ = FIXTURES[model]
    mb = bare_model_reference(model)
    step = harness.stepper(meta, model)

    st = os.path.join(d, "st")
    if shape is None:
        shutil.copytree(tiny_folder(tiny_name), st)
        hub_cfg = config_of(st)
        if native_config(hub_cfg) is not hub_cfg:
            with open(os.path.join(st, "config.json"), "w") as f:
                json.dump(native_config(hub_cfg), f, indent=2)
            hub_layout_copy(st, hub_cfg)
    elif model == "base":
        step("build the random ModernBERT-base folder", lambda: build_base_folder(st))
    else:
        step(f"build the random {model} folder", lambda: build_scaled_folder(model, st))
    max_len = max_len_of(st)
    tok = make_tokenizer(st, max_len)
    refl: list[dict[str, Any]] = []
    if shape is not None:
        n = len(corpus)
        check = [corpus[int(k * n / CHECK_TEXTS)] for k in range(CHECK_TEXTS)]
        if model == "base":
            long = long_text(make_tokenizer(st, 1 << 20), corpus, LONG_TOKENS)
            with open(os.path.join(d, "long.txt"), "w", encoding="utf-8") as f:
                f.write(long + "\n")
            meta["long_tokens"] = len(tok.encode(long).ids)
    else:
        ref_path = tiny_folder(tiny_name) + "_reference.jsonl"
        with open(ref_path, encoding="utf-8") as f:
            refl = [json.loads(x) for x in f if x.strip()]
        # The reference file's own texts may hold newlines: keep the ones `embd` can
        # read one per line.
        check = [r["text"] for r in refl if "\n" not in r["text"] and "\r" not in r["text"]]
    write_lines(os.path.join(d, "check.txt"), check)
    if mb:
        ref = step(
            "transformers reference vectors", lambda: transformers_vectors(st, check, max_len)
        )
    else:
        ref = step("sentence-transformers reference vectors", lambda: harness.st_vectors(st, check))
    np.save(os.path.join(d, "ref.npy"), ref)
    if refl:
        want = {r["text"]: r["embedding"] for r in refl}
        c = cosines(ref, [want[t] for t in check])
        ids_ok = sum(tok.encode(r["text"]).ids == r["input_ids"] for r in refl)
        meta["vs_reference_file"] = {"worst_cos": float(c.min()), "ids_identical": ids_ok}
        print(
            f"prepare {model}: vectors here vs the reference file: worst cosine {c.min():.9f}; "
            f"HF tokenizers ids {ids_ok}/{len(refl)} identical"
        )
    sims = cosines(ref[:-1], ref[1:])
    meta["neighbour_cos_mean"] = float(sims.mean())
    print(
        f"prepare {model}: cosine between consecutive check texts (how alike random-weight "
        f"vectors are): mean {sims.mean():.4f}, max {sims.max():.4f}"
    )
    onnx_path = os.path.join(d, "model.onnx")
    meta["exporter"] = step("torch.onnx.export", lambda: export_onnx(st, onnx_path, mb))
    meta["onnx_ops"] = harness.op_counts(onnx_path)
    step(
        "ORT quantize_dynamic",
        lambda: harness.ort_int8(onnx_path, os.path.join(d, "model.int8.onnx")),
    )
    try:
        if not mb:
            raise ImportError("OpenVINO is prepared for ModernBERT and NomicBERT only")
        import nncf  # noqa: F401
        import openvino  # noqa: F401

        n = len(corpus)
        calib = [tok.encode(corpus[int(k * n / CALIB_TEXTS)]).ids for k in range(CALIB_TEXTS)]
        step(
            "OpenVINO IR + NNCF int8",
            lambda: openvino_models(onnx_path, os.path.join(d, "ov"), calib),
        )
    except ImportError as e:
        print(f"prepare {model}: no OpenVINO peers ({e})")
    harness.write_json(os.path.join(d, "prepare.json"), meta, indent=1)
    harness.write_key(d, key)


# --------------------------------------------------------------------------
# worker: one engine configuration in a fresh process
# --------------------------------------------------------------------------


def ov_runner(path: str, threads: int, pad_id: int, info: dict[str, Any]) -> Runner:
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints

    cfg = {
        props.inference_num_threads: threads,
        hints.performance_mode: hints.PerformanceMode.LATENCY,
        props.num_streams: 1,
        hints.inference_precision: ov.Type.f32,
    }
    compiled = ov.Core().compile_model(path, "CPU", cfg)
    info["inference_precision"] = compiled.get_property(hints.inference_precision).get_type_name()
    req = compiled.create_infer_request()

    def run(id_lists: list[list[int]]) -> F32:
        ids, mask = pad(id_lists, pad_id)
        req.infer({"input_ids": ids, "attention_mask": mask})
        out: F32 = req.get_output_tensor(0).data.copy()
        return out

    return run


def worker(spec: dict[str, Any], result_path: str) -> None:
    folder, threads = spec["folder"], spec["threads"]
    max_len = max_len_of(folder)
    dim = int(np.load(spec["ref"]).shape[1])
    pad_id = config_of(folder).get("pad_token_id") or 0
    info: dict[str, Any] = {}
    res: dict[str, Any] = {"info": info}
    t0 = time.perf_counter()
    encode: Callable[[list[str]], F32]
    if spec["engine"] == "st":
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        st = SentenceTransformer(folder, device="cpu")
        info["torch"] = torch.__version__
        hf_cfg = getattr(getattr(st[0], "auto_model", None), "config", None)
        info["attn_implementation"] = str(getattr(hf_cfg, "_attn_implementation", "?"))

        def encode(texts: list[str]) -> F32:
            v = st.encode(texts, batch_size=BATCH, convert_to_numpy=True, show_progress_bar=False)
            return np.asarray(v, np.float32)
    else:
        if spec["engine"] == "ort":
            run = harness.ort_runner(spec["model"], threads, pad_id, "sentence_embedding")
        else:
            run = ov_runner(spec["model"], threads, pad_id, info)
        tok = make_tokenizer(folder, max_len)

        def encode(texts: list[str]) -> F32:
            return sorted_batches(run, harness.tokenize(tok, texts, threads), dim)

    res["load_s"] = time.perf_counter() - t0
    if "long" in spec["tasks"]:
        # ORT's 8,192-token run peaks at ~17 GB: on a shared machine, be the one an
        # out-of-memory kill picks.
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
    res["rss_loaded_mb"] = vm_rss_mb()
    for task in spec["tasks"]:
        if task == "accuracy":
            v = encode(read_lines(spec["check"]))
            c = cosines(v, np.load(spec["ref"]))
            res["accuracy"] = {"worst_cos": float(c.min()), "mean_cos": float(c.mean())}
        elif task == "throughput":
            res["seconds"] = harness.timed_encode(encode, spec["corpus"])
        elif task == "long":
            texts = read_lines(spec["long"])
            t0 = time.perf_counter()
            encode(texts)
            res["long_s"] = time.perf_counter() - t0
            res["rss_after_long_mb"] = vm_rss_mb()
    harness.write_json(result_path, res, indent=None)


# --------------------------------------------------------------------------
# ours
# --------------------------------------------------------------------------


def ours_accuracy(w: str, check: str, ref: F32, precision: str) -> dict[str, Any]:
    v, why = harness.embd_encode(w, check, "npy", ["--threads", "2", "--precision", precision])
    if v is None:
        return {"error": why}
    c = cosines(v, ref)
    return {
        "worst_cos": float(c.min()),
        "mean_cos": float(c.mean()),
        "max_abs": float(np.abs(v - ref).max()),
    }


# --------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    prepare(args.model)  # quick when already prepared
    d = cache_dir(args.model)
    folder = os.path.join(d, "st")
    cfg = config_of(folder)
    texts, corpus = harness.corpus_file(d, args.limit)
    tok = make_tokenizer(folder, max_len_of(folder))
    tokens = sum(len(e.ids) for e in tok.encode_batch(texts))
    fpt = flops_per_token(cfg)
    check, ref_path = os.path.join(d, "check.txt"), os.path.join(d, "ref.npy")
    ref = np.load(ref_path)
    long_path = os.path.join(d, "long.txt")
    do_long = args.model == "base" and not args.no_long and not args.check
    threads = [int(t) for t in args.threads.split(",")]
    print(
        f"{FIXTURES[args.model][0]}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
        f"{len(texts)} corpus texts, {tokens} tokens, {fpt * tokens / 1e12:.3f} TFLOP in the "
        f"linear layers; load average {harness.loadavg()}",
        flush=True,
    )

    base = {"folder": folder, "check": check, "ref": ref_path, "corpus": corpus, "long": long_path}
    engines = [("ORT fp32", "ort", "model.onnx"), ("ORT int8", "ort", "model.int8.onnx")]
    if os.path.isfile(os.path.join(d, "ov", "int8.xml")):
        engines += [("OV fp32", "ov", "ov/fp32.xml"), ("OV int8", "ov", "ov/int8.xml")]
    else:
        print(
            "OpenVINO: no prepared model (ModernBERT and NomicBERT only, and only with "
            "openvino/nncf installed)"
        )
    engines += [("ST torch fp32", "st", "")]
    engines = harness.only_peers(engines, args.peers)
    peers = harness.peer_specs(engines, threads, base, d)

    w, why = harness.ours_weights(d)
    ours: dict[str, dict[str, Any]] = {}
    accuracy: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if w is None:
        print(f"ours: not available yet ({why})", flush=True)
        notes.append(f"ours: not available yet ({why})")
    else:
        support = harness.precision_support(w, corpus, ["f32", "bf16", "int8"], batch=2)
        for p, no in support.items():
            if no is not None:
                print(f"ours {p}: not run ({no})")
                notes.append(f"ours {p}: not run ({no})")
                continue
            accuracy[f"ours {p}"] = ours_accuracy(w, check, ref, p)
            for t in threads:
                ours[f"ours {p} {t}t"] = {"precision": p, "threads": t}
        if os.path.isdir(os.path.join(d, "st-hub")):
            # the same weights with the hub's remote-code config.json (NomicBERT)
            wh, why_h = harness.ours_weights(d, src="st-hub")
            accuracy["ours f32 hub cfg"] = (
                ours_accuracy(wh, check, ref, "f32") if wh else {"error": why_h}
            )

    # accuracy: one worker per engine (1 thread; the vectors do not depend on it here)
    for name, _, _ in engines:
        spec = peers[f"{name} {threads[0]}t"] | {"tasks": ["accuracy"]}
        r = harness.run_worker(HERE, spec)
        accuracy[name] = r.get("accuracy", {"error": r.get("error", "?")})
    ref_by = "transformers" if bare_model_reference(args.model) else "sentence-transformers"
    print(
        f"\naccuracy vs {ref_by} (one text per call), "
        f"{len(read_lines(check))} texts, sorted padded batches of {BATCH}:"
    )
    for k, a in accuracy.items():
        if "worst_cos" in a:
            extra = f", max abs diff {a['max_abs']:.2e}" if "max_abs" in a else ""
            print(
                f"  {k:16s} worst cosine {a['worst_cos']:.9f} (1-cos {1 - a['worst_cos']:.1e}), "
                f"mean {a['mean_cos']:.9f}{extra}"
            )
        else:
            print(f"  {k:16s} {a}")
    results: dict[str, Any] = {
        "model": args.model,
        "config": cfg,
        "texts": len(texts),
        "tokens": tokens,
        "flops_per_token": fpt,
        "accuracy": accuracy,
        "notes": notes,
        "rounds": [],
        "long": {},
    }
    if args.check:
        # fp32 engines must agree with transformers; int8 ones are reported only (on
        # random weights their error says little about a trained model's)
        bad = [
            k
            for k, a in accuracy.items()
            if ("int8" not in k and "bf16" not in k) and a.get("worst_cos", 0.0) < 0.99999
        ]
        if bad:
            sys.exit(f"modernbert check FAILED: {bad}")
        print(
            "modernbert check: every fp32 engine agrees with transformers (worst cosine >= 0.99999)"
        )
        return

    def measure(k: str) -> dict[str, Any]:
        if k in peers:
            return harness.run_worker(HERE, peers[k] | {"tasks": ["throughput"]})
        o = ours[k]
        cmd = bench_cmd(w or "", corpus, o["threads"], precision=o["precision"])
        return harness.ours_bench(cmd + ["--warmup", "20"])

    times, rss = harness.interleaved_rounds(
        list(peers) + list(ours),
        args.rounds,
        measure,
        len(texts),
        lambda k: fpt * tokens,
        results["rounds"],
    )

    if do_long:
        long_tokens = len(tok.encode(read_lines(long_path)[0]).ids)
        long_peers = [f"ORT fp32 {t}t" for t in args.long_threads]
        for k in long_peers:
            load = harness.loadavg()
            res = harness.run_worker(HERE, peers[k] | {"tasks": ["long"]})
            results["long"][k] = res | {"load": load, "tokens": long_tokens}
            if "long_s" in res:
                print(
                    f"long {long_tokens} tokens: {k}: {res['long_s']:.2f} s, peak RSS "
                    f"{res['peak_rss_mb']:.0f} MB (after load {res['rss_loaded_mb']:.0f} MB; "
                    f"load {load})",
                    flush=True,
                )
            else:
                print(f"long: {k} FAILED {res.get('error')}", flush=True)
        if w is not None:
            for t in args.long_threads:
                k = f"ours f32 {t}t"
                load = harness.loadavg()
                res = harness.ours_bench(bench_cmd(w, long_path, t, 1) + ["--warmup", "0"])
                if "seconds" in res:
                    s, peak = res["seconds"], res["peak_rss_mb"]
                    results["long"][k] = {"long_s": s, "peak_rss_mb": peak, "load": load}
                    print(
                        f"long {long_tokens} tokens: {k}: {s:.2f} s, peak RSS {peak:.0f} MB "
                        f"(load {load})",
                        flush=True,
                    )
                else:
                    print(f"long: {k} FAILED (exit {res['status']})")

    rows = harness.throughput_table(times, rss, len(texts), lambda k: (tokens, fpt))
    results["rows"] = rows
    by: dict[str, float] = {r["config"]: r["texts_per_s"] for r in rows}
    results["ratios"] = {}

    def fastest(kind: str, t: int) -> tuple[str, float] | None:
        """The fastest peer configuration at t threads whose name has kind in it."""
        got = [
            (k, v)
            for k, v in by.items()
            if kind in k and not k.startswith("ours") and k.endswith(f" {t}t")
        ]
        return max(got, key=lambda kv: kv[1]) if got else None

    for t in threads:
        f32, int8 = by.get(f"ours f32 {t}t"), by.get(f"ours int8 {t}t")
        for ours_v, peer, what, goal in [
            (f32, fastest("ORT fp32", t), "ours f32 / ORT fp32", ">= 1.2x"),
            (f32, fastest("fp32", t), "ours f32 / fastest fp32 peer", ">= 1.2x"),
            (
                int8,
                fastest("int8", t),
                "ours int8 / fastest int8 peer",
                ">= 1.3x VNNI/AMX, 1.0x AVX2",
            ),
        ]:
            if ours_v and peer:
                q = ours_v / peer[1]
                results["ratios"][f"{what} {t}t"] = {"ratio": q, "peer": peer[0], "goal": goal}
                print(f"{t} thread(s): {what} ({peer[0]}) = {q:.2f}x (goal {goal})")
    harness.write_results(FIXTURES[args.model][0], results)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file is local
    if harness.worker_main(worker):
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", choices=list(FIXTURES), default="base")
    harness.add_run_args(
        ap,
        rounds=1,
        limit=300,
        limit_help="first N corpus texts (0 = all 2,000)",
        peers_help="only these engines: ort,ov,st (default all)",
    )
    ap.add_argument("--no-long", action="store_true", help="skip the 8,192-token text")
    ap.add_argument(
        "--long-threads", default="2", help="thread counts of the long text (default 2)"
    )
    ap.add_argument("--check", action="store_true", help="accuracy only, no timing")
    args = ap.parse_args()
    args.long_threads = [int(t) for t in args.long_threads.split(",")]
    if args.cmd == "prepare":
        prepare(args.model)
    else:
        run(args)


if __name__ == "__main__":
    main()

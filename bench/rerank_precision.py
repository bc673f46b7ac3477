#!/usr/bin/env python3
"""Are the reranker's precision bars (scores within 0.01 in int8, 0.001 in bf16)
reachable? Max |score - reference| on every line of
shared/reference/families/<family>_reference.jsonl, and whether the rank file's top-10
order is kept, for reduced-precision cross-encoders of every kind:

* torch (sentence-transformers ``CrossEncoder``, CPU): the whole model in bfloat16 and in
  float16 (``.to(dtype)``: every op, LayerNorm and softmax included, in that type; the
  logit is upcast to f32 before the activation, as CrossEncoder does); dynamic int8
  (``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear``, qint8: weights per
  tensor, as documented; and with ``per_channel_dynamic_qconfig``, weights per output
  channel).
* ONNX Runtime dynamic int8 (``quantize_dynamic``, per-channel int8 weights, dynamic int8
  activations) of the graph bench/rerank.py times (minilm-reranker: bench/export_onnx.py,
  plain and ORT-fused); for xlmr-reranker-tiny, which export_onnx.py does not build, a
  ``torch.onnx.export`` (TorchScript exporter) of the same classifier.
* Weights-only floors: the f32 torch model with every ``nn.Linear`` weight rounded to
  bf16 (round to nearest even), or to symmetric per-output-channel int8 (scale
  max|w|/127, round half away from zero) and dequantized back to f32; activations,
  biases, embeddings, LayerNorm and all arithmetic stay f32. Any engine that stores these
  weights at that precision has at least this error (it only adds activation rounding).
  Twice: all Linear layers, and the encoder's alone (the head, BERT pooler + classifier
  or RoBERTa classifier.dense + out_proj, kept f32 as ours keeps it).
* Ours: ``embd rerank --jsonl --precision f32|bf16|int8 --max-length L``.

The f32 rows (torch, ORT) are the sanity check: each must give the reference within
1e-5 in score. Every pair runs alone (batch 1), as the reference was made; torch and
ORT get the ids CrossEncoder's tokenizer gives (checked equal to the reference's on
every line). Scores are sigmoid(logit) in f64 except ours (its own score).

usage: bench/.venv-torch/bin/python bench/rerank_precision.py [--family NAME ...]
       [--embd target/release/embd]
(bench/setup.sh --torch makes the venv, the models and embd; offline: HF_HUB_OFFLINE=1.)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import CrossEncoder  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rerank  # noqa: E402

ROOT = rerank.ROOT
transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
# quantize_dynamic's notes that torch.ao.quantization and quantized tensors are deprecated
warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")


@dataclass
class Family:
    name: str
    hf: Path  # HF folder (BertForSequenceClassification / XLMRobertaForSequenceClassification)
    weights: Path  # our converted file
    max_length: int  # CrossEncoder max_length the reference was made with (its README)


@dataclass
class Data:
    pairs: list[tuple[str, str]]
    ref_logit: np.ndarray
    ref_score: np.ndarray
    query: str  # the rank file
    docs: list[str]
    ref_top10: list[int]
    ref_gap: float  # the smallest score gap between neighbours in the reference's top 11 (top_gap)


@dataclass
class Row:
    name: str
    logit: np.ndarray | None  # on the reference lines (None: not given)
    score: np.ndarray  # on the reference lines
    rank_score: np.ndarray  # on the rank file's documents


def families() -> dict[str, Family]:
    fam = rerank.shared() / "reference" / "families"
    return {
        "minilm-reranker": Family(
            "minilm-reranker",
            ROOT / "models" / "minilm-reranker-hf",
            ROOT / "models" / "minilm-reranker.weights",
            256,
        ),
        "xlmr-reranker-tiny": Family(
            "xlmr-reranker-tiny",
            fam / "xlmr-reranker-tiny",
            ROOT / "models" / "xlmr-reranker-tiny.weights",
            128,
        ),
    }


def load_data(f: Family) -> Data:
    fam = rerank.shared() / "reference" / "families"
    text = (fam / f"{f.name}_reference.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    rank = json.loads((fam / f"{f.name}_rank.json").read_text(encoding="utf-8"))
    return Data(
        pairs=[(x["query"], x["passage"]) for x in lines],
        ref_logit=np.array([x["logit"] for x in lines], np.float64),
        ref_score=np.array([x["score"] for x in lines], np.float64),
        query=rank["query"],
        docs=list(rank["documents"]),
        ref_top10=[int(r["corpus_id"]) for r in rank["ranking"][:10]],
        ref_gap=top_gap(rank),
    )


def top_gap(rank: dict[str, Any]) -> float:
    """The smallest score gap between neighbours among the reference's first 11 distinct
    documents (a repeated document scores as its first copy and ranks after it by index:
    no engine can swap the two)."""
    seen: set[str] = set()
    scores = []
    for r in rank["ranking"]:
        doc = rank["documents"][r["corpus_id"]]
        if doc not in seen:
            seen.add(doc)
            scores.append(float(r["score"]))
    top = scores[:11]
    return min(a - b for a, b in zip(top[:-1], top[1:], strict=True))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x.astype(np.float64))))


def top10(scores: np.ndarray) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))[:10]


# --- torch -----------------------------------------------------------------------------


def cross_encoder(f: Family) -> CrossEncoder:
    ce: CrossEncoder = CrossEncoder(
        str(f.hf), device="cpu", max_length=f.max_length, local_files_only=True
    )
    return ce


def torch_logits(ce: CrossEncoder, pairs: list[tuple[str, str]]) -> np.ndarray:
    out = ce.predict(
        pairs, batch_size=1, activation_fn=torch.nn.Identity(), show_progress_bar=False
    )
    return np.asarray(out, np.float64).reshape(len(pairs))


def is_head(name: str) -> bool:
    return "pooler" in name or "classifier" in name


def round_bf16(w: torch.Tensor) -> torch.Tensor:
    return w.to(torch.bfloat16).to(torch.float32)


def round_int8_per_channel(w: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 per output channel (row of [out, in]), scale max|w|/127, round half
    away from zero, dequantized to f32 (all in f32, as an engine stores it)."""
    scale = w.abs().amax(dim=1, keepdim=True) / 127.0
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    x = w / scale
    q = torch.sign(x) * torch.floor(x.abs() + 0.5)
    return (q.clamp(-127, 127) * scale).to(torch.float32)


def round_int8_groups(w: torch.Tensor, group: int = 32) -> torch.Tensor:
    """As round_int8_per_channel with one scale per `group` consecutive inputs of a row."""
    out, inp = w.shape
    return round_int8_per_channel(w.reshape(out * inp // group, group)).reshape(out, inp)


def weights_only(
    ce: CrossEncoder, rnd: Callable[[torch.Tensor], torch.Tensor], head: bool
) -> CrossEncoder:
    n = 0
    with torch.no_grad():
        for name, m in ce.named_modules():
            if isinstance(m, torch.nn.Linear) and (head or not is_head(name)):
                m.weight.copy_(rnd(m.weight.data))
                n += 1
    assert n > 0
    return ce


def torch_rows(f: Family, d: Data) -> list[Row]:
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    def q_tensor(ce: CrossEncoder) -> CrossEncoder:
        quantize_dynamic(ce, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)  # type: ignore[no-untyped-call]
        return ce

    def q_channel(ce: CrossEncoder) -> CrossEncoder:
        quantize_dynamic(ce, {torch.nn.Linear: per_channel_dynamic_qconfig}, inplace=True)  # type: ignore[no-untyped-call]
        return ce

    variants: list[tuple[str, Callable[[CrossEncoder], CrossEncoder]]] = [
        ("torch f32 (CrossEncoder)", lambda ce: ce),
        ("torch bf16 (model.to(bfloat16))", lambda ce: ce.to(torch.bfloat16)),
        ("torch fp16 (model.to(float16))", lambda ce: ce.to(torch.float16)),
        ("torch int8 quantize_dynamic (weights per tensor)", q_tensor),
        ("torch int8 quantize_dynamic (weights per channel)", q_channel),
        ("weights only bf16, all Linear", lambda ce: weights_only(ce, round_bf16, True)),
        ("weights only bf16, encoder (head f32)", lambda ce: weights_only(ce, round_bf16, False)),
        (
            "weights only int8/ch, all Linear",
            lambda ce: weights_only(ce, round_int8_per_channel, True),
        ),
        (
            "weights only int8/ch, encoder (head f32)",
            lambda ce: weights_only(ce, round_int8_per_channel, False),
        ),
        (
            "weights only int8 groups of 32, encoder (head f32)",
            lambda ce: weights_only(ce, round_int8_groups, False),
        ),
    ]
    rows = []
    for name, make in variants:
        ce = make(cross_encoder(f))
        logit = torch_logits(ce, d.pairs)
        rows.append(
            Row(name, logit, sigmoid(logit), torch_logits(ce, [(d.query, x) for x in d.docs]))
        )
        print(f"  {name}: done", file=sys.stderr)
    return rows


# --- ONNX Runtime ----------------------------------------------------------------------


def ort_graphs(f: Family, tmp: Path) -> dict[str, Path]:
    if f.name == "minilm-reranker":
        return dict(rerank.onnx_graphs(f.hf))  # f32 and int8, plain and fused
    # xlmr: export_onnx.py does not build XLM-R; the TorchScript exporter of the same model.
    model: Any = cross_encoder(f)[0].model
    model.eval()
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 2]])
    f32 = tmp / "xlmr.onnx"
    dyn = {0: "batch", 1: "seq"}
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notes
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids)),
            str(f32),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={"input_ids": dyn, "attention_mask": dyn, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    int8 = tmp / "xlmr.int8.onnx"
    logging.getLogger().setLevel(logging.ERROR)  # ORT's advice to pre-process first
    rerank.quantize_int8(f32, int8)
    return {"ORT f32 (torch.onnx.export)": f32, "ORT int8 (torch.onnx.export)": int8}


def ort_rows(f: Family, d: Data, ce: CrossEncoder) -> list[Row]:
    def encode(q: str, p: str) -> dict[str, list[int]]:
        e: Any = ce.tokenizer(q, p, truncation="longest_first", max_length=f.max_length)
        return dict(e)

    ref = [encode(q, p) for q, p in d.pairs]
    rank_enc = [encode(d.query, x) for x in d.docs]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in ort_graphs(f, Path(tmp)).items():
            so = ort.SessionOptions()
            so.intra_op_num_threads = 2
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            names = {i.name for i in sess.get_inputs()}

            def run(
                encs: list[dict[str, list[int]]], sess: Any = sess, names: set[str] = names
            ) -> np.ndarray:
                out = []
                for e in encs:
                    ids = np.array([e["input_ids"]], np.int64)
                    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                    if "token_type_ids" in names:
                        feed["token_type_ids"] = np.array([e["token_type_ids"]], np.int64)
                    out.append(float(sess.run(["logits"], feed)[0][0, 0]))
                return np.array(out, np.float64)

            logit = run(ref)
            rows.append(Row(name, logit, sigmoid(logit), run(rank_enc)))
    return rows


def check_ids(f: Family, ce: CrossEncoder) -> None:
    fam = rerank.shared() / "reference" / "families"
    text = (fam / f"{f.name}_reference.jsonl").read_text(encoding="utf-8")
    bad = 0
    for x in (json.loads(s) for s in text.splitlines() if s.strip()):
        e = ce.tokenizer(
            x["query"], x["passage"], truncation="longest_first", max_length=f.max_length
        )
        bad += e["input_ids"] != x["input_ids"]
        if "token_type_ids" in x:
            bad += e["token_type_ids"] != x["token_type_ids"]
    if bad:
        sys.exit(f"{f.name}: CrossEncoder's tokenizer differs from the reference on {bad} lines")


# --- ours ------------------------------------------------------------------------------


def ours_rows(f: Family, d: Data, embd: str) -> list[Row]:
    def run(precision: str, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as t:
            for q, p in pairs:
                t.write(json.dumps({"query": q, "passage": p}) + "\n")
            t.flush()
            cmd = [embd, "rerank", "-m", str(f.weights), "--jsonl", "--input", t.name]
            cmd += ["--precision", precision, "--max-length", str(f.max_length), "--threads", "2"]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        got = [json.loads(x) for x in out.splitlines() if x.strip()]
        assert len(got) == len(pairs)
        return np.array([g["logit"] for g in got], np.float64), np.array(
            [g["score"] for g in got], np.float64
        )

    rows = []
    for p in ("f32", "bf16", "int8"):
        logit, score = run(p, d.pairs)
        rows.append(
            Row(
                f"ours {p} (embd rerank --precision {p})",
                logit,
                score,
                run(p, [(d.query, x) for x in d.docs])[1],
            )
        )
    return rows


# --- table -----------------------------------------------------------------------------


def table(f: Family, d: Data, rows: list[Row]) -> None:
    n = len(d.pairs)
    print(
        f"\n{f.name}: {n} reference lines; rank file: {len(d.docs)} documents "
        f"({len(set(d.docs))} distinct), smallest score gap between neighbours among the "
        f"reference's first 11 distinct: {d.ref_gap:.3g}"
    )
    print(
        "| engine / precision | max abs(score - ref) | mean | max abs(logit - ref) "
        "| lines > 0.001 | lines > 0.01 | top-10 order |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ds = np.abs(r.score - d.ref_score)
        dl = f"{np.abs(r.logit - d.ref_logit).max():.3g}" if r.logit is not None else "-"
        t = top10(r.rank_score)
        kept = (
            "kept"
            if t == d.ref_top10
            else f"not kept ({sum(a == b for a, b in zip(t, d.ref_top10, strict=True))}/10 in place)"
        )
        print(
            f"| {r.name} | {ds.max():.3g} | {ds.mean():.2g} | {dl} | {int((ds > 1e-3).sum())} "
            f"| {int((ds > 1e-2).sum())} | {kept} |"
        )
    for r in rows:
        if "f32" in r.name and "int8" not in r.name and "weights" not in r.name:
            worst = np.abs(r.score - d.ref_score).max()
            if worst > 1e-5:
                sys.exit(f"{r.name}: f32 scores differ from the reference by {worst:.3g} (> 1e-5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--family", action="append", choices=sorted(families()), help="default: both")
    ap.add_argument("--embd", default=str(ROOT / "target" / "release" / "embd"))
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"onnxruntime {ort.__version__}; load average {os.getloadavg()[0]:.2f}"
    )
    for name in args.family or sorted(families()):
        f = families()[name]
        d = load_data(f)
        ce = cross_encoder(f)
        check_ids(f, ce)
        rows = torch_rows(f, d) + ort_rows(f, d, ce) + ours_rows(f, d, args.embd)
        table(f, d, rows)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bf16 / int8 error of ours on the decoder-shaped families, against a same-recipe random
baseline: other random models of the same architecture and shape.

The shared tiny models (shared/reference/architectures/{qwen3-embedding-tiny,
embeddinggemma-tiny,qwen3-reranker-tiny}, see its README) are random weights. How much a
reduced precision moves their outputs depends on the weights as much as on the code, so one
number says little. This script makes more models of the same recipe and measures ours on
each, so that the shared model's numbers can be read against that spread:

* For seed k in 1..N (``--seeds``): the shared folder copied to
  bench/.cache/arch-baseline/<name>-seed<k> (``-norm<s>`` appended for a ``--norm-std``
  other than 0.1) with new weights: ``torch.manual_seed(k)``, transformers' own
  initialisation of the model class from the folder's ``config.json`` (Linear and embedding
  weights N(0, initializer_range = 0.1), Gemma's padding row zero), then every norm gain
  drawn N(1, s) (N(0, s) for Gemma's ``(1 + w)`` RMSNorm), s = ``--norm-std``, and any bias
  N(0, s). The tensors are saved under the shared file's own names (bare ``Qwen3Model`` /
  ``Gemma3TextModel`` keys, ``model.`` for the reranker, no ``lm_head``: tied as there).
  EmbeddingGemma's ``2_Dense`` / ``3_Dense`` (sentence-transformers modules, outside
  transformers' init) are drawn N(0, the shared layer's own standard deviation).
* Reference: sentence-transformers in float32 on the CPU, one text (or pair) at a time, no
  prompt: ``SentenceTransformer.encode`` for the two embedders (the 346 texts of
  ``<name>_reference.jsonl``), ``CrossEncoder.predict`` with the identity activation (the
  logit) for the reranker (the 213 pairs of its reference file without a ``prompt``).
* Ours: ``embd convert`` of the folder, then ``embd encode --jsonl`` / ``embd rerank
  --jsonl`` with ``--precision f32|bf16|int8 --batch-size 1 --threads 1``.
* Measured: worst and mean cosine of ours to the sentence-transformers vector; for the
  reranker max and mean |logit(ours) - logit(CrossEncoder)|, and the spread (standard
  deviation) of the reference logits, which sets the scale of those differences (the max
  is also given divided by it).
* A "seeds, min-max" row per norm spread: the range over the seeds, marked "(shared <)" /
  "(shared >)" where the shared model's value lies below / above every seed's. f32 is the
  check that the family code itself adds nothing: the same for every model.
* The shared model itself ("shared"): ours against its reference jsonl (what the tests use);
  sentence-transformers is run on it too and checked to give that file (printed).

usage: bench/.venv-torch/bin/python bench/arch_baseline.py [--seeds 4] [--norm-std 0.1 ...]
       [--family NAME ...] [--embd target/release/embd]
(the venv: bench/setup.sh --torch; offline: HF_HUB_OFFLINE=1 is set.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from sentence_transformers import CrossEncoder, SentenceTransformer  # noqa: E402
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache" / "arch-baseline"
EMBEDDERS = ("qwen3-embedding-tiny", "embeddinggemma-tiny")
RERANKERS = ("qwen3-reranker-tiny",)
PRECISIONS = ("f32", "bf16", "int8")
F64 = npt.NDArray[np.float64]

transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]


def shared() -> Path:
    return Path(os.environ.get("EMBD_SHARED_DIR", ROOT.parent / "shared"))


def arch_dir() -> Path:
    return shared() / "reference" / "architectures"


# --- the random folders ----------------------------------------------------------------


def copy_folder(src: Path, dst: Path) -> None:
    """The shared folder's files, writable (the shared tree is read-only)."""
    if dst.exists():
        shutil.rmtree(dst)
    for d, _, files in os.walk(src):
        out = dst / Path(d).relative_to(src)
        out.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(Path(d) / f, out / f)


def is_gemma(cfg: Any) -> bool:
    return str(cfg.model_type).startswith("gemma")


def new_weights(folder: Path, seed: int, norm_std: float, causal_lm: bool) -> None:
    """Replaces folder/model.safetensors (and Dense modules) with seeded weights of the recipe."""
    cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    torch.manual_seed(seed)
    cls = AutoModelForCausalLM if causal_lm else AutoModel
    model = cls.from_config(cfg)  # type: ignore[no-untyped-call]
    gemma = is_gemma(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0 if gemma else 1.0, norm_std)
            elif name.endswith(".bias"):
                p.normal_(0.0, norm_std)
        sd = model.state_dict()
        path = folder / "model.safetensors"
        with safe_open(str(path), "pt") as f:
            names = list(f.keys())
            meta = f.metadata()
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in names}
        out: dict[str, torch.Tensor] = {}
        for k in names:
            cands = [k, "model." + k, k.removeprefix("model.")]
            src = next((c for c in cands if c in sd), None)
            if src is None:
                sys.exit(f"{folder}: no tensor of the new model for {k}")
            t = sd[src].detach().to(torch.float32).contiguous().clone()
            if tuple(t.shape) != shapes[k]:
                sys.exit(f"{folder}: {k} is {tuple(t.shape)} here, {shapes[k]} in the folder")
            out[k] = t
        if len(out) != len({id(p) for p in model.parameters()}):
            sys.exit(f"{folder}: {len(out)} tensors saved, the model has other parameters")
        save_file(out, str(path), metadata=meta)
        for dense in sorted(folder.glob("*_Dense")):
            dpath = dense / "model.safetensors"
            with safe_open(str(dpath), "pt") as f:
                dmeta = f.metadata()
                old = {k: f.get_tensor(k) for k in f.keys()}
            new = {k: torch.empty_like(v).normal_(0.0, float(v.std())) for k, v in old.items()}
            save_file(new, str(dpath), metadata=dmeta)


@dataclass
class Model:
    label: str  # "shared" or "seed k"
    norm_std: float | None  # None: the shared model
    folder: Path
    tag: str  # file-name part


def folders(name: str, seeds: int, norm_stds: list[float]) -> list[Model]:
    """The shared folder, then a new folder per norm spread and seed."""
    src = arch_dir() / name
    out = [Model("shared", None, src, "shared")]
    for s in norm_stds:
        for k in range(1, seeds + 1):
            tag = f"seed{k}" + ("" if s == 0.1 else f"-norm{s:g}")
            dst = CACHE / f"{name}-{tag}"
            copy_folder(src, dst)
            new_weights(dst, k, s, causal_lm=name in RERANKERS)
            out.append(Model(f"seed {k}", s, dst, tag))
    return out


# --- ours -------------------------------------------------------------------------------


def convert(embd: str, folder: Path, tag: str, name: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    w = CACHE / f"{name}-{tag}.weights"
    subprocess.run(
        [embd, "convert", str(folder), "-o", str(w)], check=True, capture_output=True, text=True
    )
    return w


def run_embd(embd: str, args: list[str], lines: list[dict[str, str]]) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as t:
        for x in lines:
            t.write(json.dumps(x, ensure_ascii=False) + "\n")
    try:
        cmd = [embd, *args, "--jsonl", "--input", t.name, "--batch-size", "1", "--threads", "1"]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    finally:
        os.unlink(t.name)
    rows = [json.loads(x) for x in res.stdout.splitlines() if x.strip()]
    if len(rows) != len(lines):
        sys.exit(f"{' '.join(cmd)}: {len(rows)} outputs for {len(lines)} inputs")
    return rows


def cosines(a: F64, b: F64) -> F64:
    num = np.sum(a * b, axis=1)
    return np.asarray(num / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))


# --- the measurements -------------------------------------------------------------------


@dataclass
class Result:
    label: str
    norm_std: float | None
    worst: dict[str, float] = field(
        default_factory=dict
    )  # embedders: min cosine; rerankers: max |dlogit|
    mean: dict[str, float] = field(default_factory=dict)  # mean cosine / mean |dlogit|
    spread: float = 0.0  # rerankers: standard deviation of the reference logits


def embedder(name: str, seeds: int, norm_stds: list[float], embd: str) -> list[Result]:
    ref_lines = (arch_dir() / f"{name}_reference.jsonl").read_text(encoding="utf-8").splitlines()
    ref = [json.loads(x) for x in ref_lines if x.strip()]
    texts = [str(x["text"]) for x in ref]
    results = []
    for m in folders(name, seeds, norm_stds):
        st = SentenceTransformer(str(m.folder), device="cpu", local_files_only=True)
        mine = np.asarray(
            st.encode(texts, batch_size=1, convert_to_numpy=True, show_progress_bar=False),
            np.float64,
        )
        if m.norm_std is None:
            target = np.array([x["embedding"] for x in ref], np.float64)
            d = float(np.max(np.abs(mine - target)))
            print(f"{name}: sentence-transformers vs the reference file: max abs diff {d:.3g}")
        else:
            target = mine
        w = convert(embd, m.folder, m.tag, name)
        r = Result(m.label, m.norm_std)
        for p in PRECISIONS:
            rows = run_embd(
                embd, ["encode", "-m", str(w), "--precision", p], [{"text": t} for t in texts]
            )
            ours = np.array([x["embedding"] for x in rows], np.float64)
            c = cosines(ours, target)
            r.worst[p], r.mean[p] = float(c.min()), float(c.mean())
        print(
            f"{name} {m.tag}: "
            + ", ".join(f"{p} {r.worst[p]:.6f}/{r.mean[p]:.6f}" for p in PRECISIONS)
        )
        results.append(r)
    return results


def reranker(name: str, seeds: int, norm_stds: list[float], embd: str) -> list[Result]:
    ref_lines = (arch_dir() / f"{name}_reference.jsonl").read_text(encoding="utf-8").splitlines()
    ref = [y for y in (json.loads(x) for x in ref_lines if x.strip()) if "prompt" not in y]
    pairs = [(str(x["query"]), str(x["passage"])) for x in ref]
    results = []
    for m in folders(name, seeds, norm_stds):
        ce = CrossEncoder(str(m.folder), device="cpu", local_files_only=True)
        out = ce.predict(
            pairs, batch_size=1, activation_fn=torch.nn.Identity(), show_progress_bar=False
        )
        mine = np.asarray(out, np.float64).reshape(len(pairs))
        if m.norm_std is None:
            target = np.array([x["logit"] for x in ref], np.float64)
            d = float(np.max(np.abs(mine - target)))
            print(f"{name}: CrossEncoder vs the reference file: max abs logit diff {d:.3g}")
        else:
            target = mine
        w = convert(embd, m.folder, m.tag, name)
        r = Result(m.label, m.norm_std, spread=float(np.std(target)))
        for p in PRECISIONS:
            lines = [{"query": q, "passage": d} for q, d in pairs]
            rows = run_embd(embd, ["rerank", "-m", str(w), "--precision", p], lines)
            diff = np.abs(np.array([float(x["logit"]) for x in rows], np.float64) - target)
            r.worst[p], r.mean[p] = float(diff.max()), float(diff.mean())
        print(
            f"{name} {m.tag}: "
            + ", ".join(f"{p} {r.worst[p]:.3g}/{r.mean[p]:.3g}" for p in PRECISIONS)
        )
        results.append(r)
    return results


# --- the table --------------------------------------------------------------------------

EMBED_COLS = (("bf16", True), ("bf16", False), ("int8", True), ("int8", False))


def value(r: Result, p: str, worst: bool) -> float:
    return (r.worst if worst else r.mean)[p]


def sd_of(r: Result) -> str:
    return "(shared)" if r.norm_std is None else f"{r.norm_std:g}"


def range_cells(rs: list[Result], s: float, fmt: str) -> list[str]:
    """min-max over the seeds of norm spread s per column; "(shared <)" / "(shared >)" where
    the shared model's value is below / above every seed's."""
    seeds = [r for r in rs if r.norm_std == s]
    ref = next(r for r in rs if r.norm_std is None)
    cells = []
    for p, worst in EMBED_COLS:
        v = [value(r, p, worst) for r in seeds]
        cells.append(span(v, value(ref, p, worst), fmt))
    return cells


def span(v: list[float], shared_value: float, fmt: str) -> str:
    lo, hi = min(v), max(v)
    mark = " (shared <)" if shared_value < lo else " (shared >)" if shared_value > hi else ""
    return f"{lo:{fmt}}-{hi:{fmt}}{mark}"


def embed_table(all_rs: dict[str, list[Result]], norm_stds: list[float]) -> list[str]:
    out = [
        "| model | weights | norm sd | f32: 1 - worst cos | bf16 worst cos | bf16 mean cos"
        " | int8 worst cos | int8 mean cos |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rs in all_rs.items():
        for r in rs:
            cells = [f"{1.0 - r.worst['f32']:.1e}"] + [
                f"{value(r, p, w):.6f}" for p, w in EMBED_COLS
            ]
            out.append(f"| {name} | {r.label} | {sd_of(r)} | " + " | ".join(cells) + " |")
        for s in norm_stds:
            f32 = max(1.0 - r.worst["f32"] for r in rs if r.norm_std == s)
            cells = [f"<= {f32:.1e}", *range_cells(rs, s, ".6f")]
            out.append(f"| {name} | **seeds, min-max** | {s:g} | " + " | ".join(cells) + " |")
    return out


def rerank_table(all_rs: dict[str, list[Result]], norm_stds: list[float]) -> list[str]:
    out = [
        "| model | weights | norm sd | sd of the logits | f32 max abs dlogit | bf16 max abs dlogit"
        " | bf16 mean | int8 max abs dlogit | int8 mean | bf16 max / sd | int8 max / sd |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rs in all_rs.items():
        for r in rs:
            cells = [f"{r.spread:.3g}", f"{r.worst['f32']:.1e}"]
            cells += [f"{value(r, p, w):.3g}" for p, w in EMBED_COLS]
            cells += [f"{r.worst[p] / r.spread:.3f}" for p in ("bf16", "int8")]
            out.append(f"| {name} | {r.label} | {sd_of(r)} | " + " | ".join(cells) + " |")
        ref = next(r for r in rs if r.norm_std is None)
        for s in norm_stds:
            seeds = [r for r in rs if r.norm_std == s]
            cells = [span([r.spread for r in seeds], ref.spread, ".3g")]
            cells.append(f"<= {max(r.worst['f32'] for r in seeds):.1e}")
            cells += range_cells(rs, s, ".3g")
            for p in ("bf16", "int8"):
                rel = [r.worst[p] / r.spread for r in seeds]
                cells.append(span(rel, ref.worst[p] / ref.spread, ".3f"))
            out.append(f"| {name} | **seeds, min-max** | {s:g} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=int, default=4, help="random models per family (seeds 1..N)")
    ap.add_argument(
        "--norm-std",
        type=float,
        nargs="+",
        default=[0.1],
        help="sd of the norm gains (one set of seeds each)",
    )
    ap.add_argument(
        "--family", nargs="+", default=[*EMBEDDERS, *RERANKERS], choices=[*EMBEDDERS, *RERANKERS]
    )
    ap.add_argument("--embd", default=str(ROOT / "target" / "release" / "embd"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    emb = {
        n: embedder(n, args.seeds, args.norm_std, args.embd) for n in args.family if n in EMBEDDERS
    }
    rer = {
        n: reranker(n, args.seeds, args.norm_std, args.embd) for n in args.family if n in RERANKERS
    }
    print()
    if emb:
        print(
            "Cosine of ours to sentence-transformers f32 (shared: to its reference file),"
            " 346 texts:\n"
        )
        print("\n".join(embed_table(emb, args.norm_std)))
        print()
    if rer:
        print(
            "Reranker, |logit(ours) - logit(CrossEncoder f32)| (shared: to its reference file),"
            " 213 pairs:\n"
        )
        print("\n".join(rerank_table(rer, args.norm_std)))


if __name__ == "__main__":
    main()

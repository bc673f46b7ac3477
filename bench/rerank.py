#!/usr/bin/env python3
"""Reranking latency: one query against 100 (and 1,000) passages of
shared/bench/corpus.txt, at 1 and 2 threads, f32 and int8, for the library
(through the Python binding, ``embedder.Reranker.rank``: the query tokenized once,
the pairs run padding-free over the threads) and ONNX Runtime in the same run,
interleaved, tokenization included everywhere.

ONNX Runtime runs the same cross-encoder built node by node by
``bench/export_onnx.py`` from the HF folder (BertForSequenceClassification: the
encoder, the first token, pooler dense + tanh, classifier), plain and fused by
ORT's transformer optimizer (f32), and both quantized with
``onnxruntime.quantization.quantize_dynamic`` (int8 weights per channel, dynamic
int8 activations; as bench/prepare_peers.py quantizes the embedding graph). It is fed as ``CrossEncoder.predict`` feeds torch: pairs tokenized
by HF ``tokenizers`` (``longest_first`` to the same maximum length), batches of
``--batch-size`` (32, CrossEncoder's default) padded to their longest pair; the
"sorted" rows (ORT's best case) tokenize all pairs first and batch them by length,
which leaves almost no padding.
Before timing, its logits are checked against
shared/reference/families/minilm-reranker_reference.jsonl (max length 256, as the
reference); the check prints the worst logit difference of each graph.

With ``--torch`` (run with bench/.venv-torch/bin/python, made by
``bench/setup.sh --torch``: pinned torch 2.15.0, transformers 5.24.0,
sentence-transformers 6.2.0, the versions that made the reference), also
sentence-transformers' ``CrossEncoder`` on torch (CPU), in the same run, interleaved:
``CrossEncoder(hf, device="cpu", max_length=ours)``, ``torch.set_num_threads`` = the
thread column, ``rank(query, passages, top_k=10)`` (``predict``, batches of
``--batch-size`` sorted by length as CrossEncoder does, then the sort); f32 and
``torch.ao.quantization.quantize_dynamic`` int8 (every ``nn.Linear``, qint8). Offline
(HF_HUB_OFFLINE=1): the folder is local. Its f32 scores are checked against the reference
and against ours at every size (printed: max |score diff|).

The table gives the median milliseconds of ``rank(query, passages, top_k=10)``
(ORT: tokenize, run, sort) and the goals: our f32 >= 1.5x ORT's best f32,
our int8 >= 1.3x the fastest int8 peer.

usage: EMBEDDER_LIB_PATH=target/release/libembedder.so PYTHONPATH=python/src \\
       bench/.venv/bin/python bench/rerank.py [--hf DIR] [--model FILE] [--rounds N]
       (bench/.venv-torch/bin/python ... --torch: CrossEncoder too)
Defaults: models/minilm-reranker-hf and models/minilm-reranker.weights
(scripts/fetch_reranker.sh). The ONNX graphs go to bench/out/ (rebuilt when
export_onnx.py or the weights change).
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def shared() -> Path:
    return Path(os.environ.get("EMBD_SHARED_DIR", ROOT.parent / "shared"))


def corpus() -> list:
    lines = (shared() / "bench" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    return [t for t in lines if t.strip()]


def onnx_graphs(hf: Path) -> dict:
    """The four ONNX Runtime graphs, built when absent or stale."""
    key = hashlib.sha256((ROOT / "bench" / "export_onnx.py").read_bytes()).hexdigest()
    st = (hf / "model.safetensors").stat()
    key += f" {st.st_size} {st.st_mtime_ns}"
    stamp = OUT / ".reranker.key"
    plain, fused = OUT / "reranker.onnx", OUT / "reranker.opt.onnx"
    graphs = {
        "ORT f32 plain": plain,
        "ORT f32 fused": fused,
        "ORT int8 plain": OUT / "reranker.int8.onnx",
        "ORT int8 fused": OUT / "reranker.opt.int8.onnx",
    }
    if (
        not all(p.is_file() for p in graphs.values())
        or not stamp.is_file()
        or stamp.read_text() != key
    ):
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "export_onnx.py"), str(hf), str(OUT)], check=True
        )
        for src, dst in ((plain, graphs["ORT int8 plain"]), (fused, graphs["ORT int8 fused"])):
            quantize_int8(src, dst)
        stamp.write_text(key)
    return graphs


def quantize_int8(src: Path, dst: Path) -> None:
    """ORT dynamic int8, as bench/prepare_peers.py quantizes the embedding graph."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=False,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


class OrtReranker:
    """An ONNX Runtime session over the exported cross-encoder, fed as
    CrossEncoder feeds torch."""

    def __init__(
        self,
        path: Path,
        tok: Tokenizer,
        threads: int,
        max_length: int,
        batch_size: int,
        sort: bool = False,
    ):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.tok = tok
        self.tok.enable_truncation(max_length, strategy="longest_first")
        self.tok.no_padding()
        self.batch = batch_size
        self.sort = sort
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def logits(self, pairs: list) -> np.ndarray:
        if self.sort:
            # All pairs tokenized, then batched by length (least padding).
            encs = self.tok.encode_batch(pairs)
            order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
            out = np.empty(len(pairs), np.float32)
            for s in range(0, len(order), self.batch):
                part = order[s : s + self.batch]
                out[part] = self._run([encs[i] for i in part])
            return out
        return np.concatenate(
            [
                self._run(self.tok.encode_batch(pairs[s : s + self.batch]))
                for s in range(0, len(pairs), self.batch)
            ]
        )

    def _run(self, encs: list) -> np.ndarray:
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            types[i, : len(e.ids)] = e.type_ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return self.sess.run(["logits"], {k: v for k, v in feed.items() if k in self.inputs})[0][
            :, 0
        ]

    def rank(self, query: str, docs: list, top_k: int) -> list:
        logits = self.logits([(query, d) for d in docs])
        order = sorted(range(len(docs)), key=lambda i: (-logits[i], i))
        return order[:top_k]


class CrossEncoderPeer:
    """sentence-transformers' CrossEncoder on torch (CPU), f32 or dynamic int8."""

    def __init__(
        self, hf: Path, threads: int, max_length: int, batch_size: int, int8: bool = False
    ):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import warnings

        import torch
        import transformers
        from sentence_transformers import CrossEncoder

        transformers.utils.logging.disable_progress_bar()
        # quantize_dynamic's notes that torch.ao.quantization and quantized tensors are deprecated
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings(
            "ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel"
        )

        self.torch = torch
        self.threads = threads
        self.batch = batch_size
        self.ce = CrossEncoder(str(hf), device="cpu", max_length=max_length, local_files_only=True)
        if int8:
            torch.ao.quantization.quantize_dynamic(
                self.ce, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
            )

    def predict(self, pairs: list) -> np.ndarray:
        self.torch.set_num_threads(self.threads)
        return np.asarray(
            self.ce.predict(pairs, batch_size=self.batch, show_progress_bar=False), np.float64
        )

    def rank(self, query: str, docs: list, top_k: int) -> list:
        self.torch.set_num_threads(self.threads)
        hits = self.ce.rank(
            query, docs, top_k=top_k, batch_size=self.batch, show_progress_bar=False
        )
        return [h["corpus_id"] for h in hits]


def check_reference(graphs: dict, hf: Path, torch_peer: bool = False) -> None:
    lines = [
        json.loads(x)
        for x in (shared() / "reference" / "families" / "minilm-reranker_reference.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if x.strip()
    ]
    pairs = [(x["query"], x["passage"]) for x in lines]
    want = np.array([x["logit"] for x in lines], np.float64)
    tok = Tokenizer.from_file(str(hf / "tokenizer.json"))
    tok.enable_truncation(256, strategy="longest_first")
    tok.no_padding()
    bad_ids = sum(
        e.ids != x["input_ids"] for e, x in zip(tok.encode_batch(pairs), lines, strict=True)
    )
    print(f"reference: {len(lines)} pairs; HF tokenizers ids differ on {bad_ids} lines")
    for name, path in graphs.items():
        r = OrtReranker(path, Tokenizer.from_file(str(hf / "tokenizer.json")), 2, 256, 32)
        got = r.logits(pairs)
        d = np.abs(got - want)
        score_d = np.abs(1 / (1 + np.exp(-got)) - np.array([x["score"] for x in lines]))
        print(f"  {name}: max |logit diff| {d.max():.3g}, max |score diff| {score_d.max():.3g}")
        if "f32" in name and d.max() > 1e-4:
            sys.exit(f"{name}: logits differ from the reference by {d.max():.3g} (> 1e-4)")
    if torch_peer:
        want_score = np.array([x["score"] for x in lines], np.float64)
        for int8 in (False, True):
            ce = CrossEncoderPeer(hf, 2, 256, 32, int8)
            d = np.abs(ce.predict(pairs) - want_score)
            name = "CrossEncoder " + ("int8" if int8 else "f32")
            print(f"  {name}: max |score diff| {d.max():.3g}")
            if not int8 and d.max() > 1e-5:
                sys.exit(f"{name}: scores differ from the reference by {d.max():.3g} (> 1e-5)")


def median_ms(f, rounds: int) -> float:
    f()  # warm-up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", default=str(ROOT / "models" / "minilm-reranker-hf"))
    ap.add_argument("--model", default=str(ROOT / "models" / "minilm-reranker.weights"))
    ap.add_argument(
        "--rounds", type=int, default=5, help="timed runs at 100 passages (half at 1,000)"
    )
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument(
        "--torch",
        action="store_true",
        help="also sentence-transformers' CrossEncoder (torch; bench/.venv-torch)",
    )
    args = ap.parse_args()
    import embedder

    hf = Path(args.hf)
    graphs = onnx_graphs(hf)
    check_reference(graphs, hf, args.torch)
    texts = corpus()
    query = texts[0]
    sizes = [int(x) for x in args.sizes.split(",")]
    load0 = os.getloadavg()
    ms = {}  # (engine, threads, n) -> ms
    for threads in (1, 2):
        ours = {
            p: embedder.Reranker(args.model, threads=threads, compute_precision=p)
            for p in ("f32", "int8")
        }
        max_length = ours["f32"].max_length
        peers: dict[str, OrtReranker | CrossEncoderPeer] = {
            name + (" sorted" if sort else ""): OrtReranker(
                path,
                Tokenizer.from_file(str(hf / "tokenizer.json")),
                threads,
                max_length,
                args.batch_size,
                sort,
            )
            for name, path in graphs.items()
            for sort in ((False, True) if "fused" in name else (False,))
        }
        if args.torch:
            for int8 in (False, True):
                peers["CrossEncoder torch " + ("int8" if int8 else "f32")] = CrossEncoderPeer(
                    hf, threads, max_length, args.batch_size, int8
                )
        for n in sizes:
            docs = texts[1 : n + 1]
            rounds = args.rounds if n <= 100 else max(1, args.rounds // 2)
            # Interleaved: ours and the peers alternate within one (threads, n).
            for p, r in ours.items():
                ms[(f"ours {p}", threads, n)] = median_ms(
                    lambda r=r, docs=docs: r.rank(query, docs, top_k=10), rounds
                )
                for name, peer in peers.items():
                    if p in name and (name, threads, n) not in ms:
                        ms[(name, threads, n)] = median_ms(
                            lambda peer=peer, docs=docs: peer.rank(query, docs, 10), rounds
                        )
            # Same top 10 as ours in f32 (a sanity check on the peers' inputs).
            top = [g["corpus_id"] for g in ours["f32"].rank(query, docs, top_k=10)]
            for name, peer in peers.items():
                if "f32" in name and peer.rank(query, docs, 10) != top:
                    print(f"note: {name} top-10 differs from ours at {n} passages")
            ce: Any = peers.get("CrossEncoder torch f32")
            if ce is not None and threads == 1:
                d = np.abs(
                    ce.predict([(query, x) for x in docs])
                    - ours["f32"].predict([(query, x) for x in docs])
                )
                print(f"CrossEncoder f32 vs ours f32, {n} passages: max |score diff| {d.max():.3g}")
        for r in ours.values():
            r.close()
    load1 = os.getloadavg()
    cols = [(t, n) for n in sizes for t in (1, 2)]
    print(
        f"\nload average before {load0[0]:.2f}, after {load1[0]:.2f} ({os.cpu_count()} CPUs); "
        f"median ms of rank(1 query x N passages, top 10); ORT batch {args.batch_size}"
    )
    print("| engine | " + " | ".join(f"{n}, {t} thr" for t, n in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    engines = ["ours f32", "ours int8"] + sorted(
        {e for (e, _, _) in ms if not e.startswith("ours")}
    )
    for e in engines:
        print(f"| {e} | " + " | ".join(f"{ms[(e, t, n)]:.1f}" for t, n in cols) + " |")

    def best(prefix: str, kind: str, t: int, n: int) -> float:
        """The fastest peer (not ours) whose name starts with prefix ("": any) and holds kind."""
        return min(
            v
            for (e, tt, nn), v in ms.items()
            if not e.startswith("ours")
            and e.startswith(prefix)
            and kind in e
            and tt == t
            and nn == n
        )

    print(
        "| **f32: ORT best f32 / ours** (goal >= 1.5) | "
        + " | ".join(f"{best('ORT', 'f32', t, n) / ms[('ours f32', t, n)]:.2f}" for t, n in cols)
        + " |"
    )
    if args.torch:
        print(
            "| **f32: CrossEncoder f32 / ours** | "
            + " | ".join(
                f"{best('Cross', 'f32', t, n) / ms[('ours f32', t, n)]:.2f}" for t, n in cols
            )
            + " |"
        )
    print(
        "| **int8: fastest int8 peer / ours** (goal >= 1.3) | "
        + " | ".join(f"{best('', 'int8', t, n) / ms[('ours int8', t, n)]:.2f}" for t, n in cols)
        + " |"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""finalfusion interop helper, run with the PyPI `finalfusion` 0.7.1 package.

Usage:
  fifu_py.py write OUTDIR PROBES_JSON   writes test files with finalfusion-python
                                        and OUTDIR/lookups.json (file -> word -> vector|null)
  fifu_py.py read PROBES_JSON FILE...   reads files written by us and prints the same
                                        JSON for them on stdout

PROBES_JSON is a JSON list of words to look up. Vectors are lists of floats.
"""
import json
import os
import sys

import numpy as np
from finalfusion import Embeddings, load_finalfusion
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms
from finalfusion.storage import NdArray, QuantizedArray
from finalfusion.storage.quantized import PQ
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer
from finalfusion.vocab import ExplicitVocab, FastTextVocab, FinalfusionBucketVocab, SimpleVocab

WORDS = ["berlin", "paris", "tree", "house", "Daniël", "köln", "a b", "über"]


def lookups(emb, probes):
    out = {}
    for w in probes:
        v = emb.embedding(w)
        out[w] = None if v is None else [float(x) for x in v]
    return out


def mat(rows, cols, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, size=(rows, cols)).astype(np.float32)


def write(outdir, probes):
    os.makedirs(outdir, exist_ok=True)
    n = len(WORDS)
    files = {}
    norms = Norms(np.arange(1, n + 1, dtype=np.float32) * 0.5)

    files["py_simple.fifu"] = Embeddings(
        NdArray(mat(n, 6, 1)), SimpleVocab(list(WORDS)), norms=norms,
        metadata=Metadata({"name": "py", "dims": 6}))
    files["py_bucket.fifu"] = Embeddings(
        NdArray(mat(n + 2 ** 5, 6, 2)),
        FinalfusionBucketVocab(list(WORDS), FinalfusionHashIndexer(5, 3, 6)), norms=norms)
    files["py_fasttext.fifu"] = Embeddings(
        NdArray(mat(n + 29, 6, 3)),
        FastTextVocab(list(WORDS), FastTextIndexer(29, 3, 6)), norms=norms)
    ngrams = ["<be", "ber", "erl", "<pa", "par", "<Da", "Dan"]
    index = {"<be": 0, "ber": 1, "erl": 0, "<pa": 2, "par": 1, "<Da": 3, "Dan": 3}
    files["py_explicit.fifu"] = Embeddings(
        NdArray(mat(n + 4, 6, 4)),
        ExplicitVocab(list(WORDS), ExplicitIndexer(ngrams, 3, 3, index)), norms=norms)
    # Product quantization with a projection and per-row norms (the Python
    # package cannot train a quantizer, so the quantizer is made up).
    rows = n + 2 ** 4
    rng = np.random.default_rng(5)
    quantizers = rng.uniform(-1, 1, size=(3, 4, 2)).astype(np.float32)
    projection = rng.uniform(-1, 1, size=(6, 6)).astype(np.float32)
    codes = rng.integers(0, 4, size=(rows, 3)).astype(np.uint8)
    qnorms = rng.uniform(0.5, 2, size=(rows,)).astype(np.float32)
    files["py_quantized.fifu"] = Embeddings(
        QuantizedArray(PQ(quantizers, projection), codes, qnorms),
        FinalfusionBucketVocab(list(WORDS), FinalfusionHashIndexer(4, 3, 6)), norms=norms)

    result = {}
    for name, emb in files.items():
        path = os.path.join(outdir, name)
        emb.write(path)
        result[name] = lookups(load_finalfusion(path), probes)
    with open(os.path.join(outdir, "lookups.json"), "w") as f:
        json.dump(result, f)


def read(probes, paths):
    result = {}
    for p in paths:
        emb = load_finalfusion(p)
        entry = lookups(emb, probes)
        entry["__words__"] = list(emb.vocab.words)
        result[os.path.basename(p)] = entry
    json.dump(result, sys.stdout)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "write":
        write(sys.argv[2], json.loads(sys.argv[3]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "read":
        read(json.loads(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

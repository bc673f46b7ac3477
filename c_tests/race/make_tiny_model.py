#!/usr/bin/env python3
"""Writes a tiny random BERT as a HuggingFace folder for the race check.

    make_tiny_model.py OUT_DIR

OUT_DIR gets config.json, vocab.txt, model.safetensors, modules.json and
1_Pooling/config.json (mean pooling + Normalize, like all-MiniLM-L6-v2) for a
BERT with hidden 32, 2 heads, 2 layers, intermediate 64, max_position 128 and
a ~250-token WordPiece vocabulary. Weights are random with a fixed seed, so the
folder is the same on every run. Convert it with

    target/release/embd convert OUT_DIR -o tiny.weights

Standard library only (safetensors is written by hand: an 8-byte little-endian
header length, a JSON header, then the raw little-endian f32 data).

max_position is 128 rather than 64 on purpose: the engine splits the kernels of
one sequence over its worker threads only from 96 tokens on
(MIN_SPLIT_TOKENS in src/embedder.rs), so a 64-position model would never reach
the parallel column-block path of src/kernels/gemm.rs that the check is meant to
cover.
"""

import json
import os
import random
import struct
import sys

HIDDEN = 32
HEADS = 2
LAYERS = 2
INTER = 64
MAX_POS = 128
TYPE_VOCAB = 2
SEED = 20240605

WORDS = """the a an is are was of to and in on at for with by from as it this that
cat cats sits sitting outside inside man men woman is playing plays guitar piano
i love like you do pasta pizza new movie film so great awesome good bad classic
mailbox return true false if object frame dog dogs run runs running fast slow
red blue green big small house car tree sky sun moon water fire book read write
code rust thread threads race data model vector vectors text texts one two three
four five six seven eight nine ten hello world quick brown fox jumps over lazy
what when where why how who not no yes all some many few more most very""".split()


def vocab():
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    toks += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    toks += [str(d) for d in range(10)]
    toks += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks += ["##" + str(d) for d in range(10)]
    toks += ["##s", "##ing", "##ed", "##er", "##ly"]
    seen = set()
    out = []
    for t in toks + WORDS:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def tensors(rng, n_vocab):
    def rand(*shape, scale=0.1):
        n = 1
        for s in shape:
            n *= s
        return list(shape), [rng.uniform(-scale, scale) for _ in range(n)]

    def ones(n):
        return [n], [1.0 + rng.uniform(-0.05, 0.05) for _ in range(n)]

    t = {
        "embeddings.word_embeddings.weight": rand(n_vocab, HIDDEN, scale=0.5),
        "embeddings.position_embeddings.weight": rand(MAX_POS, HIDDEN, scale=0.2),
        "embeddings.token_type_embeddings.weight": rand(TYPE_VOCAB, HIDDEN, scale=0.1),
        "embeddings.LayerNorm.weight": ones(HIDDEN),
        "embeddings.LayerNorm.bias": rand(HIDDEN, scale=0.05),
    }
    for l in range(LAYERS):
        p = "encoder.layer.%d." % l
        for name in ("query", "key", "value"):
            t[p + "attention.self.%s.weight" % name] = rand(HIDDEN, HIDDEN, scale=0.3)
            t[p + "attention.self.%s.bias" % name] = rand(HIDDEN, scale=0.05)
        t[p + "attention.output.dense.weight"] = rand(HIDDEN, HIDDEN, scale=0.3)
        t[p + "attention.output.dense.bias"] = rand(HIDDEN, scale=0.05)
        t[p + "attention.output.LayerNorm.weight"] = ones(HIDDEN)
        t[p + "attention.output.LayerNorm.bias"] = rand(HIDDEN, scale=0.05)
        t[p + "intermediate.dense.weight"] = rand(INTER, HIDDEN, scale=0.3)
        t[p + "intermediate.dense.bias"] = rand(INTER, scale=0.05)
        t[p + "output.dense.weight"] = rand(HIDDEN, INTER, scale=0.2)
        t[p + "output.dense.bias"] = rand(HIDDEN, scale=0.05)
        t[p + "output.LayerNorm.weight"] = ones(HIDDEN)
        t[p + "output.LayerNorm.bias"] = rand(HIDDEN, scale=0.05)
    t["pooler.dense.weight"] = rand(HIDDEN, HIDDEN, scale=0.3)
    t["pooler.dense.bias"] = rand(HIDDEN, scale=0.05)
    return t


def write_safetensors(path, ts):
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name in sorted(ts):
        shape, vals = ts[name]
        b = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = argv[1]
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    rng = random.Random(SEED)
    toks = vocab()
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(toks) + "\n")
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "intermediate_size": INTER,
        "max_position_embeddings": MAX_POS,
        "type_vocab_size": TYPE_VOCAB,
        "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
        "vocab_size": len(toks),
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}, f)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors(rng, len(toks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

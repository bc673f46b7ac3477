#!/usr/bin/env python3
"""Converts all-MiniLM-L6-v2 (HF folder) to a CTranslate2 model without torch.

The official path, `ct2-transformers-converter --model DIR --quantization int8`, loads the
model through `transformers.BertModel.from_pretrained` (torch) only to hand CTranslate2's
own `BertLoader` the modules' weight tensors. The loader and everything after it
(`Converter.convert`: validate, optimize(quantization), save) accept numpy arrays just as
well (`ctranslate2.converters.utils.fuse_linear` has a numpy branch). So this script feeds
the same `BertLoader` a stand-in for the torch model whose modules hold the safetensors
arrays (`safetensors.numpy`), and a stand-in tokenizer with `tokenizer.json`'s vocabulary:
the spec, the quantization and the saved model are CTranslate2's own code paths; only
`from_pretrained` is replaced. `bench/run.sh --check-peers` (and every timing run) verifies the float32 conversion
against the sentence-transformers reference (worst cosine 1 - 1e-12).

Usage: convert_ct2.py HF_DIR OUT_DIR [--quantization int8|float32|...]
"""

import argparse
import json
import os
import sys
import types

import ctranslate2
import numpy as np
from ctranslate2.converters import transformers as ct2_transformers
from ctranslate2.converters.converter import Converter
from safetensors.numpy import load_file


def _ns(**kw):
    return types.SimpleNamespace(**kw)


def _linear(w, prefix):
    return _ns(weight=w[prefix + ".weight"], bias=w[prefix + ".bias"])


def _norm(w, prefix):
    return _ns(weight=w[prefix + ".weight"], bias=w[prefix + ".bias"])


def fake_bert(hf_dir):
    """A stand-in for `transformers.BertModel`: the attributes BertLoader reads."""
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    w = load_file(os.path.join(hf_dir, "model.safetensors"))
    w = {
        k[5:] if k.startswith("bert.") else k: np.ascontiguousarray(v, np.float32)
        for k, v in w.items()
        if v.dtype.kind == "f"
    }
    config = _ns(
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        hidden_act=cfg["hidden_act"],
        position_embedding_type=cfg.get("position_embedding_type", "absolute"),
        vocab_size=cfg["vocab_size"],
        layer_norm_eps=cfg["layer_norm_eps"],
    )
    emb = _ns(
        word_embeddings=_ns(weight=w["embeddings.word_embeddings.weight"]),
        token_type_embeddings=_ns(weight=w["embeddings.token_type_embeddings.weight"]),
        position_embeddings=_ns(weight=w["embeddings.position_embeddings.weight"]),
        LayerNorm=_norm(w, "embeddings.LayerNorm"),
    )
    layers = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        layers.append(
            _ns(
                attention=_ns(
                    self=_ns(
                        query=_linear(w, p + "attention.self.query"),
                        key=_linear(w, p + "attention.self.key"),
                        value=_linear(w, p + "attention.self.value"),
                    ),
                    output=_ns(
                        dense=_linear(w, p + "attention.output.dense"),
                        LayerNorm=_norm(w, p + "attention.output.LayerNorm"),
                    ),
                ),
                intermediate=_ns(dense=_linear(w, p + "intermediate.dense")),
                output=_ns(
                    dense=_linear(w, p + "output.dense"), LayerNorm=_norm(w, p + "output.LayerNorm")
                ),
            )
        )
    if "pooler.dense.weight" not in w:
        sys.exit("convert_ct2: no pooler weights (BertLoader always writes a pooler)")
    return _ns(
        config=config,
        embeddings=emb,
        encoder=_ns(layer=layers),
        pooler=_ns(dense=_linear(w, "pooler.dense")),
    )


def fake_tokenizer(hf_dir):
    """A stand-in for the HF tokenizer: get_vocab() and unk_token, from tokenizer.json."""
    tj = json.load(open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    for t in tj.get("added_tokens", []):
        vocab.setdefault(t["content"], t["id"])
    return _ns(get_vocab=lambda: vocab, unk_token=tj["model"].get("unk_token", "[UNK]"))


class NumpyBertConverter(Converter):
    def __init__(self, hf_dir):
        self.hf_dir = hf_dir

    def _load(self):
        # BertLoader.set_linear tests isinstance(module, transformers.Conv1D); without
        # transformers installed that name is missing from the module, so give it a class
        # nothing is an instance of.
        if not hasattr(ct2_transformers, "transformers"):
            ct2_transformers.transformers = types.SimpleNamespace(Conv1D=type("Conv1D", (), {}))
        return ct2_transformers.BertLoader()(fake_bert(self.hf_dir), fake_tokenizer(self.hf_dir))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("hf_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--quantization", default="int8")
    args = ap.parse_args()
    NumpyBertConverter(args.hf_dir).convert(
        args.out_dir, quantization=args.quantization, force=True
    )
    size = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(
        f"wrote {args.out_dir} (ctranslate2 {ctranslate2.__version__}, {args.quantization}, {size / 1e6:.1f} MB)"
    )


if __name__ == "__main__":
    main()

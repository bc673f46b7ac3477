#!/usr/bin/env python3
"""Builds all-MiniLM-L6-v2 (or all-mpnet-base-v2) as an ONNX graph from the HF safetensors weights.

There is no torch on this machine, so instead of `torch.onnx.export` we write the
graph node by node with the `onnx` package, using the same standard ops, in the same
arrangement, that a torch export of `transformers.BertModel` + sentence-transformers'
mean pooling + Normalize produces:

  embeddings  Gather(word) + Gather(position) + Gather(token_type) -> LayerNormalization
  per layer   MatMul+Add for Q, K, V -> Reshape [B,S,heads,head_dim] -> Transpose
              MatMul(Q, K^T) -> Div(sqrt(head_dim)) -> Add(mask bias) -> Softmax -> MatMul(V)
              Transpose -> Reshape [B,S,H] -> MatMul+Add -> Add(residual) -> LayerNormalization
              MatMul+Add -> Erf-GELU -> MatMul+Add -> Add(residual) -> LayerNormalization
  mask bias   (1 - Cast(Unsqueeze(Unsqueeze(attention_mask)))) * float32_min
  pooling     sum(hidden * mask) / max(sum(mask), 1e-9), then x / max(||x||_2, 1e-12)

Keeping the torch arrangement matters: ONNX Runtime's transformer optimizer
(`onnxruntime.transformers.optimizer`) recognises exactly these patterns and fuses
them into Attention / SkipLayerNormalization / BiasGelu, which is ORT's best CPU path.

Writes two files:
  OUT_DIR/minilm.onnx        the plain graph ("unfused")
  OUT_DIR/minilm.opt.onnx    after ORT's BERT optimizer ("fused")

A BertForSequenceClassification folder (a cross-encoder such as minilm-reranker; tensors
under `bert.` plus `bert.pooler.dense` and `classifier`) gives the graph of
transformers' BertForSequenceClassification instead of the pooling: the encoder as
above, then the first token's state (Gather index 0 on the sequence axis), the pooler
(MatMul+Add, Tanh) and the classifier (MatMul+Add), output `logits` [batch,
num_labels] (no activation: CrossEncoder applies it). Written as OUT_DIR/reranker.onnx
and OUT_DIR/reranker.opt.onnx (the same ORT optimizer; the head stays plain MatMul/Tanh).

An MPNet folder (config.json model_type "mpnet", all-mpnet-base-v2) gives the graph of
transformers' MPNetModel instead, as a torch export arranges it: no token types (inputs
input_ids and attention_mask only); position ids padding_idx + cumsum(ids != padding_idx)
(padding_idx 1); the relative position bias (32 buckets, max distance 128, HF's
relative_position_bucket evaluated here in float32 like torch) as a constant
[1, heads, P, P] sliced to the input length and added to every layer's scaled scores
before the mask; LayerNorm eps from the config (1e-5). ORT's Python BERT optimizer
does not recognise MPNet's attention (the extra bias Add), so only the plain graph is
written, OUT_DIR/mpnet.onnx; ORT's own session-level fusions (ORT_ENABLE_ALL) apply.

Usage: export_onnx.py MODEL_HF_DIR OUT_DIR
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17  # LayerNormalization is a standard op from opset 17


class GraphBuilder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self):
        self.nodes = []
        self.inits = []
        self.counter = 0

    def name(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def const(self, value, prefix="c", dtype=np.float32):
        """Adds an initializer (a constant tensor) and returns its name."""
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), n))
        return n

    def weight(self, array, name):
        """Adds a named weight initializer."""
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, prefix=None, **attrs):
        """Adds one node with a single output and returns that output's name."""
        out = self.name(prefix or op_type)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out + "_node", **attrs))
        return out


def linear(g, x, weights, prefix):
    """nn.Linear as torch exports it: MatMul(x, W^T) then Add(bias)."""
    w = g.weight(weights[prefix + ".weight"].T, prefix + ".weight_t")
    b = g.weight(weights[prefix + ".bias"], prefix + ".bias")
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def layer_norm(g, x, weights, prefix, eps):
    scale = g.weight(weights[prefix + ".weight"], prefix + ".weight")
    bias = g.weight(weights[prefix + ".bias"], prefix + ".bias")
    return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def relative_bias(weights, heads, length, num_buckets=32, max_distance=128):
    """HF MPNetEncoder.compute_position_bias for `length` positions: [1, heads, L, L]."""
    pos = np.arange(length, dtype=np.int64)
    rel = pos[None, :] - pos[:, None]  # memory - context
    n = -rel
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        large = exact + (
            np.log(n.astype(np.float32) / np.float32(exact))
            / np.float32(np.log(max_distance / exact))
            * np.float32(half - exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    bucket = ret + np.where(n < exact, n, large)
    table = weights["encoder.relative_attention_bias.weight"]  # [buckets, heads]
    return np.ascontiguousarray(table[bucket].transpose(2, 0, 1)[None]).astype(np.float32)


def build(hf_dir):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    if cfg.get("model_type") == "mpnet":
        return build_mpnet(hf_dir, cfg)
    weights = load_file(os.path.join(hf_dir, "model.safetensors"))
    classifier = is_classifier(cfg)
    if classifier:
        # BertForSequenceClassification: the encoder's tensors under "bert."
        weights = {k[len("bert.") :] if k.startswith("bert.") else k: v for k, v in weights.items()}
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    g = GraphBuilder()

    # --- embeddings -------------------------------------------------------
    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    word = g.op(
        "Gather",
        [g.weight(weights["embeddings.word_embeddings.weight"], "word_embeddings"), ids],
        axis=0,
    )
    # position_ids = self.position_ids[:, :seq_len] (a buffer sliced to the input length)
    seq_len = g.op(
        "Unsqueeze",
        [
            g.op("Gather", [g.op("Shape", [ids]), g.const(1, dtype=np.int64)], axis=0),
            g.const([0], dtype=np.int64),
        ],
    )
    pos_ids = g.op(
        "Slice",
        [
            g.const(np.arange(cfg["max_position_embeddings"])[None, :], "position_ids", np.int64),
            g.const([0], dtype=np.int64),
            seq_len,
            g.const([1], dtype=np.int64),
        ],
    )
    pos = g.op(
        "Gather",
        [
            g.weight(weights["embeddings.position_embeddings.weight"], "position_embeddings"),
            pos_ids,
        ],
        axis=0,
    )
    typ = g.op(
        "Gather",
        [
            g.weight(weights["embeddings.token_type_embeddings.weight"], "token_type_embeddings"),
            types,
        ],
        axis=0,
    )
    x = layer_norm(
        g, g.op("Add", [g.op("Add", [word, typ]), pos]), weights, "embeddings.LayerNorm", eps
    )

    # --- extended attention mask: (1 - mask[:, None, None, :]) * float32_min ---
    m4 = g.op(
        "Unsqueeze",
        [g.op("Unsqueeze", [mask, g.const([1], dtype=np.int64)]), g.const([2], dtype=np.int64)],
    )
    mask_bias = g.op(
        "Mul",
        [
            g.op("Sub", [g.const(1.0), g.op("Cast", [m4], to=TensorProto.FLOAT)]),
            g.const(np.finfo(np.float32).min),
        ],
    )

    split_heads = g.const([0, 0, heads, head_dim], "split_heads", np.int64)
    merge_heads = g.const([0, 0, hidden], "merge_heads", np.int64)
    scale = g.const(np.sqrt(head_dim))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        # Q, V: [B,S,H] -> [B,heads,S,d];  K: -> [B,heads,d,S] (already transposed for Q K^T)
        q = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.self.query"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        k = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.self.key"), split_heads])],
            perm=[0, 2, 3, 1],
        )
        v = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.self.value"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        scores = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k]), scale]), mask_bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op(
            "Reshape",
            [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_heads],
        )
        attn = linear(g, ctx, weights, p + "attention.output.dense")
        x = layer_norm(g, g.op("Add", [attn, x]), weights, p + "attention.output.LayerNorm", eps)
        # Intermediate with exact (erf) GELU: x * 0.5 * (1 + erf(x / sqrt(2)))
        h = linear(g, x, weights, p + "intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, g.const(np.sqrt(2.0))])])
        gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.const(1.0)])]), g.const(0.5)])
        out = linear(g, gelu, weights, p + "output.dense")
        x = layer_norm(g, g.op("Add", [out, x]), weights, p + "output.LayerNorm", eps)

    if classifier:
        return classifier_graph(g, x, weights, cfg, (ids, mask, types))

    # --- mean pooling over tokens with mask 1, then L2 normalize -----------
    mask_f = g.op(
        "Cast", [g.op("Unsqueeze", [mask, g.const([-1], dtype=np.int64)])], to=TensorProto.FLOAT
    )
    axis1 = g.const([1], dtype=np.int64)
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask_f]), axis1], keepdims=0)
    count = g.op("Clip", [g.op("ReduceSum", [mask_f, axis1], keepdims=0), g.const(1e-9)])
    mean = g.op("Div", [summed, count])
    # (ReduceL2 takes axes as an attribute until opset 18)
    norm = g.op("Clip", [g.op("ReduceL2", [mean], axes=[-1], keepdims=1), g.const(1e-12)])
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="normalize"))

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in (ids, mask, types)],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench/export_onnx.py"
    )
    model.ir_version = 8  # accepted by every onnxruntime >= 1.14
    onnx.checker.check_model(model)
    return model, cfg


def is_classifier(cfg):
    """A BertForSequenceClassification config (a cross-encoder)."""
    return any(a.endswith("ForSequenceClassification") for a in cfg.get("architectures") or [])


def classifier_graph(g, x, weights, cfg, inputs):
    """BERT's classification head on the encoder output `x` [B,S,H]: the first
    token's state, pooler dense + tanh, classifier: `logits` [B, num_labels]."""
    first = g.op("Gather", [x, g.const(0, dtype=np.int64)], axis=1)  # [B,H]
    pooled = g.op("Tanh", [linear(g, first, weights, "pooler.dense")])
    w = g.weight(weights["classifier.weight"].T, "classifier.weight_t")
    b = g.weight(weights["classifier.bias"], "classifier.bias")
    labels = weights["classifier.weight"].shape[0]
    g.nodes.append(
        helper.make_node("Add", [g.op("MatMul", [pooled, w]), b], ["logits"], name="classifier")
    )
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "bert-for-sequence-classification",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in inputs],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", labels])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench/export_onnx.py"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, cfg


def build_mpnet(hf_dir, cfg):
    """MPNetModel + mean pooling + Normalize (see the module docs)."""
    weights = load_file(os.path.join(hf_dir, "model.safetensors"))
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    max_pos = cfg["max_position_embeddings"]
    padding_idx = 1
    g = GraphBuilder()

    ids, mask = "input_ids", "attention_mask"
    word = g.op(
        "Gather",
        [g.weight(weights["embeddings.word_embeddings.weight"], "word_embeddings"), ids],
        axis=0,
    )
    # create_position_ids_from_input_ids: cumsum(ids != pad) * (ids != pad) + pad
    not_pad = g.op(
        "Cast",
        [g.op("Not", [g.op("Equal", [ids, g.const(padding_idx, dtype=np.int64)])])],
        to=TensorProto.INT64,
    )
    pos_ids = g.op(
        "Add",
        [
            g.op("Mul", [g.op("CumSum", [not_pad, g.const(1, dtype=np.int64)]), not_pad]),
            g.const(padding_idx, dtype=np.int64),
        ],
    )
    pos = g.op(
        "Gather",
        [
            g.weight(weights["embeddings.position_embeddings.weight"], "position_embeddings"),
            pos_ids,
        ],
        axis=0,
    )
    x = layer_norm(g, g.op("Add", [word, pos]), weights, "embeddings.LayerNorm", eps)

    m4 = g.op(
        "Unsqueeze",
        [g.op("Unsqueeze", [mask, g.const([1], dtype=np.int64)]), g.const([2], dtype=np.int64)],
    )
    mask_bias = g.op(
        "Mul",
        [
            g.op("Sub", [g.const(1.0), g.op("Cast", [m4], to=TensorProto.FLOAT)]),
            g.const(np.finfo(np.float32).min),
        ],
    )
    # The relative position bias, [1, heads, S, S] sliced from the full table.
    seq_len = g.op(
        "Unsqueeze",
        [
            g.op("Gather", [g.op("Shape", [ids]), g.const(1, dtype=np.int64)], axis=0),
            g.const([0], dtype=np.int64),
        ],
    )
    full = g.weight(
        relative_bias(weights, heads, max_pos - padding_idx - 1), "relative_position_bias"
    )
    zeros = g.const([0, 0], dtype=np.int64)
    position_bias = g.op(
        "Slice",
        [full, zeros, g.op("Concat", [seq_len, seq_len], axis=0), g.const([2, 3], dtype=np.int64)],
    )

    split_heads = g.const([0, 0, heads, head_dim], "split_heads", np.int64)
    merge_heads = g.const([0, 0, hidden], "merge_heads", np.int64)
    scale = g.const(np.sqrt(head_dim))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.attn.q"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        k = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.attn.k"), split_heads])],
            perm=[0, 2, 3, 1],
        )
        v = g.op(
            "Transpose",
            [g.op("Reshape", [linear(g, x, weights, p + "attention.attn.v"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        scores = g.op("Div", [g.op("MatMul", [q, k]), scale])
        scores = g.op("Add", [g.op("Add", [scores, position_bias]), mask_bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op(
            "Reshape",
            [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_heads],
        )
        attn = linear(g, ctx, weights, p + "attention.attn.o")
        x = layer_norm(g, g.op("Add", [attn, x]), weights, p + "attention.LayerNorm", eps)
        h = linear(g, x, weights, p + "intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, g.const(np.sqrt(2.0))])])
        gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.const(1.0)])]), g.const(0.5)])
        out = linear(g, gelu, weights, p + "output.dense")
        x = layer_norm(g, g.op("Add", [out, x]), weights, p + "output.LayerNorm", eps)

    mask_f = g.op(
        "Cast", [g.op("Unsqueeze", [mask, g.const([-1], dtype=np.int64)])], to=TensorProto.FLOAT
    )
    axis1 = g.const([1], dtype=np.int64)
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask_f]), axis1], keepdims=0)
    count = g.op("Clip", [g.op("ReduceSum", [mask_f, axis1], keepdims=0), g.const(1e-9)])
    mean = g.op("Div", [summed, count])
    norm = g.op("Clip", [g.op("ReduceL2", [mean], axes=[-1], keepdims=1), g.const(1e-12)])
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="normalize"))

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all-mpnet-base-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in (ids, mask)],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench/export_onnx.py"
    )
    model.ir_version = 8
    # > 2 GB protobuf limit is not reached (438 MB), so a single file works.
    onnx.checker.check_model(model)
    return model, cfg


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    hf_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    model, cfg = build(hf_dir)
    if cfg.get("model_type") == "mpnet":
        plain = os.path.join(out_dir, "mpnet.onnx")
        onnx.save(model, plain)
        print(
            f"wrote {plain} ({os.path.getsize(plain) / 1e6:.1f} MB, {len(model.graph.node)} nodes)"
        )
        return
    stem = "reranker" if is_classifier(cfg) else "minilm"
    plain = os.path.join(out_dir, f"{stem}.onnx")
    onnx.save(model, plain)
    print(f"wrote {plain} ({os.path.getsize(plain) / 1e6:.1f} MB, {len(model.graph.node)} nodes)")

    # ORT's own transformer optimizer: fuses Attention, SkipLayerNormalization,
    # BiasGelu (and EmbedLayerNormalization when it recognises the embeddings).
    #
    # optimize_model's default for BERT (opt_level=1) first runs ORT's basic graph
    # optimizations and then the Python fusions; its opt_level>0 path imports torch
    # (only to check for ROCm), which is not installed here. So we run the same basic
    # optimizations ourselves through an InferenceSession, as it would, and hand the
    # result to optimize_model with opt_level=0 (Python fusions only).
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    basic = os.path.join(out_dir, f"{stem}.basic.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = basic
    # optimize_model disables this one too: it would hide patterns from the fusions
    ort.InferenceSession(
        plain, so, providers=["CPUExecutionProvider"], disabled_optimizers=["ConstantSharing"]
    )
    opt = optimize_model(
        basic,
        model_type="bert",
        num_heads=cfg["num_attention_heads"],
        hidden_size=cfg["hidden_size"],
        opt_level=0,
    )
    os.remove(basic)
    fused = os.path.join(out_dir, f"{stem}.opt.onnx")
    opt.save_model_to_file(fused)
    counts: dict[str, int] = {}
    for n in opt.model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    print(
        f"wrote {fused} ({len(opt.model.graph.node)} nodes): fused ops {json.dumps(opt.get_fused_operator_statistics())}"
    )
    print("op counts:", json.dumps(dict(sorted(counts.items()))))


if __name__ == "__main__":
    main()

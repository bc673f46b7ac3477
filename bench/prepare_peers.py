#!/usr/bin/env python3
"""Builds the peers' quantized models from local files (bench/setup.sh --peers runs it).

  OUT/ov/fp32.xml     OpenVINO IR of the plain ONNX export (ov.convert_model), fp32 weights
  OUT/ov/int8.xml     nncf.quantize(model_type=TRANSFORMER), calibrated on CALIB_TEXTS corpus
                      texts (evenly spaced through the corpus, one text per sample, no padding)
  OUT/ov/int8wo.xml   nncf.compress_weights(mode=INT8_ASYM): int8 weights, fp activations
  OUT/ct2-int8/       CTranslate2 int8 (convert_ct2.py: CT2's BertLoader without torch)
  OUT/ct2-float32/    the same in float32 (only to verify the conversion against the reference)
  OUT/minilm.opt.int8.onnx   onnxruntime.quantization.quantize_dynamic of the ORT-fused graph
                             (QInt8 weights, per channel, reduce_range=False)

Usage: prepare_peers.py HF_DIR OUT_DIR CORPUS
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

CALIB_TEXTS = 300
MAX_LEN = 256
HERE = os.path.dirname(os.path.abspath(__file__))


def read_lines(path):
    raw = open(path, "rb").read()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in raw.split(b"\n")]
    if raw.endswith(b"\n"):
        lines.pop()
    return [ln.decode("utf-8") for ln in lines]


def calibration_feeds(hf_dir, corpus):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LEN)
    texts = read_lines(corpus)
    step = len(texts) / CALIB_TEXTS
    picked = [texts[int(i * step)] for i in range(CALIB_TEXTS)]
    feeds = []
    for t in picked:
        ids = np.array([tok.encode(t).ids], np.int64)
        feeds.append(
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
        )
    return feeds


def openvino_models(hf_dir, out, corpus):
    import nncf
    import openvino as ov

    d = os.path.join(out, "ov")
    os.makedirs(d, exist_ok=True)
    t0 = time.perf_counter()
    model = ov.convert_model(os.path.join(out, "minilm.onnx"))
    # compress_to_fp16=False: save_model would otherwise store the weights as fp16
    ov.save_model(model, os.path.join(d, "fp32.xml"), compress_to_fp16=False)
    print(f"wrote {d}/fp32.xml ({time.perf_counter() - t0:.1f} s)")

    t0 = time.perf_counter()
    feeds = calibration_feeds(hf_dir, corpus)
    q = nncf.quantize(
        ov.convert_model(os.path.join(out, "minilm.onnx")),
        nncf.Dataset(feeds),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(feeds),
    )
    ov.save_model(q, os.path.join(d, "int8.xml"), compress_to_fp16=False)
    print(
        f"wrote {d}/int8.xml: nncf.quantize, TRANSFORMER, {len(feeds)} calibration texts "
        f"({time.perf_counter() - t0:.1f} s)"
    )

    t0 = time.perf_counter()
    w = nncf.compress_weights(
        ov.convert_model(os.path.join(out, "minilm.onnx")), mode=nncf.CompressWeightsMode.INT8_ASYM
    )
    ov.save_model(w, os.path.join(d, "int8wo.xml"), compress_to_fp16=False)
    print(
        f"wrote {d}/int8wo.xml: nncf.compress_weights INT8_ASYM ({time.perf_counter() - t0:.1f} s)"
    )


def ct2_models(hf_dir, out):
    for q in ("int8", "float32"):
        subprocess.run(
            [
                sys.executable,
                os.path.join(HERE, "convert_ct2.py"),
                hf_dir,
                os.path.join(out, f"ct2-{q}"),
                "--quantization",
                q,
            ],
            check=True,
        )


def ort_int8(out):
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    t0 = time.perf_counter()
    dst = os.path.join(out, "minilm.opt.int8.onnx")
    quantize_dynamic(
        os.path.join(out, "minilm.opt.onnx"),
        dst,
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=False,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    m = onnx.load(dst, load_external_data=False)
    counts: dict[str, int] = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    print(
        f"wrote {dst} ({os.path.getsize(dst) / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s): "
        + json.dumps(dict(sorted(counts.items())))
    )


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    hf_dir, out, corpus = sys.argv[1:]
    ort_int8(out)
    ct2_models(hf_dir, out)
    openvino_models(hf_dir, out, corpus)


if __name__ == "__main__":
    main()

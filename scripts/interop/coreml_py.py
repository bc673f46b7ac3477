#!/usr/bin/env python3
"""Core ML weight-blob interop helper (PyPI coremltools 9.0, blob storage only).

Usage:
  coreml_py.py write FILE     writes FILE with coremltools' _BlobStorageWriter, one blob
                              per supported type, and prints JSON
                              [{"offset": N, "dtype": NAME, "values": [...]}, ...]
  coreml_py.py read FILE SPEC reads blobs with _BlobStorageReader; SPEC is a JSON list
                              of {"offset": N, "dtype": NAME}; prints the same JSON
                              with "values" filled in
Type names are those of our manifest (float32, float16 as raw uint16 bits, int4, ...).
"""
import json
import sys

import numpy as np
from coremltools.libmilstoragepython import _BlobStorageReader, _BlobStorageWriter

# name -> (writer/reader suffix, numpy dtype of the values handed to the writer)
TYPES = {
    "float32": ("float", np.float32),
    "float16": ("fp16", np.uint16),
    "int8": ("int8", np.int8),
    "uint8": ("uint8", np.uint8),
    "int16": ("int16", np.int16),
    "uint16": ("uint16", np.uint16),
    "int32": ("int32", np.int32),
    "uint32": ("uint32", np.uint32),
    "int4": ("int4", np.int8),
    "uint1": ("uint1", np.uint8),
    "uint2": ("uint2", np.uint8),
    "uint3": ("uint3", np.uint8),
    "uint4": ("uint4", np.uint8),
    "uint6": ("uint6", np.uint8),
}

SAMPLES = {
    "float32": [1.0, -2.5, 3.25, 1e-3],
    "float16": [0x3C00, 0xC000, 0x3555],
    "int8": [-128, -1, 0, 127],
    "uint8": [0, 1, 255],
    "int16": [-32768, 5, 32767],
    "uint16": [0, 65535, 7],
    "int32": [-(2 ** 31), 12345, 2 ** 31 - 1],
    "uint32": [0, 2 ** 32 - 1, 9],
    "int4": [-8, -2, 0, 2, 7],
    "uint1": [1, 0, 1, 1, 0, 1, 0, 0, 1, 1],
    "uint2": [0, 1, 2, 3, 3, 2, 1],
    "uint3": [1, 2, 3, 4, 5, 6, 7],
    "uint4": [0, 15, 7, 8, 1],
    "uint6": [1, 63, 5],
}


def to_list(a):
    return [float(x) if isinstance(x, (float, np.floating)) else int(x) for x in np.asarray(a).ravel()]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        w = _BlobStorageWriter(sys.argv[2])
        out = []
        for name, vals in SAMPLES.items():
            suffix, npdt = TYPES[name]
            off = getattr(w, "write_%s_data" % suffix)(np.array(vals, dtype=npdt))
            out.append({"offset": int(off), "dtype": name, "values": vals})
        del w
        json.dump(out, sys.stdout)
    elif len(sys.argv) == 4 and sys.argv[1] == "read":
        r = _BlobStorageReader(sys.argv[2])
        spec = json.loads(sys.argv[3])
        for e in spec:
            suffix, _ = TYPES[e["dtype"]]
            e["values"] = to_list(getattr(r, "read_%s_data" % suffix)(e["offset"]))
        json.dump(spec, sys.stdout)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

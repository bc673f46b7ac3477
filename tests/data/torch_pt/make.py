"""Writes the tiny torch.save fixtures of tests/it/torch_pt.rs (files_torch_wrote).

Run with the opt-in torch venv (bench/setup.sh --torch, or any venv with torch):
    bench/.venv-torch/bin/python tests/data/torch_pt/make.py
Each NAME.pt is torch.save's own output; NAME.json lists, per tensor in the
state dict's order, what the reader must return: name, dtype, shape, stride,
storage offset, the values (as float) and the contiguous row-major bytes in hex.
Seeded; tiny (no model weights).
"""

import collections
import json
import pathlib

import torch

HERE = pathlib.Path(__file__).resolve().parent
DTYPES = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}


def flatten(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def describe(obj):
    out, seen = [], {}
    for name, t in flatten(obj):
        c = t.detach().contiguous()
        raw = c.reshape(-1).view(torch.uint8) if c.numel() else torch.empty(0, dtype=torch.uint8)
        entry = {
            "name": name,
            "dtype": DTYPES[t.dtype],
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "offset": t.storage_offset(),
            "values": [float(x) for x in c.flatten().tolist()],
            "hex": bytes(raw.flatten().tolist()).hex(),
        }
        # A later duplicate key replaces the earlier one in place.
        if name in seen:
            out[seen[name]] = entry
        else:
            seen[name] = len(out)
            out.append(entry)
    return out


def save(name, obj, **kw):
    torch.save(obj, HERE / f"{name}.pt", **kw)
    (HERE / f"{name}.json").write_text(json.dumps(describe(obj), indent=1) + "\n")


def main():
    g = torch.Generator().manual_seed(30)
    lin = torch.nn.Linear(4, 3)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(3, 4, generator=g))
        lin.bias.copy_(torch.randn(3, generator=g))
    # Half and bfloat16 heads (a module's state_dict).
    save("linear_f16", lin.to(torch.float16).state_dict())
    save("linear_bf16", lin.to(torch.bfloat16).state_dict())
    # Every other dtype, 0-d and empty tensors.
    base = torch.randn(6, generator=g)
    save(
        "dtypes",
        collections.OrderedDict(
            f64=base.double(),
            i64=torch.arange(-3, 3),
            i32=torch.arange(5, dtype=torch.int32) * -7,
            i16=torch.arange(4, dtype=torch.int16),
            i8=torch.tensor([-128, 127, 0], dtype=torch.int8),
            u8=torch.tensor([0, 255, 9], dtype=torch.uint8),
            flag=torch.tensor([True, False, True]),
            scalar=torch.tensor(2.5),
            empty=torch.zeros(0, 4),
        ),
    )
    # Views: a transposed matrix, a slice with an offset, a broadcast (stride 0),
    # two tensors on one storage.
    m = torch.randn(3, 4, generator=g)
    save(
        "views",
        {
            "t": m.t(),
            "row": m[1],
            "col": m[:, 2],
            "tail": m.view(-1)[5:],
            "bcast": torch.randn(1, 3, generator=g).expand(2, 3),
            "same": m,
        },
    )
    # A checkpoint: nested dicts, a list of tensors, non-tensor values, a
    # Parameter (pickled through _rebuild_parameter).
    p = torch.nn.Parameter(torch.randn(2, 2, generator=g))
    save(
        "nested",
        {
            "epoch": 3,
            "name": "ckpt",
            "model": lin.float().state_dict(),
            "extra": {"layers": [torch.ones(2), torch.zeros(1, dtype=torch.int64)], "p": p},
        },
    )
    # Pickle protocol 4 (STACK_GLOBAL, MEMOIZE, SHORT_BINUNICODE, FRAME).
    save("protocol4", lin.float().state_dict(), pickle_protocol=4)
    # The legacy (pre-1.6) layout, which the reader refuses by name.
    torch.save(lin.float().state_dict(), HERE / "legacy.bin", _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()

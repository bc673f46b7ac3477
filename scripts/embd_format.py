#!/usr/bin/env python3
"""Independent reference implementation of the EMBD `.weights` format.

Written from shared/seeds/weights-format.md and shared/specs/weights-format-notes.md
only (not from the Rust code), to cross-check the Rust reader and writer.
Standard library only.

    embd_format.py write OUT    write a small valid EMBD file (fixed seed) and print
                                a JSON description of its metadata, vocab and tensors
    embd_format.py check FILE   validate FILE against every rule of the notes;
                                exit 0 if valid, else print the problem and exit 1
"""

import json
import random
import struct
import sys
import zlib

MAGIC = b"EMBD"
END_MAGIC = b"DBME"
HEADER = 64
FOOTER = 16
DESC = 32
ALIGN = 64

F_VOCAB, F_ALIGNED, F_CHECKSUM, F_COMPRESSED = 1, 2, 4, 8

# code -> (name, size, struct format char)
DTYPES = {
    0: ("f32", 4, "f"),
    1: ("f16", 2, "e"),
    2: ("bf16", 2, None),
    3: ("i32", 4, "i"),
    4: ("i16", 2, "h"),
    5: ("i8", 1, "b"),
    6: ("u32", 4, "I"),
    7: ("u16", 2, "H"),
    8: ("u8", 1, "B"),
}
CODE_BY_NAME = {v[0]: k for k, v in DTYPES.items()}

REQUIRED = [
    "model_name", "model_version", "embedding_dim", "vocab_size", "num_layers",
    "num_attention_heads", "hidden_size", "intermediate_size", "max_position_emb",
    "created_at",
]


def crc32(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def fnv1a(b):
    h = 0x811C9DC5
    for x in b:
        h ^= x
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def pad_to(n, a=ALIGN):
    return (n + a - 1) // a * a


def encode_values(dtype, values):
    name, size, fmt = DTYPES[CODE_BY_NAME[dtype]]
    if name == "bf16":
        out = b""
        for v in values:
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            assert bits & 0xFFFF == 0, "value not exactly representable in bf16"
            out += struct.pack("<H", bits >> 16)
        return out
    return struct.pack("<%d%s" % (len(values), fmt), *values)


# ---------------------------------------------------------------- write

def sample_model(seed=1234):
    rng = random.Random(seed)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "caf\u00e9",
              "\u4e2d", "a"]
    specials = [0, 1, 2, 3, 4]
    metadata = {
        "model_name": "py-reference",
        "model_version": "0.1",
        "embedding_dim": "4",
        "vocab_size": str(len(tokens)),
        "num_layers": "1",
        "num_attention_heads": "2",
        "hidden_size": "4",
        "intermediate_size": "8",
        "max_position_emb": "32",
        "created_at": "2025-01-16T12:00:00Z",
        "pooling": "mean",
    }

    def floats(n):
        # Multiples of 1/8 in [-4, 4]: exact in f32, f16 and bf16.
        return [rng.randint(-32, 32) / 8.0 for _ in range(n)]

    def ints(n, lo, hi):
        return [rng.randint(lo, hi) for _ in range(n)]

    tensors = [
        ("embeddings.word_embeddings.weight", "f32", [10, 4], floats(40)),
        ("half.t", "f16", [3, 5], floats(15)),
        ("brain.t", "bf16", [2, 3, 2], floats(12)),
        ("ints.i32", "i32", [7], ints(7, -2**31, 2**31 - 1)),
        ("ints.i16", "i16", [2, 2, 2, 2], ints(16, -2**15, 2**15 - 1)),
        ("q.weight", "i8", [3, 3], ints(9, -128, 127)),
        ("q.weight_scale", "f32", [3], floats(3)),
        ("u.u32", "u32", [2, 2], ints(4, 0, 2**32 - 1)),
        ("u.u16", "u16", [5], ints(5, 0, 2**16 - 1)),
        ("u.u8", "u8", [1, 1, 3], ints(3, 0, 255)),
    ]
    return metadata, tokens, specials, tensors


def build_file(metadata, tokens, specials, tensors, checksums=True):
    # metadata section
    entries = b""
    for k in sorted(metadata):
        kb, vb = k.encode("utf-8"), metadata[k].encode("utf-8")
        entries += struct.pack("<HH", len(kb), len(vb)) + kb + vb
    meta = struct.pack("<II", len(metadata), len(entries)) + entries
    metadata_offset = HEADER
    vocab_offset = metadata_offset + len(meta)
    # vocab section
    tok = b""
    for t in tokens:
        tb = t.encode("utf-8")
        tok += struct.pack("<H", len(tb)) + tb
    special_abs = vocab_offset + 12 + len(tok)
    vocab = struct.pack("<III", len(tokens), len(tok), special_abs) + tok
    vocab += struct.pack("<5I", *specials)
    index_offset = vocab_offset + len(vocab)
    # data layout
    blobs = [encode_values(dt, vals) for (_, dt, _, vals) in tensors]
    rel = []
    pos = 0
    for b in blobs:
        pos = pad_to(pos)
        rel.append(pos)
        pos += len(b)
    data_size = pos
    index = b""
    names = b""
    for (name, dt, shape, _), off in zip(tensors, rel):
        nb = name.encode("utf-8")
        dims = list(shape) + [0] * (4 - len(shape))
        index += struct.pack("<IBBH4IQ", fnv1a(nb), CODE_BY_NAME[dt], len(shape), len(nb),
                             *dims, off)
        names += nb
    data_offset = pad_to(index_offset + len(index) + len(names))
    data = b""
    for b, off in zip(blobs, rel):
        data += b"\0" * (off - len(data)) + b
    assert len(data) == data_size
    total = data_offset + data_size + FOOTER
    flags = F_VOCAB | F_ALIGNED | (F_CHECKSUM if checksums else 0)
    head = MAGIC + struct.pack("<HHIIIIIIIIQQ", 1, 0, flags, metadata_offset, len(meta),
                               vocab_offset, len(vocab), index_offset, len(tensors),
                               data_offset, data_size, total)
    head += struct.pack("<II", crc32(head), 0)
    assert len(head) == HEADER
    body = head + meta + vocab + index + names
    body += b"\0" * (data_offset - len(body)) + data
    if checksums:
        footer = struct.pack("<II", crc32(data), crc32(body))
    else:
        footer = struct.pack("<II", 0, 0)
    footer += END_MAGIC + struct.pack("<I", 0)
    out = body + footer
    assert len(out) == total
    return out


def cmd_write(path):
    metadata, tokens, specials, tensors = sample_model()
    data = build_file(metadata, tokens, specials, tensors)
    with open(path, "wb") as f:
        f.write(data)
    desc = {
        "metadata": metadata,
        "tokens": tokens,
        "specials": specials,
        "tensors": [
            {"name": n, "dtype": dt, "shape": shape, "values": vals}
            for (n, dt, shape, vals) in tensors
        ],
    }
    print(json.dumps(desc, ensure_ascii=False))
    return 0


# ---------------------------------------------------------------- check

class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def utf8(b, what):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise Bad("%s: invalid UTF-8" % what)


def check_bytes(b):
    n = len(b)
    need(n >= HEADER, "file shorter than the 64-byte header")
    need(b[0:4] == MAGIC, "bad magic %r" % b[0:4])
    (major, minor, flags, mo, ms, vo, vs, io, ic, do, ds, total, hcrc,
     _res) = struct.unpack_from("<HHIIIIIIIIQQII", b, 4)
    need(major == 1, "unsupported major version %d" % major)
    need(hcrc == crc32(b[0:56]), "header checksum mismatch")
    need(not flags & F_COMPRESSED, "unsupported feature: COMPRESSED flag")
    need(flags & ~0xF == 0, "unsupported feature: reserved flag bits %#x" % (flags & ~0xF))
    need(total == n, "total_file_size %d != file length %d" % (total, n))
    need(n >= HEADER + FOOTER, "file too small for header and footer")
    footer = n - FOOTER
    dcrc, fcrc, end = struct.unpack_from("<II4s", b, footer)
    need(end == END_MAGIC, "bad end magic %r" % end)

    def inside(start, size, what):
        need(start >= HEADER and start + size <= footer,
             "%s [%d, %d) outside [%d, %d)" % (what, start, start + size, HEADER, footer))
        return (start, start + size, what)

    sections = [inside(mo, ms, "metadata section"), inside(do, ds, "tensor data section")]
    if flags & F_VOCAB:
        sections.append(inside(vo, vs, "vocab section"))

    # metadata
    count, tsize = struct.unpack_from("<II", b, mo)
    need(ms == 8 + tsize, "metadata_size %d != 8 + total_size %d" % (ms, tsize))
    p, end_m = mo + 8, mo + ms
    md = {}
    for i in range(count):
        need(p + 4 <= end_m, "metadata entry %d header beyond section" % i)
        kl, vl = struct.unpack_from("<HH", b, p)
        p += 4
        need(p + kl + vl <= end_m, "metadata entry %d beyond section" % i)
        k = utf8(b[p:p + kl], "metadata entry %d key" % i)
        v = utf8(b[p + kl:p + kl + vl], "metadata entry %d value" % i)
        p += kl + vl
        need(k not in md, "duplicate metadata key %r" % k)
        md[k] = v
    need(p == end_m, "metadata entries end at %d, section at %d" % (p, end_m))
    for k in REQUIRED:
        need(k in md, "required metadata key %r missing" % k)

    # vocab
    if flags & F_VOCAB:
        need(vs >= 12, "vocab section smaller than its header")
        tc, vt, sp = struct.unpack_from("<III", b, vo)
        tstart, tend, vend = vo + 12, vo + 12 + vt, vo + vs
        need(tend <= vend, "vocab token entries beyond section")
        need(sp >= tend and sp + 20 <= vend, "special_tokens block %d outside vocab section" % sp)
        ids = struct.unpack_from("<5I", b, sp)
        for nm, i in zip(["pad", "unk", "cls", "sep", "mask"], ids):
            need(i < tc, "special %s_id %d >= token_count %d" % (nm, i, tc))
        p = tstart
        for i in range(tc):
            need(p + 2 <= tend, "vocab token %d beyond token entries" % i)
            (tl,) = struct.unpack_from("<H", b, p)
            need(p + 2 + tl <= tend, "vocab token %d beyond token entries" % i)
            utf8(b[p + 2:p + 2 + tl], "vocab token %d" % i)
            p += 2 + tl
        need(p == tend, "vocab tokens end at %d, total_size says %d" % (p, tend))
        need(md["vocab_size"].strip() == str(tc),
             "metadata vocab_size %r != token_count %d" % (md["vocab_size"], tc))

    # tensors
    need(io >= HEADER and io + ic * DESC <= footer, "tensor index outside file body")
    descs = [struct.unpack_from("<IBBH4IQ", b, io + DESC * i) for i in range(ic)]
    names_start = io + ic * DESC
    names_end = names_start + sum(d[3] for d in descs)
    sections.append(inside(io, names_end - io, "tensor index + names"))
    sections.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(sections, sections[1:]):
        if a1 > a0 and b1 > b0:
            need(a1 <= b0, "%s overlaps %s" % (an, bn))
    p = names_start
    seen = {}
    for i, (h, dt, nd, nl, s0, s1, s2, s3, off) in enumerate(descs):
        nb = b[p:p + nl]
        p += nl
        name = utf8(nb, "tensor %d name" % i)
        need(nl > 0, "tensor %d has an empty name" % i)
        need(h == fnv1a(nb), "tensor %d (%s) name_hash mismatch" % (i, name))
        need(dt in DTYPES, "tensor %d (%s) dtype code %d invalid" % (i, name, dt))
        need(1 <= nd <= 4, "tensor %d (%s) ndim %d not in 1..4" % (i, name, nd))
        shape = [s0, s1, s2, s3]
        for k in range(4):
            if k < nd:
                need(shape[k] > 0, "tensor %d (%s) shape[%d] is 0" % (i, name, k))
            else:
                need(shape[k] == 0, "tensor %d (%s) shape[%d] nonzero beyond ndim" % (i, name, k))
        size = DTYPES[dt][1]
        for k in range(nd):
            size *= shape[k]
        need(off + size <= ds, "tensor %d (%s) data [%d, %d) beyond data section size %d"
             % (i, name, off, off + size, ds))
        if flags & F_ALIGNED:
            need((do + off) % ALIGN == 0, "tensor %d (%s) not 64-byte aligned" % (i, name))
        need(name not in seen, "duplicate tensor name %r" % name)
        seen[name] = i

    if flags & F_CHECKSUM:
        need(dcrc == crc32(b[do:do + ds]), "data checksum mismatch")
        need(fcrc == crc32(b[:footer]), "file checksum mismatch")
    return "ok: %d metadata entries, %d tensors" % (len(md), ic)


def cmd_check(path):
    with open(path, "rb") as f:
        b = f.read()
    try:
        print(check_bytes(b))
        return 0
    except (Bad, struct.error) as e:
        print("invalid: %s" % e)
        return 1


def main(argv):
    if len(argv) == 3 and argv[1] == "write":
        return cmd_write(argv[2])
    if len(argv) == 3 and argv[1] == "check":
        return cmd_check(argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Makes what c_tests/test_families.c reads, from tests/data/families.tsv.

Usage: families_expected.py TABLE SHARED EMBD OUT

For every row of TABLE (tests/data/families.tsv): converts SHARED/reference/<folder>
with EMBD (`embd convert`) into OUT/<name>.weights, and writes the expected values of
<folder>_reference.jsonl (the sentence-transformers ids and embeddings) into
OUT/<name>.expected and those of its tokenizer case file (ids without truncation, no
embedding) into OUT/<name>.cases.expected; the same for every row of static.tsv beside
TABLE (static models, converted with `--static-behaviour <behaviour>`, their expected
values from <reference>); then OUT/families.list, one line per check:
"<name> <expected file's stem>".

An expected file holds one record per line in a form C reads with fscanf: the text's
UTF-8 byte count and its bytes in hex ("-" when empty), the id count and the ids, the
dimension (0 without an embedding) and the embedding (9 significant digits, as in the
reference file).
"""
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional


def read_table(path: Path) -> List[Dict[str, Optional[str]]]:
    rows = [
        line.split("\t")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header = rows[0]
    out = []
    for r in rows[1:]:
        if len(r) != len(header):
            sys.exit(f"{path}: {len(r)} columns, wanted {len(header)}: {r}")
        out.append({h: (None if x == "-" else x) for h, x in zip(header, r)})
    return out


def write_expected(src: Path, lines: int, out: Path) -> None:
    with src.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) != lines:
        sys.exit(f"{src}: {len(rows)} lines, the table says {lines}")
    with out.open("w", encoding="ascii") as f:
        for r in rows:
            b = r["text"].encode("utf-8")
            ids = r["input_ids"]
            emb = r.get("embedding", [])
            f.write(f"{len(b)} {b.hex() or '-'} {len(ids)} {' '.join(map(str, ids))} ")
            f.write(f"{len(emb)} {' '.join(repr(float(x)) for x in emb)}\n")


def main() -> None:
    table, shared, embd, out = (Path(a) for a in sys.argv[1:5])
    ref = shared / "reference"
    out.mkdir(parents=True, exist_ok=True)
    checks = []
    for row in read_table(table):
        name, folder = str(row["name"]), str(row["folder"])
        subprocess.run(
            [str(embd), "convert", str(ref / folder), "-o", str(out / f"{name}.weights")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        write_expected(ref / f"{folder}_reference.jsonl", int(str(row["lines"])), out / f"{name}.expected")
        checks.append(f"{name} {name}")
        if row["cases"]:
            write_expected(ref / row["cases"], int(str(row["case_lines"])), out / f"{name}.cases.expected")
            checks.append(f"{name} {name}.cases")
    for row in read_table(table.with_name("static.tsv")):
        name = str(row["name"])
        subprocess.run(
            [str(embd), "convert", str(ref / str(row["folder"])), "-o", str(out / f"{name}.weights")]
            + ["--static-behaviour", str(row["behaviour"])],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        write_expected(ref / str(row["reference"]), int(str(row["lines"])), out / f"{name}.expected")
        checks.append(f"{name} {name}")
    (out / "families.list").write_text("".join(c + "\n" for c in checks), encoding="ascii")


if __name__ == "__main__":
    main()

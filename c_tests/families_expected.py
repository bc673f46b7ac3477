#!/usr/bin/env python3
"""Writes the expected values of c_tests/test_families.c from a reference JSONL.

Usage: families_expected.py REFERENCE.jsonl N|all OUT

The first N (or all) lines of shared/reference/families/<name>_reference.jsonl
(the sentence-transformers ids and embeddings) or of a tokenizer case file
(<kind>_cases.jsonl: ids without truncation, no embedding), one record per line
in a form C reads with fscanf: the text's UTF-8 byte count and its bytes in hex
("-" when empty), the id count and the ids, the dimension (0 without an
embedding) and the embedding (9 significant digits, as in the reference file).
"""
import json
import sys


def main() -> None:
    src, count, out = sys.argv[1], sys.argv[2], sys.argv[3]
    n = -1 if count == "all" else int(count)
    rows = []
    with open(src, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
            if len(rows) == n:
                break
    if n >= 0 and len(rows) != n:
        sys.exit(f"{src}: {len(rows)} lines, wanted {n}")
    with open(out, "w", encoding="ascii") as f:
        for r in rows:
            b = r["text"].encode("utf-8")
            ids = r["input_ids"]
            emb = r.get("embedding", [])
            f.write(f"{len(b)} {b.hex() or '-'} {len(ids)} {' '.join(map(str, ids))} ")
            f.write(f"{len(emb)} {' '.join(repr(float(x)) for x in emb)}\n")


if __name__ == "__main__":
    main()

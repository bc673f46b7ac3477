#!/usr/bin/env bash
# Whether two `embd` binaries give the same bits: every precision, one thread,
# on all-MiniLM-L6-v2 and all-mpnet-base-v2 (the two reference files' texts and
# the first 400 corpus texts) and the three tiny reference families (their 353
# texts). Used to show that a refactoring changes no output:
#   scripts/bit_identity.sh OLD_EMBD NEW_EMBD [WORKDIR]
# Needs models/ (scripts/fetch_model.sh, scripts/fetch_mpnet.sh) and shared/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1 new=$2 work=${3:-$(mktemp -d)}
shared="${EMBD_SHARED_DIR:-$root/../shared}"
mkdir -p "$work"
python3 - "$shared" "$work" <<'PY'
import json, sys
shared, work = sys.argv[1], sys.argv[2]
def texts(p):
    return [json.loads(l)["text"] for l in open(p, encoding="utf-8") if l.strip()]
with open(f"{work}/ref.jsonl", "w", encoding="utf-8") as out:
    for p in ("minilm_reference.jsonl", "mpnet_reference.jsonl"):
        for t in texts(f"{shared}/reference/{p}"):
            out.write(json.dumps({"text": t}) + "\n")
    with open(f"{shared}/bench/corpus.txt", encoding="utf-8") as c:
        for i, line in enumerate(c):
            if i == 400:
                break
            out.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
with open(f"{work}/fam.jsonl", "w", encoding="utf-8") as out:
    for t in texts(f"{shared}/reference/families/xlmr-tiny_reference.jsonl"):
        out.write(json.dumps({"text": t}) + "\n")
PY
run() { # bin out model input precision
  "$1" encode -m "$3" --threads 1 --precision "$5" --jsonl --input "$4" > "$2"
}
same=0 differ=0
for m in all-MiniLM-L6-v2 all-mpnet-base-v2 xlmr-tiny bert-unigram-tiny roberta-bpe-tiny; do
  case $m in
    all-*) model="$root/models/$m.weights"; input="$work/ref.jsonl" ;;
    *) model="$work/$m.weights"; input="$work/fam.jsonl"
       [ -f "$model" ] || "$old" convert "$shared/reference/families/$m" -o "$model" >/dev/null ;;
  esac
  for p in f32 bf16 int8; do
    run "$old" "$work/old.jsonl" "$model" "$input" "$p"
    run "$new" "$work/new.jsonl" "$model" "$input" "$p"
    if cmp -s "$work/old.jsonl" "$work/new.jsonl"; then
      same=$((same + 1)); echo "same bits: $m $p ($(wc -l < "$work/new.jsonl") texts)"
    else
      differ=$((differ + 1)); echo "DIFFERENT: $m $p"
    fi
  done
done
echo "$same same, $differ different"
[ "$differ" = 0 ]

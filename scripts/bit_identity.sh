#!/usr/bin/env bash
# Whether two `embd` binaries give the same bits, on every output kind the CLI
# prints, for every model family of the reference data and every precision
# (f32, bf16, int8), one thread. Used to show that a refactoring changes no
# output:
#   scripts/bit_identity.sh OLD_EMBD NEW_EMBD [WORKDIR]
#
# Models: all-MiniLM-L6-v2 and all-mpnet-base-v2 (models/, from
# scripts/fetch_model.sh and scripts/fetch_mpnet.sh: the two reference files'
# texts and the first 400 corpus texts), minilm-reranker (models/, from
# scripts/fetch_reranker.sh, when present) and every model folder of
# shared/reference/{families,architectures,encoders} (converted by OLD_EMBD;
# a folder it cannot convert is listed as skipped), each on its own reference
# texts.
#
# Per model and precision, the outputs compared (standard output and exit
# status; standard error too when the status is not 0):
# - embedders: the default `encode` (dense, or the model's outputs when it has
#   no dense one), Matryoshka `--dimensions`, a prompt, `--format npy`,
#   `--token-vectors`, `--output-precision` binary, ubinary, int8 and uint8
#   (the last two over ranges made from the f32 vectors), long-text windows
#   (`--window-overlap`), and for a model with sparse or multi-vector outputs
#   `--emit` of all of them, `--task query|document` and `--top-k`;
# - cross-encoders: `rerank --jsonl` (scores and logits of the reference
#   pairs) and `rerank --query` (a ranking, by score and `--raw` by logit).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1 new=$2 work=${3:-$(mktemp -d)}
shared="${EMBD_SHARED_DIR:-$root/../shared}"
ref="$shared/reference"
mkdir -p "$work"
# ref.jsonl: the MiniLM/MPNet texts; <model>.jsonl: a folder's reference texts
# (the first 120, and every pair of a cross-encoder's reference as
# <model>.pairs.jsonl with <model>.docs.jsonl and <model>.query for a ranking).
python3 - "$ref" "$shared" "$work" <<'PY'
import glob, json, os, sys
ref, shared, work = sys.argv[1], sys.argv[2], sys.argv[3]
def rows(p):
    return [json.loads(l) for l in open(p, encoding="utf-8") if l.strip()]
with open(f"{work}/ref.jsonl", "w", encoding="utf-8") as out:
    for p in ("minilm_reference.jsonl", "mpnet_reference.jsonl"):
        for r in rows(f"{ref}/{p}"):
            out.write(json.dumps({"text": r["text"]}) + "\n")
    with open(f"{shared}/bench/corpus.txt", encoding="utf-8") as c:
        for i, line in enumerate(c):
            if i == 400:
                break
            out.write(json.dumps({"text": line.rstrip("\n")}) + "\n")
with open(f"{work}/ref-small.jsonl", "w", encoding="utf-8") as out:
    for r in rows(f"{ref}/minilm_reference.jsonl")[:60]:
        out.write(json.dumps({"text": r["text"]}) + "\n")
for p in glob.glob(f"{ref}/*/*_reference.jsonl"):
    name = os.path.basename(p)[: -len("_reference.jsonl")]
    rs = rows(p)
    if "query" in rs[0]:
        with open(f"{work}/{name}.pairs.jsonl", "w", encoding="utf-8") as out:
            for r in rs:
                out.write(json.dumps({"query": r["query"], "passage": r["passage"]}) + "\n")
        with open(f"{work}/{name}.query", "w", encoding="utf-8") as out:
            out.write(rs[0]["query"])
        with open(f"{work}/{name}.docs.jsonl", "w", encoding="utf-8") as out:
            for r in rs[:40]:
                out.write(json.dumps({"text": r["passage"]}) + "\n")
    else:
        with open(f"{work}/{name}.jsonl", "w", encoding="utf-8") as out:
            for r in rs[:120]:
                out.write(json.dumps({"text": r["text"]}) + "\n")
# The minilm-reranker's pairs also serve models/minilm-reranker.weights.
PY

same=0 differ=0
skipped=()
# check LABEL ARGS...: runs both binaries with ARGS (no model-independent
# state), compares standard output and exit status.
check() {
  local label=$1 so se sn en
  shift
  so=0 sn=0
  "$old" "$@" >"$work/old.out" 2>"$work/old.err" || so=$?
  "$new" "$@" >"$work/new.out" 2>"$work/new.err" || sn=$?
  if [ "$so" = "$sn" ] && cmp -s "$work/old.out" "$work/new.out" \
    && { [ "$so" = 0 ] || cmp -s "$work/old.err" "$work/new.err"; }; then
    same=$((same + 1))
    if [ "$so" = 0 ]; then
      echo "same bits: $label ($(wc -l <"$work/new.out") lines)"
    else
      echo "same bits: $label (both refuse: $(head -c 100 "$work/new.err" | tr '\n' ' '))"
    fi
  else
    differ=$((differ + 1))
    echo "DIFFERENT: $label (status $so / $sn)"
  fi
}

# ranges MODEL PRECISION: int8/uint8 ranges from the old binary's f32 vectors.
ranges() {
  "$old" encode -m "$1" --threads 1 --precision "$2" --jsonl --input "$3" \
    | python3 -c '
import json, sys
v = [json.loads(l)["embedding"] for l in sys.stdin]
print(json.dumps([[min(c) for c in zip(*v)], [max(c) for c in zip(*v)]]))' >"$4"
}

embedder() { # name model input
  local m=$1 model=$2 input=$3 md outputs dim prompts
  md=$("$old" inspect --json "$model" | python3 -c '
import json, sys
m = json.load(sys.stdin)["metadata"]
print(m.get("architecture", "bert"), m.get("outputs", "dense").replace(" ", ","),
      m.get("embedding_dim", m.get("hidden_size", "0")),
      "prompts" if m.get("prompts") else "-")')
  read -r arch outputs dim prompts <<<"$md"
  for p in f32 bf16 int8; do
    local c=(encode -m "$model" --threads 1 --precision "$p" --jsonl --input "$input")
    check "$m $p encode" "${c[@]}"
    [ "$arch" = static ] && [ "$p" != f32 ] && continue
    case ",$outputs," in
      *,dense,*)
        check "$m $p dimensions" "${c[@]}" --dimensions $((dim / 2))
        check "$m $p npy" "${c[@]}" --format npy
        check "$m $p binary" "${c[@]}" --output-precision binary
        check "$m $p ubinary" "${c[@]}" --output-precision ubinary
        ranges "$model" "$p" "$input" "$work/ranges.json"
        check "$m $p int8 output" "${c[@]}" --output-precision int8 --output-ranges "$work/ranges.json"
        check "$m $p uint8 output" "${c[@]}" --output-precision uint8 --output-ranges "$work/ranges.json"
        ;;
    esac
    [ "$arch" = static ] && continue
    check "$m $p prompt" "${c[@]}" --prompt "query: "
    [ "$prompts" = prompts ] && check "$m $p prompt name" "${c[@]}" --prompt-name query
    check "$m $p token vectors" "${c[@]}" --token-vectors
    check "$m $p windows" "${c[@]}" --max-seq-length 24 --window-overlap 6
    if [ "$outputs" != dense ]; then
      check "$m $p emit $outputs" "${c[@]}" --emit "$outputs"
      check "$m $p task query" "${c[@]}" --emit "$outputs" --task query
      check "$m $p task document" "${c[@]}" --emit "$outputs" --task document
      check "$m $p top-k" "${c[@]}" --emit "$outputs" --top-k 5
      check "$m $p emit windows" "${c[@]}" --emit "$outputs" --max-seq-length 24 --window-overlap 6
    fi
  done
}

reranker() { # name model pairs-name
  local m=$1 model=$2 r=$3
  for p in f32 bf16 int8; do
    local c=(rerank -m "$model" --threads 1 --precision "$p")
    check "$m $p rerank pairs" "${c[@]}" --jsonl --input "$work/$r.pairs.jsonl"
    check "$m $p rerank rank" "${c[@]}" --jsonl --query "$(cat "$work/$r.query")" --input "$work/$r.docs.jsonl"
    check "$m $p rerank raw" "${c[@]}" --jsonl --query "$(cat "$work/$r.query")" --input "$work/$r.docs.jsonl" --raw --top-k 5
  done
}

for m in all-MiniLM-L6-v2 all-mpnet-base-v2; do
  model="$root/models/$m.weights"
  for p in f32 bf16 int8; do
    check "$m $p encode (reference texts)" encode -m "$model" --threads 1 --precision "$p" --jsonl --input "$work/ref.jsonl"
  done
  embedder "$m" "$model" "$work/ref-small.jsonl"
done
if [ -f "$root/models/minilm-reranker.weights" ]; then
  reranker minilm-reranker "$root/models/minilm-reranker.weights" minilm-reranker
else
  skipped+=("minilm-reranker (run scripts/fetch_reranker.sh)")
fi

for dir in "$ref"/families/*/ "$ref"/architectures/*/ "$ref"/encoders/*/; do
  m=$(basename "$dir")
  case $m in tokenizer-* | minilm-reranker) continue ;; esac
  model="$work/$m.weights"
  if [ ! -f "$model" ] && ! "$old" convert "$dir" -o "$model" >/dev/null 2>"$work/convert.err"; then
    skipped+=("$m (the old binary does not convert it: $(head -c 80 "$work/convert.err"))")
    rm -f "$model"
    continue
  fi
  if [ -f "$work/$m.pairs.jsonl" ]; then
    reranker "$m" "$model" "$m"
  elif [ -f "$work/$m.jsonl" ]; then
    embedder "$m" "$model" "$work/$m.jsonl"
  else
    embedder "$m" "$model" "$work/xlmr-tiny.jsonl"
  fi
done

for s in "${skipped[@]}"; do echo "skipped: $s"; done
echo "$same same, $differ different, ${#skipped[@]} models skipped"
[ "$differ" = 0 ]

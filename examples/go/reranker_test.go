package embedder_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// familiesFile: $EMBD_SHARED_DIR/reference/{families,architectures,encoders}/name,
// else a parent's shared/reference/.../name.
func familiesFile(t *testing.T, name string) string {
	t.Helper()
	for _, dir := range []string{"families", "architectures", "encoders"} {
		rel := filepath.Join("reference", dir, name)
		if d := os.Getenv("EMBD_SHARED_DIR"); d != "" && fileExists(filepath.Join(d, rel)) {
			return filepath.Join(d, rel)
		}
		if p := findUp(filepath.Join("shared", rel)); p != "" {
			return p
		}
	}
	missing(t, "%s not found: set EMBD_SHARED_DIR", name)
	return ""
}

// openReranker: $EMBD_RERANK_MODEL, else models/minilm-reranker.weights in a
// parent directory (scripts/fetch_reranker.sh), with the reference's max_length.
func openReranker(t *testing.T, opts ...embedder.RerankerOption) *embedder.Reranker {
	t.Helper()
	p := os.Getenv("EMBD_RERANK_MODEL")
	if p == "" {
		p = findUp(filepath.Join("models", "minilm-reranker.weights"))
	}
	if p == "" {
		missing(t, "reranker not found: run scripts/fetch_reranker.sh or set EMBD_RERANK_MODEL")
	}
	r, err := embedder.OpenReranker(p, append([]embedder.RerankerOption{embedder.RerankWithMaxLength(256)}, opts...)...)
	if err != nil {
		t.Fatalf("OpenReranker: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// openXlmrReranker: $EMBD_XLMR_RERANK_MODEL, else models/xlmr-reranker-tiny.weights
// in a parent directory (scripts/fetch_reranker.sh converts it), at the model's
// own maximum length (128, as its reference).
func openXlmrReranker(t *testing.T) *embedder.Reranker {
	t.Helper()
	return openTinyReranker(t, "EMBD_XLMR_RERANK_MODEL", "xlmr-reranker-tiny", 128)
}

// openModernBertReranker: $EMBD_MODERNBERT_RERANK_MODEL, else
// models/modernbert-reranker-tiny.weights (scripts/fetch_reranker.sh converts
// it): ModernBERT with classifier_pooling mean, at its own maximum length.
func openModernBertReranker(t *testing.T) *embedder.Reranker {
	t.Helper()
	return openTinyReranker(t, "EMBD_MODERNBERT_RERANK_MODEL", "modernbert-reranker-tiny", 0)
}

// openTinyReranker opens $env, else models/<name>.weights in a parent
// directory, at the model's own maximum length (wantMax, unless 0).
func openTinyReranker(t *testing.T, env, name string, wantMax int) *embedder.Reranker {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = findUp(filepath.Join("models", name+".weights"))
	}
	if p == "" {
		missing(t, name+".weights not found: run scripts/fetch_reranker.sh or set "+env)
	}
	r, err := embedder.OpenReranker(p)
	if err != nil {
		t.Fatalf("OpenReranker: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if wantMax != 0 && r.MaxLength() != wantMax {
		t.Errorf("%s: max length %d, want %d", name, r.MaxLength(), wantMax)
	}
	return r
}

func TestModernBertRerankerReferenceEveryLine(t *testing.T) {
	checkReference(t, openModernBertReranker(t), "modernbert-reranker-tiny", 213)
}

func TestModernBertRerankerRankFile(t *testing.T) {
	checkRank(t, openModernBertReranker(t), "modernbert-reranker-tiny")
}

// openDebertaReranker: $EMBD_DEBERTA_RERANK_MODEL, else
// models/deberta-reranker-tiny.weights (scripts/fetch_reranker.sh converts it):
// DeBERTa-v2 with disentangled attention and a SentencePiece vocabulary.
func openDebertaReranker(t *testing.T) *embedder.Reranker {
	t.Helper()
	return openTinyReranker(t, "EMBD_DEBERTA_RERANK_MODEL", "deberta-reranker-tiny", 512)
}

// DeBERTa-v2 has no token type table: the reference's passage types (1) are
// not model inputs, and Tokenize gives the 0s the model reads.
func TestDebertaRerankerReferenceEveryLine(t *testing.T) {
	checkReference(t, openDebertaReranker(t), "deberta-reranker-tiny", 213, withoutTypes)
}

func TestDebertaRerankerRankFile(t *testing.T) {
	checkRank(t, openDebertaReranker(t), "deberta-reranker-tiny")
}

// openQwen3Reranker: $EMBD_QWEN3_RERANK_MODEL, else
// models/qwen3-reranker-tiny.weights (scripts/fetch_reranker.sh converts it):
// an LLM reranker scored on two tokens under an instruction.
func openQwen3Reranker(t *testing.T) *embedder.Reranker {
	t.Helper()
	return openTinyReranker(t, "EMBD_QWEN3_RERANK_MODEL", "qwen3-reranker-tiny", 0)
}

// TestQwen3RerankerPrompts: every line of the Qwen3-Reranker reference, the
// last 30 under their instruction (ScorePrompted), scores within 1e-5 and
// logits within 1e-4; the ids of the lines without one; RankPrompted orders
// as the scores; the rank file; a prompt refused by a classic cross-encoder.
func TestQwen3RerankerPrompts(t *testing.T) {
	r := openQwen3Reranker(t)
	f, err := os.Open(familiesFile(t, "qwen3-reranker-tiny_reference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type line struct {
		pairLine
		Prompt *string `json:"prompt"`
	}
	groups := map[string][]line{}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		key := ""
		if l.Prompt != nil {
			key = *l.Prompt
		}
		groups[key] = append(groups[key], l)
		n++
	}
	if n != 243 || len(groups[""]) != 213 {
		t.Fatalf("%d lines, %d without a prompt; want 243, 213", n, len(groups[""]))
	}
	for prompt, lines := range groups {
		pairs := make([]embedder.Pair, len(lines))
		for i, l := range lines {
			pairs[i] = embedder.Pair{Query: l.Query, Passage: l.Passage}
			if prompt == "" {
				ids, _, err := r.Tokenize(l.Query, l.Passage)
				if err != nil {
					t.Fatal(err)
				}
				if !equalU32(ids, l.InputIDs) {
					t.Errorf("line %d: ids differ", i+1)
				}
			}
		}
		var scores, logits []float32
		var err error
		if prompt == "" {
			scores, logits, _, err = r.Score(pairs)
		} else {
			scores, logits, _, err = r.ScorePrompted(pairs, prompt)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			if math.Abs(float64(scores[i])-l.Score) > 1e-5 || math.Abs(float64(logits[i])-l.Logit) > 1e-4 {
				t.Errorf("prompt %q line %d: score %v logit %v, want %v %v", prompt, i+1, scores[i], logits[i], l.Score, l.Logit)
			}
		}
		if prompt != "" {
			docs := make([]string, len(lines))
			for i, l := range lines {
				docs[i] = l.Passage
			}
			ranked, err := r.RankPrompted(lines[0].Query, docs, len(docs), false, prompt)
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k < len(ranked); k++ {
				if ranked[k].Score > ranked[k-1].Score {
					t.Errorf("rank %d out of order", k)
				}
			}
		}
	}
	checkRank(t, r, "qwen3-reranker-tiny")
	mb := openModernBertReranker(t)
	if _, _, _, err := mb.ScorePrompted([]embedder.Pair{{Query: "q", Passage: "p"}}, "x"); err == nil ||
		!strings.Contains(err.Error(), "takes no prompt") {
		t.Errorf("a classic cross-encoder took a prompt: %v", err)
	}
	if _, err := r.RankPrompted("q", []string{"p"}, 1, false, "a\x00b"); err == nil {
		t.Error("a prompt with NUL was accepted")
	}
}

type pairLine struct {
	Query    string   `json:"query"`
	Passage  string   `json:"passage"`
	InputIDs []uint32 `json:"input_ids"`
	Types    []uint32 `json:"token_type_ids"`
	Logit    float64  `json:"logit"`
	Score    float64  `json:"score"`
}

func TestRerankerReferenceEveryLine(t *testing.T) {
	checkReference(t, openReranker(t), "minilm-reranker", 151)
}

func TestXlmrRerankerReferenceEveryLine(t *testing.T) {
	checkReference(t, openXlmrReranker(t), "xlmr-reranker-tiny", 260)
}

// refOption changes what checkReference compares.
type refOption int

// withoutTypes: the model has no token type table, so the reference's type ids
// are not compared.
const withoutTypes refOption = 1

// checkReference: every line of name_reference.jsonl (wantLines of them): ids and
// token types identical (all 0 where the file has none; not compared with
// withoutTypes), score within 1e-5, logit within 1e-4, token counts.
func checkReference(t *testing.T, r *embedder.Reranker, name string, wantLines int, opts ...refOption) {
	t.Helper()
	f, err := os.Open(familiesFile(t, name+"_reference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []pairLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l pairLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Types == nil {
			l.Types = make([]uint32, len(l.InputIDs))
		}
		lines = append(lines, l)
	}
	if len(lines) != wantLines {
		t.Fatalf("%d reference lines, want %d", len(lines), wantLines)
	}
	skipTypes := len(opts) > 0 && opts[0] == withoutTypes
	pairs := make([]embedder.Pair, len(lines))
	for i, l := range lines {
		pairs[i] = embedder.Pair{Query: l.Query, Passage: l.Passage}
		ids, types, err := r.Tokenize(l.Query, l.Passage)
		if err != nil {
			t.Fatal(err)
		}
		if !equalU32(ids, l.InputIDs) || (!skipTypes && !equalU32(types, l.Types)) {
			t.Errorf("%s line %d: ids or types differ", name, i+1)
		}
	}
	scores, logits, info, err := r.Score(pairs)
	if err != nil {
		t.Fatal(err)
	}
	worstS, worstL := 0.0, 0.0
	for i, l := range lines {
		worstS = math.Max(worstS, math.Abs(float64(scores[i])-l.Score))
		worstL = math.Max(worstL, math.Abs(float64(logits[i])-l.Logit))
		if info[i].Tokens != len(l.InputIDs) {
			t.Errorf("%s line %d: %d tokens, want %d", name, i+1, info[i].Tokens, len(l.InputIDs))
		}
	}
	t.Logf("%s: max |score diff| %.3g, max |logit diff| %.3g", name, worstS, worstL)
	if worstS > 1e-5 || worstL > 1e-4 {
		t.Errorf("%s: score diff %g (limit 1e-5), logit diff %g (limit 1e-4)", name, worstS, worstL)
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type rankFile struct {
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	Ranking   []struct {
		CorpusID int     `json:"corpus_id"`
		Score    float64 `json:"score"`
	} `json:"ranking"`
}

// checkRank: Rank gives name_rank.json's order and scores (1e-5).
func checkRank(t *testing.T, r *embedder.Reranker, name string) rankFile {
	t.Helper()
	data, err := os.ReadFile(familiesFile(t, name+"_rank.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rf rankFile
	if err := json.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	got, err := r.Rank(rf.Query, rf.Documents, len(rf.Documents), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rf.Ranking) {
		t.Fatalf("%d ranked, want %d", len(got), len(rf.Ranking))
	}
	// A document whose text another one repeats may take that one's place:
	// identical pairs score identically here (ties by index), while the
	// reference's batched, padded run breaks them by rounding noise.
	for i, w := range rf.Ranking {
		same := got[i].Index == w.CorpusID || rf.Documents[got[i].Index] == rf.Documents[w.CorpusID]
		if !same || math.Abs(float64(got[i].Score)-w.Score) > 1e-5 {
			t.Errorf("%s rank %d: %d (%g), want %d (%g)", name, i, got[i].Index, got[i].Score, w.CorpusID, w.Score)
		}
	}
	return rf
}

func TestXlmrRerankerRankFile(t *testing.T) {
	checkRank(t, openXlmrReranker(t), "xlmr-reranker-tiny")
}

func TestRerankerRankFile(t *testing.T) {
	r := openReranker(t)
	rf := checkRank(t, r, "minilm-reranker")
	// Misuse gets a status, never a crash.
	for _, c := range []struct {
		q    string
		docs []string
		k    int
	}{{"", rf.Documents, 1}, {rf.Query, nil, 1}, {rf.Query, rf.Documents, 0}, {rf.Query, rf.Documents, len(rf.Documents) + 1}} {
		if _, err := r.Rank(c.q, c.docs, c.k, false); !errors.Is(err, embedder.StatusInvalidArgument) {
			t.Errorf("Rank(%q, %d docs, %d): %v, want StatusInvalidArgument", c.q, len(c.docs), c.k, err)
		}
	}
	if _, err := embedder.OpenReranker(modelPath(t)); !errors.Is(err, embedder.StatusModel) {
		t.Errorf("an embedding model opened as a reranker: %v, want StatusModel", err)
	}
}

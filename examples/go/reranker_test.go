package embedder_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// familiesFile: $EMBD_SHARED_DIR/reference/families/name, else a parent's
// shared/reference/families/name.
func familiesFile(t *testing.T, name string) string {
	t.Helper()
	rel := filepath.Join("reference", "families", name)
	if d := os.Getenv("EMBD_SHARED_DIR"); d != "" && fileExists(filepath.Join(d, rel)) {
		return filepath.Join(d, rel)
	}
	if p := findUp(filepath.Join("shared", rel)); p != "" {
		return p
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

type pairLine struct {
	Query    string   `json:"query"`
	Passage  string   `json:"passage"`
	InputIDs []uint32 `json:"input_ids"`
	Types    []uint32 `json:"token_type_ids"`
	Logit    float64  `json:"logit"`
	Score    float64  `json:"score"`
}

func TestRerankerReferenceEveryLine(t *testing.T) {
	r := openReranker(t)
	f, err := os.Open(familiesFile(t, "minilm-reranker_reference.jsonl"))
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
		lines = append(lines, l)
	}
	if len(lines) != 151 {
		t.Fatalf("%d reference lines, want 151", len(lines))
	}
	pairs := make([]embedder.Pair, len(lines))
	for i, l := range lines {
		pairs[i] = embedder.Pair{Query: l.Query, Passage: l.Passage}
		ids, types, err := r.Tokenize(l.Query, l.Passage)
		if err != nil {
			t.Fatal(err)
		}
		if !equalU32(ids, l.InputIDs) || !equalU32(types, l.Types) {
			t.Errorf("line %d: ids or types differ", i+1)
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
			t.Errorf("line %d: %d tokens, want %d", i+1, info[i].Tokens, len(l.InputIDs))
		}
	}
	t.Logf("max |score diff| %.3g, max |logit diff| %.3g", worstS, worstL)
	if worstS > 1e-5 || worstL > 1e-4 {
		t.Errorf("score diff %g (limit 1e-5), logit diff %g (limit 1e-4)", worstS, worstL)
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

func TestRerankerRankFile(t *testing.T) {
	r := openReranker(t)
	data, err := os.ReadFile(familiesFile(t, "minilm-reranker_rank.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		Ranking   []struct {
			CorpusID int     `json:"corpus_id"`
			Score    float64 `json:"score"`
		} `json:"ranking"`
	}
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
	for i, w := range rf.Ranking {
		if got[i].Index != w.CorpusID || math.Abs(float64(got[i].Score)-w.Score) > 1e-5 {
			t.Errorf("rank %d: %d (%g), want %d (%g)", i, got[i].Index, got[i].Score, w.CorpusID, w.Score)
		}
	}
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

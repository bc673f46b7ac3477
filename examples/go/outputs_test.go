package embedder_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// The sparse and multi-vector outputs against the reference folders of
// shared/reference/architectures (Hugging Face folders open directly):
// splade-tiny, splade-inference-free-tiny, colbert-tiny and bgem3-tiny, with
// the numbers of sentence-transformers / PyLate / FlagEmbedding in their
// <name>_reference.jsonl.

// openArchitecture opens the reference folder name ($EMBD_SHARED_DIR/reference/architectures/name).
func openArchitecture(t *testing.T, name string) *embedder.Model {
	t.Helper()
	m, err := embedder.Open(familiesFile(t, name), embedder.WithThreads(2))
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// outputLine is one line of an output reference file (the fields a test uses).
type outputLine struct {
	Text           string             `json:"text"`
	Sparse         *sparseJSON        `json:"sparse"`
	QuerySparse    *sparseJSON        `json:"query_sparse"`
	DocumentSparse *sparseJSON        `json:"document_sparse"`
	QueryVectors   [][]float32        `json:"query_vectors"`
	DocVectors     [][]float32        `json:"document_vectors"`
	LexicalWeights map[string]float32 `json:"lexical_weights"`
	ColbertVecs    [][]float32        `json:"colbert_vecs"`
}

type sparseJSON struct {
	Indices []uint32  `json:"indices"`
	Values  []float32 `json:"values"`
}

func (s *sparseJSON) vector() embedder.SparseVector {
	return embedder.SparseVector{Indices: s.Indices, Values: s.Values}
}

// lexical turns BGE-M3's lexical_weights (id string -> weight) into a sparse
// vector, ids ascending.
func lexical(t *testing.T, lw map[string]float32) embedder.SparseVector {
	t.Helper()
	var v embedder.SparseVector
	for k := range lw {
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil {
			t.Fatalf("lexical_weights key %q: %v", k, err)
		}
		v.Indices = append(v.Indices, uint32(id))
	}
	sort.Slice(v.Indices, func(i, j int) bool { return v.Indices[i] < v.Indices[j] })
	for _, id := range v.Indices {
		v.Values = append(v.Values, lw[strconv.FormatUint(uint64(id), 10)])
	}
	return v
}

// outputReference reads the first n lines (n <= 0: all) of
// architectures/<name>_reference.jsonl.
func outputReference(t *testing.T, name string, n int) []outputLine {
	t.Helper()
	f, err := os.Open(familiesFile(t, name+"_reference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []outputLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() && (n <= 0 || len(lines) < n) {
		var l outputLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s line %d: %v", name, len(lines)+1, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n > 0 && len(lines) != n {
		t.Fatalf("%s: %d lines, want %d", name, len(lines), n)
	}
	return lines
}

func textsOf(lines []outputLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

// checkSparse: the same ids, each weight within 1e-5 of the reference's
// largest weight.
func checkSparse(t *testing.T, what string, got, want embedder.SparseVector) {
	t.Helper()
	if fmt.Sprint(got.Indices) != fmt.Sprint(want.Indices) {
		t.Errorf("%s: ids %v, want %v", what, got.Indices, want.Indices)
		return
	}
	if len(got.Values) != len(got.Indices) {
		t.Errorf("%s: %d values for %d ids", what, len(got.Values), len(got.Indices))
		return
	}
	top := 0.0
	for _, v := range want.Values {
		top = math.Max(top, math.Abs(float64(v)))
	}
	for k := range got.Values {
		if d := math.Abs(float64(got.Values[k]) - float64(want.Values[k])); d > 1e-5*top {
			t.Errorf("%s: id %d weight %g, want %g (largest weight %g)", what, got.Indices[k], got.Values[k], want.Values[k], top)
		}
	}
}

// checkMulti: the same vector count, each vector with cosine >= 0.99999.
func checkMulti(t *testing.T, what string, got embedder.MultiVector, want [][]float32) {
	t.Helper()
	if got.Rows() != len(want) {
		t.Errorf("%s: %d vectors, want %d", what, got.Rows(), len(want))
		return
	}
	for i, w := range want {
		if len(w) != got.Dim {
			t.Errorf("%s: vector %d has %d floats, want %d", what, i, got.Dim, len(w))
			return
		}
		if c := embedder.CosineSimilarity(got.Row(i), w); c < 0.99999 {
			t.Errorf("%s: vector %d cosine %v < 0.99999", what, i, c)
		}
	}
}

func TestSpladeTinySparse(t *testing.T) {
	m := openArchitecture(t, "splade-tiny")
	if got := fmt.Sprint(m.Outputs()); got != "[sparse]" {
		t.Errorf("Outputs %s, want [sparse]", got)
	}
	if !m.HasOutput(embedder.OutputSparse) || m.HasOutput(embedder.OutputMultiVector) || m.HasOutput("nope") {
		t.Error("HasOutput")
	}
	if m.MultiVectorDim() != 0 {
		t.Errorf("MultiVectorDim %d, want 0", m.MultiVectorDim())
	}
	refs := outputReference(t, "splade-tiny", 5)
	texts := textsOf(refs)
	got, err := m.EmbedSparse(texts, embedder.SparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(refs) {
		t.Fatalf("%d vectors for %d texts", len(got), len(refs))
	}
	for i, r := range refs {
		if r.Sparse == nil {
			t.Fatalf("line %d: no sparse field", i+1)
		}
		checkSparse(t, fmt.Sprintf("line %d %q", i+1, r.Text), got[i], r.Sparse.vector())
	}
	// A document task changes nothing on a plain SPLADE; one text alone is
	// the same as in the batch.
	doc, err := m.EmbedSparse(texts[1:2], embedder.SparseOptions{Task: embedder.TaskDocument})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(doc[0]) != fmt.Sprint(got[1]) {
		t.Error("text 2 alone with TaskDocument differs from the batch")
	}
	// TopK 1: the largest weight of each text.
	top, err := m.EmbedSparse(texts, embedder.SparseOptions{TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range refs {
		best := 0
		for k, v := range got[i].Values {
			if v > got[i].Values[best] {
				best = k
			}
		}
		if top[i].Len() != 1 || top[i].Indices[0] != got[i].Indices[best] || top[i].Values[0] != got[i].Values[best] {
			t.Errorf("line %d: TopK 1 gave %v, want id %d", i+1, top[i], got[i].Indices[best])
		}
	}
	// Dot of a vector with itself: its squared norm.
	var sq float64
	for _, v := range got[0].Values {
		sq += float64(v) * float64(v)
	}
	if d := got[0].Dot(got[0]); math.Abs(float64(d)-sq) > 1e-5*sq {
		t.Errorf("Dot %v, want %v", d, sq)
	}
}

func TestSpladeInferenceFreeTiny(t *testing.T) {
	m := openArchitecture(t, "splade-inference-free-tiny")
	refs := outputReference(t, "splade-inference-free-tiny", 5)
	texts := textsOf(refs)
	q, err := m.EmbedSparse(texts, embedder.SparseOptions{Task: embedder.TaskQuery})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.EmbedSparse(texts, embedder.SparseOptions{Task: embedder.TaskDocument})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		if r.QuerySparse == nil || r.DocumentSparse == nil {
			t.Fatalf("line %d: no query_sparse / document_sparse", i+1)
		}
		checkSparse(t, fmt.Sprintf("query line %d %q", i+1, r.Text), q[i], r.QuerySparse.vector())
		checkSparse(t, fmt.Sprintf("document line %d %q", i+1, r.Text), d[i], r.DocumentSparse.vector())
	}
}

func TestColbertTiny(t *testing.T) {
	m := openArchitecture(t, "colbert-tiny")
	if got := fmt.Sprint(m.Outputs()); got != "[multi-vector]" {
		t.Errorf("Outputs %s, want [multi-vector]", got)
	}
	if m.MultiVectorDim() != 32 {
		t.Errorf("MultiVectorDim %d, want 32", m.MultiVectorDim())
	}
	refs := outputReference(t, "colbert-tiny", 5)
	texts := textsOf(refs)
	q, err := m.EmbedMultiVector(texts, embedder.TaskQuery, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.EmbedMultiVector(texts, embedder.TaskDocument, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != len(refs) || len(d) != len(refs) {
		t.Fatalf("%d and %d multi-vectors for %d texts", len(q), len(d), len(refs))
	}
	for i, r := range refs {
		if len(r.QueryVectors) == 0 {
			t.Fatalf("line %d: no query_vectors", i+1)
		}
		if q[i].Dim != 32 {
			t.Errorf("line %d: Dim %d", i+1, q[i].Dim)
		}
		checkMulti(t, fmt.Sprintf("query line %d %q", i+1, r.Text), q[i], r.QueryVectors)
		if len(r.DocVectors) > 0 {
			checkMulti(t, fmt.Sprintf("document line %d %q", i+1, r.Text), d[i], r.DocVectors)
		}
	}
	// MaxSim against a direct computation, and a document scores itself
	// higher than the others (its own tokens are among its vectors).
	want := 0.0
	for i := 0; i < q[1].Rows(); i++ {
		best := math.Inf(-1)
		for j := 0; j < d[1].Rows(); j++ {
			dot := 0.0
			for k, x := range q[1].Row(i) {
				dot += float64(x) * float64(d[1].Row(j)[k])
			}
			best = math.Max(best, dot)
		}
		want += best
	}
	if got := q[1].MaxSim(d[1]); math.Abs(float64(got)-want) > 1e-4*math.Abs(want) {
		t.Errorf("MaxSim %v, want %v", got, want)
	}
	// The no-task call encodes documents.
	none, err := m.EmbedMultiVector(texts[1:2], embedder.TaskNone, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(none[0]) != fmt.Sprint(d[1]) {
		t.Error("TaskNone differs from TaskDocument")
	}
}

func TestBgeM3TinyOutputs(t *testing.T) {
	m := openArchitecture(t, "bgem3-tiny")
	if got := fmt.Sprint(m.Outputs()); got != "[dense sparse multi-vector]" {
		t.Errorf("Outputs %s, want [dense sparse multi-vector]", got)
	}
	refs := outputReference(t, "bgem3-tiny", 0)
	var texts []string
	var want []embedder.SparseVector
	for _, r := range refs {
		if r.LexicalWeights != nil {
			texts = append(texts, r.Text)
			want = append(want, lexical(t, r.LexicalWeights))
		}
	}
	if len(texts) == 0 {
		t.Fatal("no line has lexical_weights")
	}
	got, err := m.EmbedSparse(texts, embedder.SparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		checkSparse(t, fmt.Sprintf("lexical %d %q", i, texts[i]), got[i], want[i])
	}
	// colbert_vecs of the first lines.
	first := refs[:5]
	mv, err := m.EmbedMultiVector(textsOf(first), embedder.TaskNone, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range first {
		if r.ColbertVecs != nil {
			checkMulti(t, fmt.Sprintf("colbert_vecs line %d %q", i+1, r.Text), mv[i], r.ColbertVecs)
		}
	}
	t.Logf("%d lexical_weights lines checked", len(texts))
}

func TestOutputErrors(t *testing.T) {
	m := openArchitecture(t, "splade-tiny")
	// Dense on a sparse-only model.
	_, err := m.Embed([]string{"hello"})
	if !errors.Is(err, embedder.StatusUnsupported) || !strings.Contains(err.Error(), "sparse") {
		t.Errorf("Embed on splade-tiny: %v, want StatusUnsupported mentioning sparse", err)
	}
	// Multi-vector on a sparse-only model.
	if _, err := m.EmbedMultiVector([]string{"hello"}, embedder.TaskQuery, embedder.CallOptions{}); !errors.Is(err, embedder.StatusUnsupported) {
		t.Errorf("EmbedMultiVector on splade-tiny: %v, want StatusUnsupported", err)
	}
	// An unknown task, a negative TopK.
	var e *embedder.Error
	if _, err := m.EmbedSparse([]string{"hello"}, embedder.SparseOptions{Task: embedder.Task(7)}); !errors.As(err, &e) ||
		e.Status != embedder.StatusInvalidArgument || !strings.Contains(e.Message, "task") {
		t.Errorf("Task(7): %v", err)
	}
	if _, err := m.EmbedSparse([]string{"hello"}, embedder.SparseOptions{TopK: -1}); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("TopK -1: %v", err)
	}
	// Invalid UTF-8.
	if _, err := m.EmbedSparse([]string{"ok", "\xff"}, embedder.SparseOptions{}); !errors.Is(err, embedder.StatusInvalidUTF8) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	// No texts: empty, not nil.
	sv, err := m.EmbedSparse(nil, embedder.SparseOptions{})
	if err != nil || sv == nil || len(sv) != 0 {
		t.Errorf("EmbedSparse(nil): %v, %v", sv, err)
	}
	c := openArchitecture(t, "colbert-tiny")
	mv, err := c.EmbedMultiVector([]string{}, embedder.TaskQuery, embedder.CallOptions{})
	if err != nil || mv == nil || len(mv) != 0 {
		t.Errorf("EmbedMultiVector([]): %v, %v", mv, err)
	}
	// Sparse on a multi-vector-only model.
	if _, err := c.EmbedSparse([]string{"hello"}, embedder.SparseOptions{}); !errors.Is(err, embedder.StatusUnsupported) {
		t.Errorf("EmbedSparse on colbert-tiny: %v, want StatusUnsupported", err)
	}
	// A closed model.
	_ = m.Close()
	if _, err := m.EmbedSparse([]string{"hello"}, embedder.SparseOptions{}); err != embedder.ErrClosed {
		t.Errorf("closed: %v, want ErrClosed", err)
	}
	if _, err := m.EmbedMultiVector([]string{"hello"}, embedder.TaskNone, embedder.CallOptions{}); err != embedder.ErrClosed {
		t.Errorf("closed: %v, want ErrClosed", err)
	}
	if m.HasOutput(embedder.OutputSparse) || m.Outputs() != nil || m.MultiVectorDim() != 0 {
		t.Error("a closed model still reports outputs")
	}
}

func TestSparseDotAndMaxSim(t *testing.T) {
	a := embedder.SparseVector{Indices: []uint32{1, 4, 9}, Values: []float32{1, 2, 3}}
	b := embedder.SparseVector{Indices: []uint32{0, 4, 9, 12}, Values: []float32{5, 0.5, -1, 7}}
	if d := a.Dot(b); d != 2*0.5+3*-1 {
		t.Errorf("Dot %v", d)
	}
	if d := a.Dot(embedder.SparseVector{}); d != 0 {
		t.Errorf("Dot with empty %v", d)
	}
	q := embedder.MultiVector{Dim: 2, Data: []float32{1, 0, 0, 1}}
	doc := embedder.MultiVector{Dim: 2, Data: []float32{0.5, 0.5, 2, -1, -1, 3}}
	if q.Rows() != 2 || doc.Rows() != 3 || fmt.Sprint(doc.Row(1)) != "[2 -1]" {
		t.Errorf("Rows/Row: %d %d %v", q.Rows(), doc.Rows(), doc.Row(1))
	}
	// Row 0 (1,0): max(0.5, 2, -1) = 2; row 1 (0,1): max(0.5, -1, 3) = 3.
	if s := q.MaxSim(doc); s != 5 {
		t.Errorf("MaxSim %v, want 5", s)
	}
	if s := q.MaxSim(embedder.MultiVector{Dim: 2}); s != 0 {
		t.Errorf("MaxSim of no vectors %v", s)
	}
	for _, task := range []embedder.Task{embedder.TaskNone, embedder.TaskQuery, embedder.TaskDocument, 9} {
		_ = task.String()
	}
	if embedder.TaskQuery.String() != "query" || embedder.Task(9).String() != "Task(9)" {
		t.Error("Task.String")
	}
}

// TestOutputBufferRetry: with the preallocated buffer too small, one more
// call at the size the library reports gives the same vectors.
func TestOutputBufferRetry(t *testing.T) {
	s := openArchitecture(t, "splade-tiny")
	texts := textsOf(outputReference(t, "splade-tiny", 5))
	want, err := s.EmbedSparse(texts, embedder.SparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := openArchitecture(t, "colbert-tiny")
	long := strings.Repeat("a long document about many things ", 200)
	mtexts := []string{long, "short", long}
	wantMV, err := c.EmbedMultiVector(mtexts, embedder.TaskDocument, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One entry and one vector guessed per text: both first calls are short.
	restore := embedder.SetOutputGuess(1, 1, 1)
	defer restore()
	got, err := s.EmbedSparse(texts, embedder.SparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Error("sparse vectors differ after the retry")
	}
	gotMV, err := c.EmbedMultiVector(mtexts, embedder.TaskDocument, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotMV) != fmt.Sprint(wantMV) {
		t.Error("multi-vectors differ after the retry")
	}
}

package embedder_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// findUp looks for rel in the working directory and its parents.
func findUp(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// missing skips the test on a developer machine, but fails it in CI.
func missing(t *testing.T, format string, args ...interface{}) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// modelPath: $EMBD_MODEL, else models/all-MiniLM-L6-v2.weights in a parent directory.
func modelPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EMBD_MODEL"); p != "" {
		return p
	}
	if p := findUp(filepath.Join("models", "all-MiniLM-L6-v2.weights")); p != "" {
		return p
	}
	missing(t, "model not found: set EMBD_MODEL to all-MiniLM-L6-v2.weights")
	return ""
}

func openModel(t *testing.T, opts ...embedder.Option) *embedder.Model {
	t.Helper()
	m, err := embedder.Open(modelPath(t), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

type reference struct {
	Text      string    `json:"text"`
	InputIDs  []uint32  `json:"input_ids"`
	Embedding []float32 `json:"embedding"`
}

// referenceFile: $EMBD_SHARED_DIR/reference/minilm_reference.jsonl, else
// ../../../shared (the repository's sibling shared/), else any parent's shared/.
func referenceFile(t *testing.T) string {
	t.Helper()
	rel := filepath.Join("reference", "minilm_reference.jsonl")
	if d := os.Getenv("EMBD_SHARED_DIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
			return filepath.Join(d, rel)
		}
	}
	if p := filepath.Join("..", "..", "..", "shared", rel); fileExists(p) {
		return p
	}
	if p := findUp(filepath.Join("shared", rel)); p != "" {
		return p
	}
	missing(t, "minilm_reference.jsonl not found: set EMBD_SHARED_DIR")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func loadReferences(t *testing.T, texts ...string) []reference {
	t.Helper()
	f, err := os.Open(referenceFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, s := range texts {
		want[s] = true
	}
	var refs []reference
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r reference
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reference line: %v", err)
		}
		if want[r.Text] {
			refs = append(refs, r)
			delete(want, r.Text)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 0 {
		t.Fatalf("texts not in the reference file: %v", want)
	}
	return refs
}

var refTexts = []string{
	"Return true if the object is a frame object.",
	"A classic mbox mailbox.",
	"The café served crème brûlée to a naïve señor from Zürich.",
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func TestParity(t *testing.T) {
	refs := loadReferences(t, refTexts...)
	m := openModel(t, embedder.WithThreads(2))
	if m.Dim() != 384 || m.MaxSeqLength() != 256 {
		t.Fatalf("dim %d, max seq %d", m.Dim(), m.MaxSeqLength())
	}
	texts := make([]string, len(refs))
	for i, r := range refs {
		texts[i] = r.Text
	}
	got, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		if d := maxAbsDiff(got[i], r.Embedding); d > 1e-4 {
			t.Errorf("%q: max |diff| %g > 1e-4", r.Text, d)
		}
		one, err := m.EmbedOne(r.Text)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(one, got[i]); d > 1e-6 {
			t.Errorf("%q: EmbedOne differs from the batch by %g", r.Text, d)
		}
		ids, err := m.Tokenize(r.Text)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != fmt.Sprint(r.InputIDs) {
			t.Errorf("%q: ids %v, want %v", r.Text, ids, r.InputIDs)
		}
		n, err := m.CountTokens(r.Text)
		if err != nil || n != len(r.InputIDs) {
			t.Errorf("%q: CountTokens %d, %v; want %d", r.Text, n, err, len(r.InputIDs))
		}
	}
	if s := embedder.CosineSimilarity(got[0], got[0]); math.Abs(float64(s)-1) > 1e-5 {
		t.Errorf("self similarity %v", s)
	}
}

func TestStringsNeedNoNUL(t *testing.T) {
	m := openModel(t, embedder.WithThreads(1))
	// Embedded NUL bytes are ordinary text (BERT cleaning drops them); empty text is fine.
	v, err := m.Embed([]string{"a\x00b", "ab", "", strings.Repeat("long text ", 500)})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(v[0], v[1]); d > 1e-6 {
		t.Errorf("a\\x00b vs ab: %g", d)
	}
	for i, row := range v {
		if len(row) != 384 || cap(row) != 384 {
			t.Errorf("row %d: len %d cap %d", i, len(row), cap(row))
		}
	}
	ids, err := m.Tokenize("")
	if err != nil || len(ids) != 2 || ids[0] != 101 || ids[1] != 102 {
		t.Errorf("Tokenize(\"\") = %v, %v", ids, err)
	}
	n, err := m.CountTokens(strings.Repeat("word ", 1000))
	if err != nil || n != 256 {
		t.Errorf("CountTokens(long) = %d, %v; want 256 (truncated)", n, err)
	}
	empty, err := m.Embed(nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("Embed(nil) = %v, %v", empty, err)
	}
}

func TestOptions(t *testing.T) {
	raw := openModel(t, embedder.WithNormalize(false), embedder.WithVerifyChecksums(false), embedder.WithMaxSeqLength(128))
	if raw.MaxSeqLength() != 128 {
		t.Errorf("MaxSeqLength %d", raw.MaxSeqLength())
	}
	v, err := raw.EmbedOne(refTexts[0])
	if err != nil {
		t.Fatal(err)
	}
	norm := 0.0
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if math.Abs(math.Sqrt(norm)-1) < 1e-3 {
		t.Errorf("WithNormalize(false) still gives a unit vector")
	}
	// Out of the model's range: refused at Open with a message naming the option.
	_, err = embedder.Open(modelPath(t), embedder.WithMaxSeqLength(100000))
	var e *embedder.Error
	if !errors.As(err, &e) || !(e.Status == embedder.StatusModel || e.Status == embedder.StatusInvalidArgument) ||
		!strings.Contains(e.Message, "max_seq_length") {
		t.Errorf("max seq 100000: %v, want StatusModel or StatusInvalidArgument naming max_seq_length", err)
	}
	if _, err := embedder.Open(modelPath(t), embedder.WithThreads(-1)); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("threads -1: %v, want StatusInvalidArgument", err)
	}
}

func TestDimensions(t *testing.T) {
	full := openModel(t, embedder.WithThreads(1))
	cut := openModel(t, embedder.WithThreads(1), embedder.WithDimensions(32))
	if cut.Dim() != 32 {
		t.Fatalf("Dim %d, want 32", cut.Dim())
	}
	fv, err := full.EmbedOne(refTexts[0])
	if err != nil {
		t.Fatal(err)
	}
	cv, err := cut.EmbedOne(refTexts[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(cv) != 32 {
		t.Fatalf("len %d, want 32", len(cv))
	}
	// The first 32 components of the full vector, scaled to unit length.
	n := 0.0
	for _, x := range fv[:32] {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	for i, x := range cv {
		if want := float64(fv[i]) / n; math.Abs(float64(x)-want) > 1e-6 {
			t.Fatalf("component %d: %v, want %v", i, x, want)
		}
	}
	for _, k := range []int{385, -1} {
		if _, err := embedder.Open(modelPath(t), embedder.WithDimensions(k)); !errors.Is(err, embedder.StatusInvalidArgument) {
			t.Errorf("dimensions %d: %v, want StatusInvalidArgument", k, err)
		}
	}
}

func TestEmbedWithInfo(t *testing.T) {
	m := openModel(t, embedder.WithThreads(1), embedder.WithMaxSeqLength(16))
	long := strings.Repeat("cat ", 15) // 15 words + [CLS]/[SEP] = 17 > 16
	exact := strings.Repeat("cat ", 14)
	texts := []string{"The cat sits outside", long, exact, ""}
	v, info, err := m.EmbedWithInfo(texts)
	if err != nil {
		t.Fatal(err)
	}
	want := []embedder.TextInfo{{Tokens: 6}, {Tokens: 16, Truncated: true}, {Tokens: 16}, {Tokens: 2}}
	if len(v) != len(texts) || len(info) != len(texts) {
		t.Fatalf("%d vectors, %d infos", len(v), len(info))
	}
	for i := range want {
		if info[i] != want[i] {
			t.Errorf("text %d: %+v, want %+v", i, info[i], want[i])
		}
		n, err := m.CountTokens(texts[i])
		if err != nil || n != info[i].Tokens {
			t.Errorf("text %d: CountTokens %d (%v), info %d", i, n, err, info[i].Tokens)
		}
	}
	plain, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range plain {
		for j := range plain[i] {
			if plain[i][j] != v[i][j] {
				t.Fatalf("text %d: vectors differ with and without info", i)
			}
		}
	}
}

func TestEmbedQuantized(t *testing.T) {
	m := openModel(t, embedder.WithThreads(1))
	texts := []string{"The cat sits outside", "A man is playing guitar"}
	v, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	ub, info, err := m.EmbedQuantized(texts, embedder.OutputUbinary, true)
	if err != nil {
		t.Fatal(err)
	}
	if ub.RowLen != 48 || len(ub.Data) != 96 || info[1].Tokens != 7 {
		t.Fatalf("RowLen %d, %d bytes, info %+v", ub.RowLen, len(ub.Data), info)
	}
	b, _, err := m.EmbedQuantized(texts, embedder.OutputBinary, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		row, srow := ub.Row(i), b.Int8Row(i)
		for k := range v[i] {
			if bit := row[k/8]>>(7-k%8)&1 == 1; bit != (v[i][k] > 0) {
				t.Fatalf("text %d component %d: bit %v, value %v", i, k, bit, v[i][k])
			}
		}
		for k := range row {
			if int(srow[k]) != int(row[k])-128 {
				t.Fatalf("binary %d != ubinary %d - 128", srow[k], row[k])
			}
		}
	}
	// int8/uint8 need ranges: none in this file.
	if _, _, err := m.EmbedQuantized(texts, embedder.OutputInt8, false); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("int8 without ranges: %v, want StatusInvalidArgument", err)
	}
	lo, hi := make([]float32, 384), make([]float32, 384)
	for i := range lo {
		lo[i], hi[i] = -0.1, 0.1
	}
	r := openModel(t, embedder.WithThreads(1), embedder.WithOutputRanges(lo, hi))
	u8, _, err := r.EmbedQuantized(texts, embedder.OutputUint8, false)
	if err != nil {
		t.Fatal(err)
	}
	i8, _, err := r.EmbedQuantized(texts, embedder.OutputInt8, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		for k, x := range v[i] {
			u, s := u8.Row(i)[k], i8.Int8Row(i)[k]
			if int(s) != int(u)-128 || (x < -0.1 && u != 0) || (x > 0.1 && u != 255) {
				t.Fatalf("text %d component %d: value %v, uint8 %d, int8 %d", i, k, x, u, s)
			}
		}
	}
	if _, err := embedder.Open(modelPath(t), embedder.WithOutputRanges(lo[:10], hi[:10])); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("ranges of 10 dims: %v, want StatusInvalidArgument", err)
	}
	if embedder.OutputUbinary.String() != "ubinary" {
		t.Errorf("name %q", embedder.OutputUbinary.String())
	}
}

func TestPrompts(t *testing.T) {
	plain := openModel(t, embedder.WithThreads(1))
	m := openModel(t, embedder.WithThreads(1), embedder.WithPrompt("query: "))
	a, info, err := m.EmbedWithInfo([]string{"The cat sits outside"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := plain.EmbedOne("query: The cat sits outside")
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		if a[0][i] != b[i] {
			t.Fatalf("component %d: %v with the prompt option, %v with the prompt in the text", i, a[0][i], b[i])
		}
	}
	if info[0].Tokens != 8 {
		t.Errorf("tokens %d, want 8 (prompt included)", info[0].Tokens)
	}
	_, err = embedder.Open(modelPath(t), embedder.WithPromptName("query"))
	var e *embedder.Error
	if !errors.As(err, &e) || e.Status != embedder.StatusInvalidArgument || !strings.Contains(e.Message, "stores none") {
		t.Errorf("unknown prompt name: %v, want StatusInvalidArgument saying the model stores none", err)
	}
}

// sameVecs reports whether two sets of vectors are equal bit for bit.
func sameVecs(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

func TestEmbedWith(t *testing.T) {
	texts := []string{"The cat sits outside", "A man is playing guitar", ""}
	m := openModel(t, embedder.WithThreads(1))
	plain, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	// The zero value changes nothing.
	got, info, err := m.EmbedWith(texts, embedder.CallOptions{})
	if err != nil || !sameVecs(got, plain) || info[0].Tokens != 6 {
		t.Fatalf("zero CallOptions: %v, tokens %v", err, info)
	}
	// Each option equals a model opened with it.
	off := false
	raw := openModel(t, embedder.WithThreads(1), embedder.WithNormalize(false))
	cut := openModel(t, embedder.WithThreads(1), embedder.WithDimensions(32))
	query := openModel(t, embedder.WithThreads(1), embedder.WithPrompt("query: "))
	prompt := "query: "
	for _, c := range []struct {
		name string
		o    embedder.CallOptions
		m    *embedder.Model
	}{
		{"normalize", embedder.CallOptions{Normalize: &off}, raw},
		{"dimensions", embedder.CallOptions{Dimensions: 32}, cut},
		{"prompt", embedder.CallOptions{Prompt: &prompt}, query},
	} {
		want, err := c.m.Embed(texts)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := m.EmbedWith(texts, c.o)
		if err != nil || !sameVecs(got, want) {
			t.Errorf("%s: %v, or vectors differ from a model opened with it", c.name, err)
		}
	}
	// Truncation: refused with StatusLimitExceeded, or cut from either end.
	long := "the first words " + strings.Repeat("cat ", 400) + "and the last"
	_, _, err = m.EmbedWith([]string{long}, embedder.CallOptions{Truncation: embedder.TruncateRefuse})
	var e *embedder.Error
	if !errors.As(err, &e) || e.Status != embedder.StatusLimitExceeded {
		t.Errorf("refuse: %v, want StatusLimitExceeded", err)
	}
	left, info, err := m.EmbedWith([]string{long}, embedder.CallOptions{Truncation: embedder.TruncateLeft})
	if err != nil || info[0].Tokens != 256 || !info[0].Truncated {
		t.Fatalf("left: %v %v", err, info)
	}
	right, err := m.Embed([]string{long})
	if err != nil || sameVecs(left, right) {
		t.Errorf("left truncation gave the right-truncated vector (%v)", err)
	}
	_, _, err = m.EmbedWith(texts, embedder.CallOptions{Dimensions: 999})
	if !errors.As(err, &e) || e.Status != embedder.StatusInvalidArgument {
		t.Errorf("dimensions 999: %v, want StatusInvalidArgument", err)
	}
	_, _, err = m.EmbedWith(texts, embedder.CallOptions{Truncation: 9})
	if !errors.As(err, &e) || e.Status != embedder.StatusInvalidArgument {
		t.Errorf("truncation 9: %v, want StatusInvalidArgument", err)
	}
}

func TestWindows(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("cat ", 40)) // 40 tokens > 14 per window
	w := openModel(t, embedder.WithThreads(1), embedder.WithMaxSeqLength(16), embedder.WithWindows(4))
	p := openModel(t, embedder.WithThreads(1), embedder.WithMaxSeqLength(16))
	a, ai, err := w.EmbedWithInfo([]string{long, "The cat sits outside"})
	if err != nil {
		t.Fatal(err)
	}
	b, bi, err := p.EmbedWithInfo([]string{long, "The cat sits outside"})
	if err != nil {
		t.Fatal(err)
	}
	if ai[0] != (embedder.TextInfo{Tokens: 42}) || bi[0] != (embedder.TextInfo{Tokens: 16, Truncated: true}) {
		t.Errorf("info with windows %+v, without %+v", ai[0], bi[0])
	}
	same := true
	for i := range a[0] {
		same = same && a[0][i] == b[0][i]
		if a[1][i] != b[1][i] {
			t.Fatalf("a text that fits one window changed at %d", i)
		}
	}
	if same {
		t.Errorf("windowed vector equals the truncated one")
	}
	if _, err := embedder.Open(modelPath(t), embedder.WithMaxSeqLength(16), embedder.WithWindows(14)); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("overlap 14: %v, want StatusInvalidArgument", err)
	}
}

func TestProgress(t *testing.T) {
	texts := make([]string, 200)
	for i := range texts {
		texts[i] = fmt.Sprintf("sentence number %d about cats", i)
	}
	var calls, last, stopAt int
	stopAt = len(texts) + 1
	m := openModel(t, embedder.WithThreads(2), embedder.WithProgress(func(done, total int) bool {
		if total != len(texts) || done <= last && calls > 0 {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		calls++
		last = done
		return done < stopAt
	}))
	plain := openModel(t, embedder.WithThreads(2))
	want, err := plain.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || last != len(texts) {
		t.Errorf("%d calls, last %d", calls, last)
	}
	for i := range got {
		for j := range got[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("text %d differs with a progress function", i)
			}
		}
	}
	calls, last, stopAt = 0, 0, 1
	if _, err := m.Embed(texts); !errors.Is(err, embedder.StatusCancelled) || calls != 1 {
		t.Errorf("cancel: %v after %d calls, want StatusCancelled after 1", err, calls)
	}
}

func TestPrecisionNames(t *testing.T) {
	for _, c := range []struct {
		p    embedder.Precision
		name string
		num  int32
	}{
		{embedder.PrecisionDefault, "default", 0},
		{embedder.PrecisionF32, "f32", 1},
		{embedder.PrecisionBF16, "bf16", 2},
		{embedder.PrecisionInt8, "int8", 3},
	} {
		if c.p.String() != c.name || int32(c.p) != c.num {
			t.Errorf("%d: String %q, want %q = %d", int32(c.p), c.p.String(), c.name, c.num)
		}
		for _, s := range []string{c.name, strings.ToUpper(c.name)} {
			if p, err := embedder.ParsePrecision(s); err != nil || p != c.p {
				t.Errorf("ParsePrecision(%q) = %v, %v", s, p, err)
			}
		}
	}
	if s := embedder.Precision(7).String(); s != "Precision(7)" {
		t.Errorf("Precision(7).String() = %q", s)
	}
	if _, err := embedder.ParsePrecision("fp16"); !errors.Is(err, embedder.StatusInvalidArgument) {
		t.Errorf("ParsePrecision(fp16): %v, want StatusInvalidArgument", err)
	}
}

func TestPrecision(t *testing.T) {
	for _, c := range []struct{ asked, runs embedder.Precision }{
		{embedder.PrecisionDefault, embedder.PrecisionF32}, // the test model is an f32 file
		{embedder.PrecisionF32, embedder.PrecisionF32},
		{embedder.PrecisionBF16, embedder.PrecisionBF16},
		{embedder.PrecisionInt8, embedder.PrecisionInt8},
	} {
		m := openModel(t, embedder.WithThreads(1), embedder.WithPrecision(c.asked))
		if got := m.Precision(); got != c.runs {
			t.Errorf("WithPrecision(%v): Precision() = %v, want %v", c.asked, got, c.runs)
		}
		// Every precision embeds; its accuracy is checked by the library's own tests.
		v, err := m.EmbedOne(refTexts[0])
		if err != nil {
			t.Fatalf("%v: %v", c.asked, err)
		}
		norm := 0.0
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if len(v) != 384 || math.Abs(math.Sqrt(norm)-1) > 1e-3 {
			t.Errorf("%v: len %d, norm %v", c.asked, len(v), math.Sqrt(norm))
		}
		_ = m.Close()
		if m.Precision() != embedder.PrecisionDefault {
			t.Errorf("Precision() after Close = %v", m.Precision())
		}
	}
	// An unknown value is refused at Open with a message naming it.
	_, err := embedder.Open(modelPath(t), embedder.WithPrecision(embedder.Precision(7)))
	var e *embedder.Error
	if !errors.As(err, &e) || e.Status != embedder.StatusInvalidArgument ||
		!strings.Contains(e.Message, "precision 7") || !strings.Contains(e.Message, "EMBD_PRECISION_INT8") {
		t.Errorf("WithPrecision(7): %v, want StatusInvalidArgument naming precision 7", err)
	}
}

func TestConcurrent(t *testing.T) {
	m := openModel(t, embedder.WithThreads(1))
	texts := []string{refTexts[0], refTexts[1], refTexts[2], "The cat sits outside", "A man is playing guitar", ""}
	want, err := m.Embed(texts)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 16, 3
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds*2)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				i := (g + r) % len(texts)
				got, err := m.EmbedOne(texts[i])
				if err != nil {
					errs <- err
					continue
				}
				if d := maxAbsDiff(got, want[i]); d > 1e-6 {
					errs <- fmt.Errorf("goroutine %d text %d: diff %g", g, i, d)
				}
				// A failure carries this goroutine's own message (index and byte
				// offset), even with other goroutines failing differently at the
				// same time: the message is read in the same C call.
				idx := g % 4
				batch := []string{"ok", "ok", "ok", "ok"}[:idx+1]
				batch[idx] = strings.Repeat("x", g+r) + "\xff"
				_, err = m.Embed(batch)
				var e *embedder.Error
				wantMsg := fmt.Sprintf("texts[%d] is not valid UTF-8 (invalid byte sequence at byte offset %d)", idx, g+r)
				if !errors.As(err, &e) || e.Status != embedder.StatusInvalidUTF8 || !strings.Contains(e.Message, wantMsg) {
					errs <- fmt.Errorf("goroutine %d: want %q, got %v", g, wantMsg, err)
				}
				if n, err := m.CountTokens(texts[i]); err != nil || n < 2 {
					errs <- fmt.Errorf("CountTokens: %d %v", n, err)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseWhileInUse(t *testing.T) {
	m, err := embedder.Open(modelPath(t), embedder.WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				v, err := m.EmbedOne("closing soon")
				if err != nil && !errors.Is(err, embedder.ErrClosed) {
					t.Errorf("unexpected error: %v", err)
				}
				if err == nil && len(v) != 384 {
					t.Errorf("len %d", len(v))
				}
			}
		}()
	}
	_ = m.Close()
	wg.Wait()
}

func TestErrors(t *testing.T) {
	_, err := embedder.Open(filepath.Join(t.TempDir(), "missing.weights"))
	var e *embedder.Error
	if !errors.As(err, &e) || e.Status != embedder.StatusNotFound || !errors.Is(err, embedder.StatusNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if !strings.Contains(e.Message, "missing.weights") || !strings.Contains(err.Error(), "status 20") {
		t.Errorf("message %q / %q", e.Message, err.Error())
	}

	junk := filepath.Join(t.TempDir(), "junk.weights")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a model ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := embedder.Open(junk); !errors.Is(err, embedder.StatusUnknownFormat) {
		t.Errorf("junk file: %v, want StatusUnknownFormat", err)
	}

	m := openModel(t)
	if _, err := m.Embed([]string{"fine", "bad \xc3\x28"}); !errors.Is(err, embedder.StatusInvalidUTF8) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := m.Tokenize("\xff"); !errors.Is(err, embedder.StatusInvalidUTF8) {
		t.Errorf("Tokenize invalid UTF-8: %v", err)
	}
	if _, err := m.CountTokens("\xff"); !errors.Is(err, embedder.StatusInvalidUTF8) {
		t.Errorf("CountTokens invalid UTF-8: %v", err)
	}

	// closed model
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := m.Embed([]string{"x"}); err != embedder.ErrClosed || !errors.Is(err, embedder.StatusInvalidHandle) {
		t.Errorf("Embed after Close: %v", err)
	}
	if _, err := m.EmbedOne("x"); !errors.Is(err, embedder.ErrClosed) {
		t.Errorf("EmbedOne after Close: %v", err)
	}
	if _, err := m.Tokenize("x"); !errors.Is(err, embedder.ErrClosed) {
		t.Errorf("Tokenize after Close: %v", err)
	}
	if _, err := m.CountTokens("x"); !errors.Is(err, embedder.ErrClosed) {
		t.Errorf("CountTokens after Close: %v", err)
	}
	if m.Dim() != 0 || m.MaxSeqLength() != 0 {
		t.Errorf("Dim/MaxSeqLength after Close: %d %d", m.Dim(), m.MaxSeqLength())
	}
}

func TestStatusAndVersion(t *testing.T) {
	if embedder.StatusNotFound.String() == "" || embedder.Status(12345).String() != "unknown status" {
		t.Errorf("status strings: %q %q", embedder.StatusNotFound.String(), embedder.Status(12345).String())
	}
	if v := embedder.Version(); strings.Count(v, ".") != 2 {
		t.Errorf("Version %q", v)
	}
}

func TestFinalizerFreesForgottenModels(t *testing.T) {
	path := modelPath(t)
	for i := 0; i < 3; i++ {
		m, err := embedder.Open(path, embedder.WithThreads(1), embedder.WithVerifyChecksums(false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.CountTokens("forgotten"); err != nil {
			t.Fatal(err)
		}
		// not closed: the finalizer frees it
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	m := openModel(t, embedder.WithThreads(1))
	if v, err := m.EmbedOne("still fine"); err != nil || len(v) != 384 {
		t.Fatalf("after finalizers: %v", err)
	}
}

// TestMPNet: all-mpnet-base-v2 (the MPNet family) through the unchanged
// binding: $EMBD_MPNET_MODEL, else models/all-mpnet-base-v2.weights in a parent
// directory (scripts/fetch_mpnet.sh); compared with mpnet_reference.jsonl.
func TestMPNet(t *testing.T) {
	path := os.Getenv("EMBD_MPNET_MODEL")
	if path == "" {
		path = findUp(filepath.Join("models", "all-mpnet-base-v2.weights"))
	}
	if path == "" {
		missing(t, "MPNet model not found: set EMBD_MPNET_MODEL to all-mpnet-base-v2.weights")
		return
	}
	ref := strings.Replace(referenceFile(t), "minilm_reference.jsonl", "mpnet_reference.jsonl", 1)
	f, err := os.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]reference{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r reference
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reference line: %v", err)
		}
		want[r.Text] = r
	}
	m, err := embedder.Open(path, embedder.WithThreads(2))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	if m.Dim() != 768 || m.MaxSeqLength() != 384 {
		t.Fatalf("dim %d, max seq %d", m.Dim(), m.MaxSeqLength())
	}
	got, err := m.Embed(refTexts)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range refTexts {
		r, ok := want[text]
		if !ok {
			t.Fatalf("%q not in %s", text, ref)
		}
		if d := maxAbsDiff(got[i], r.Embedding); d > 1e-4 {
			t.Errorf("%q: max |diff| %g > 1e-4", text, d)
		}
		ids, err := m.Tokenize(text)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != fmt.Sprint(r.InputIDs) {
			t.Errorf("%q: ids %v, want %v", text, ids, r.InputIDs)
		}
	}
}

func TestEmbedTokens(t *testing.T) {
	m := openModel(t, embedder.WithThreads(2))
	refs := loadReferences(t, refTexts...)
	texts := make([]string, len(refs))
	for i, r := range refs {
		texts[i] = r.Text
	}
	tv, info, err := m.EmbedTokens(texts, embedder.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		// One vector per reference id; all-MiniLM-L6-v2 mean-pools every
		// token and normalizes, so the mean gives the reference vector.
		if len(tv[i]) != len(r.InputIDs) || info[i].Tokens != len(r.InputIDs) {
			t.Fatalf("%q: %d vectors, info %+v, want %d", r.Text, len(tv[i]), info[i], len(r.InputIDs))
		}
		mean := make([]float64, 384)
		for _, v := range tv[i] {
			if len(v) != 384 {
				t.Fatalf("vector of %d floats", len(v))
			}
			for j, x := range v {
				mean[j] += float64(x)
			}
		}
		norm := 0.0
		for _, x := range mean {
			norm += x * x
		}
		norm = math.Sqrt(norm)
		for j, x := range mean {
			if d := math.Abs(x/norm - float64(r.Embedding[j])); d > 1e-5 {
				t.Fatalf("%q: component %d differs by %g", r.Text, j, d)
			}
		}
	}
	// A text alone gets the same vectors; dimensions cut each vector.
	alone, _, err := m.EmbedTokens(texts[1:2], embedder.CallOptions{Dimensions: 16})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range alone[0] {
		for j := range v {
			if v[j] != tv[1][k][j] {
				t.Fatalf("token %d: cut vector differs from the full one", k)
			}
		}
	}
	if _, _, err := m.EmbedTokens([]string{"x"}, embedder.CallOptions{Dimensions: 1000}); err == nil {
		t.Fatal("dimensions 1000 accepted")
	} else if e, ok := err.(*embedder.Error); !ok || e.Status != embedder.StatusInvalidArgument {
		t.Fatalf("dimensions 1000: %v", err)
	}
	if out, _, err := m.EmbedTokens(nil, embedder.CallOptions{}); err != nil || len(out) != 0 {
		t.Fatalf("no texts: %v %v", out, err)
	}
}

package embedder_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// family is a row of tests/data/families.tsv (its header says what each
// column means).
type family struct {
	name, folder           string
	reference              string // the reference file; default <folder>_reference.jsonl
	dim, maxTokens, lines  int
	cases                  string
	caseLines, promptLines int
	promptDefault          string
}

// readTable reads the rows of tests/data/<file> (tab-separated, a header
// line, "#" comments, "-" for none) from a parent directory, as maps from
// column to value.
func readTable(t *testing.T, file string) []map[string]string {
	t.Helper()
	path := findUp(filepath.Join("tests", "data", file))
	if path == "" {
		t.Fatalf("tests/data/%s not found in a parent directory", file)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	var out []map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if header == nil {
			header = f
			continue
		}
		if len(f) != len(header) {
			t.Fatalf("%s: %d columns, want %d: %q", path, len(f), len(header), line)
		}
		v := map[string]string{}
		for i, h := range header {
			if f[i] != "-" {
				v[h] = f[i]
			}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rows", path)
	}
	return out
}

// num is column k of a table row as a number (0 for none).
func num(t *testing.T, v map[string]string, k string) int {
	t.Helper()
	if v[k] == "" {
		return 0
	}
	n, err := strconv.Atoi(v[k])
	if err != nil {
		t.Fatalf("%s %s: %v", v["name"], k, err)
	}
	return n
}

// readFamilies reads tests/data/families.tsv.
func readFamilies(t *testing.T) []family {
	t.Helper()
	var out []family
	for _, v := range readTable(t, "families.tsv") {
		out = append(out, family{
			name: v["name"], folder: v["folder"], dim: num(t, v, "dim"),
			maxTokens: num(t, v, "max_tokens"), lines: num(t, v, "lines"), cases: v["cases"],
			caseLines: num(t, v, "case_lines"), promptLines: num(t, v, "prompt_lines"),
			promptDefault: v["prompt_default"],
		})
	}
	return out
}

// TestStaticModels: every model of tests/data/static.tsv (model2vec /
// StaticEmbedding folders converted in one library's behaviour) through
// checkFamilyReference, against that library's reference (the zero vector for
// a text without tokens).
func TestStaticModels(t *testing.T) {
	for _, v := range readTable(t, "static.tsv") {
		fam := family{
			name: v["name"], folder: v["folder"], reference: v["reference"], dim: num(t, v, "dim"),
			maxTokens: num(t, v, "max_tokens"), lines: num(t, v, "lines"),
		}
		t.Run(fam.name, func(t *testing.T) {
			path := familyModel(t, fam.name, "embd convert <shared>/reference/"+fam.folder+
				" --static-behaviour "+v["behaviour"]+" -o models/"+fam.name+".weights")
			if path != "" {
				checkFamilyReference(t, fam, path)
			}
		})
	}
}

// familyModel: $EMBD_FAMILIES_DIR/<name>.weights (run_tests.sh converts the
// tables' models there), else models/<name>.weights in a parent directory;
// "" after reporting it missing (`convert` says how to make it).
func familyModel(t *testing.T, name, convert string) string {
	t.Helper()
	path := filepath.Join(os.Getenv("EMBD_FAMILIES_DIR"), name+".weights")
	if os.Getenv("EMBD_FAMILIES_DIR") == "" {
		path = findUp(filepath.Join("models", name+".weights"))
	}
	if path == "" || !fileExists(path) {
		missing(t, name+" model not found: set EMBD_FAMILIES_DIR, or run "+convert)
		return ""
	}
	return path
}

type promptLine struct {
	Text       string    `json:"text"`
	PromptName string    `json:"prompt_name"`
	InputIDs   []uint32  `json:"input_ids"`
	Embedding  []float32 `json:"embedding"`
}

// readLines reads a JSONL file under shared/reference into a slice of T.
func readLines[T any](t *testing.T, rel string) []T {
	t.Helper()
	ref := strings.Replace(referenceFile(t), "minilm_reference.jsonl", rel, 1)
	f, err := os.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFamilies: every model of tests/data/families.tsv through the binding:
// on every line of its sentence-transformers reference ids identical and
// embeddings within 1e-5, one text at a time the same bits as the batch; the
// ids of its tokenizer case file; its prompts by name. The models:
// $EMBD_FAMILIES_DIR/<name>.weights (run_tests.sh converts them), else
// models/<name>.weights in a parent directory.
func TestFamilies(t *testing.T) {
	for _, fam := range readFamilies(t) {
		fam := fam
		t.Run(fam.name, func(t *testing.T) {
			path := familyModel(t, fam.name, "embd convert <shared>/reference/"+fam.folder+
				" -o models/"+fam.name+".weights")
			if path == "" {
				return
			}
			checkFamilyReference(t, fam, path)
			if fam.cases != "" {
				checkFamilyCases(t, fam, path)
			}
			if fam.promptLines > 0 {
				checkFamilyPrompts(t, fam, path)
			}
		})
	}
}

func checkFamilyReference(t *testing.T, fam family, path string) {
	ref := fam.reference
	if ref == "" {
		ref = fam.folder + "_reference.jsonl"
	}
	refs := readLines[reference](t, ref)
	if len(refs) != fam.lines {
		t.Fatalf("%s: %d reference lines, want %d", fam.name, len(refs), fam.lines)
	}
	m, err := embedder.Open(path, embedder.WithThreads(2))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	if m.Dim() != fam.dim || m.MaxSeqLength() != fam.maxTokens {
		t.Fatalf("dim %d, max seq %d; the table says %d, %d", m.Dim(), m.MaxSeqLength(), fam.dim, fam.maxTokens)
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
		if d := maxAbsDiff(got[i], r.Embedding); d > 1e-5 {
			t.Errorf("line %d %q: max |diff| %g > 1e-5", i+1, r.Text, d)
		}
		ids, err := m.Tokenize(r.Text)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != fmt.Sprint(r.InputIDs) {
			t.Errorf("line %d %q: ids %v, want %v", i+1, r.Text, ids, r.InputIDs)
		}
	}
	for _, i := range []int{0, 1, len(refs) / 2, len(refs) - 1} {
		one, err := m.EmbedOne(texts[i])
		if err != nil {
			t.Fatal(err)
		}
		for k := range one {
			if math.Float32bits(one[k]) != math.Float32bits(got[i][k]) {
				t.Fatalf("line %d: alone differs from in the batch at %d", i+1, k)
			}
		}
	}
}

// checkFamilyCases: the tokenizer case file's ids; a text longer than the model
// gives its first max_seq_length - 1 ids and the closing special token.
func checkFamilyCases(t *testing.T, fam family, path string) {
	cases := readLines[reference](t, fam.cases)
	if len(cases) != fam.caseLines {
		t.Fatalf("%s: %d lines, want %d", fam.cases, len(cases), fam.caseLines)
	}
	m, err := embedder.Open(path, embedder.WithThreads(1))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer m.Close()
	n := m.MaxSeqLength()
	for i, c := range cases {
		want := c.InputIDs
		if len(want) > n {
			want = append(append([]uint32{}, want[:n-1]...), want[len(want)-1])
		}
		ids, err := m.Tokenize(c.Text)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("%s line %d %q: ids %v, want %v", fam.cases, i+1, c.Text, ids, want)
		}
	}
}

// checkFamilyPrompts: the model's stored prompts by name (WithPromptName) against
// <folder>_prompt_reference.jsonl; a line without prompt_name has the
// model's default prompt.
func checkFamilyPrompts(t *testing.T, fam family, path string) {
	rows := readLines[promptLine](t, fam.folder+"_prompt_reference.jsonl")
	if len(rows) != fam.promptLines {
		t.Fatalf("%s: %d prompt lines, want %d", fam.name, len(rows), fam.promptLines)
	}
	groups := map[string][]promptLine{}
	var order []string
	for _, r := range rows {
		p := r.PromptName
		if p == "" {
			p = fam.promptDefault
		}
		if p == "" {
			t.Fatalf("%s: a line without prompt_name and no default prompt", fam.name)
		}
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], r)
	}
	for _, p := range order {
		m, err := embedder.Open(path, embedder.WithThreads(2), embedder.WithPromptName(p))
		if err != nil {
			t.Fatalf("Open with prompt %q: %v", p, err)
		}
		texts := make([]string, len(groups[p]))
		for i, r := range groups[p] {
			texts[i] = r.Text
		}
		got, err := m.Embed(texts)
		if err != nil {
			m.Close()
			t.Fatal(err)
		}
		for i, r := range groups[p] {
			if d := maxAbsDiff(got[i], r.Embedding); d > 1e-5 {
				t.Errorf("prompt %s %q: max |diff| %g > 1e-5", p, r.Text, d)
			}
			if r.InputIDs != nil {
				ids, err := m.Tokenize(r.Text)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(ids) != fmt.Sprint(r.InputIDs) {
					t.Errorf("prompt %s %q: ids %v, want %v", p, r.Text, ids, r.InputIDs)
				}
			}
		}
		m.Close()
	}
}

package embedder_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	embedder "github.com/embedder/embedder-go"
)

// hfCache lays out src as repo at commit in a HuggingFace cache (as
// huggingface_hub writes it: blobs, relative snapshot symlinks, refs/main);
// each blob is a link to the source file.
func hfCache(t *testing.T, root, repo, commit, src string) {
	t.Helper()
	dir := filepath.Join(root, "models--"+strings.ReplaceAll(repo, "/", "--"))
	n := 0
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		n++
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		blob := filepath.Join(dir, "blobs", "blob"+strconv.Itoa(n))
		if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(abs, blob); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		link := filepath.Join(dir, "snapshots", commit, rel)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		target, _ := filepath.Rel(filepath.Dir(link), blob)
		return os.Symlink(target, link)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenByHubID: Open("org/name") finds the model in the local
// HuggingFace cache (no download), converts it once into EMBD_CACHE_DIR and
// embeds as the reference.
func TestOpenByHubID(t *testing.T) {
	src := findUp(filepath.Join("models", "all-MiniLM-L6-v2-hf"))
	if src == "" {
		missing(t, "models/all-MiniLM-L6-v2-hf not found: run scripts/fetch_model.sh")
		return
	}
	refs := loadReferences(t, refTexts...)
	tmp := t.TempDir()
	const repo = "sentence-transformers/all-MiniLM-L6-v2"
	hfCache(t, filepath.Join(tmp, "hf"), repo, strings.Repeat("c", 40), src)
	t.Setenv("HF_HUB_CACHE", filepath.Join(tmp, "hf"))
	t.Setenv("EMBD_CACHE_DIR", filepath.Join(tmp, "embd"))
	m, err := embedder.Open(repo, embedder.WithThreads(2))
	if err != nil {
		t.Fatalf("Open(%q): %v", repo, err)
	}
	defer m.Close()
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
	}
	_, err = embedder.Open("sentence-transformers/absent-model")
	var e *embedder.Error
	if !errors.As(err, &e) || !strings.Contains(e.Error(), "embd pull sentence-transformers/absent-model") {
		t.Fatalf("absent model: %v", err)
	}
}

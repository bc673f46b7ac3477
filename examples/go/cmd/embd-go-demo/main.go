// Command embd-go-demo embeds a few sentences with the Go binding and prints
// their pairwise cosine similarities.
//
//	embd-go-demo [-m MODEL] [-threads N] [-precision f32|bf16|int8] [sentence ...]
//
// MODEL defaults to $EMBD_MODEL.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	embedder "github.com/embedder/embedder-go"
)

func main() {
	model := flag.String("m", os.Getenv("EMBD_MODEL"), "model file (.weights); default $EMBD_MODEL")
	threads := flag.Int("threads", 0, "worker threads per call (0 = all CPUs)")
	precisionName := flag.String("precision", "default", "arithmetic of the dense layers: f32, bf16, int8 or default (the file's own)")
	flag.Parse()
	precision, err := embedder.ParsePrecision(*precisionName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embd-go-demo:", err)
		os.Exit(2)
	}
	if *model == "" {
		fmt.Fprintln(os.Stderr, "embd-go-demo: no model: pass -m MODEL or set $EMBD_MODEL")
		os.Exit(2)
	}
	sentences := flag.Args()
	if len(sentences) == 0 {
		sentences = []string{"A man is playing guitar.", "Someone is playing an instrument.", "The cat sits outside."}
	}

	m, err := embedder.Open(*model, embedder.WithThreads(*threads), embedder.WithPrecision(precision))
	if err != nil {
		var e *embedder.Error
		if errors.As(err, &e) && errors.Is(err, embedder.StatusNotFound) {
			fmt.Fprintf(os.Stderr, "embd-go-demo: no such model file (status %d): %s\n", e.Status, e.Message)
		} else {
			fmt.Fprintln(os.Stderr, "embd-go-demo:", err)
		}
		os.Exit(1)
	}
	defer m.Close()

	vecs, err := m.Embed(sentences)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embd-go-demo:", err)
		os.Exit(1)
	}
	fmt.Printf("embedder %s: %s, dim %d, precision %v\n", embedder.Version(), m.Name(), m.Dim(), m.Precision())
	for i, s := range sentences {
		n, _ := m.CountTokens(s)
		fmt.Printf("[%d] %s (%d tokens)\n", i, s, n)
	}
	for i := range vecs {
		for j := range vecs {
			fmt.Printf(" %7.4f", embedder.CosineSimilarity(vecs[i], vecs[j]))
		}
		fmt.Println()
	}
}

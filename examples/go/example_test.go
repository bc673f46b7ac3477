package embedder_test

import (
	"fmt"
	"os"

	embedder "github.com/embedder/embedder-go"
)

// Compiled by go test; run with a model as `go run ./cmd/embd-go-demo`.
func Example() {
	m, err := embedder.Open(os.Getenv("EMBD_MODEL"), embedder.WithThreads(2))
	if err != nil {
		fmt.Println(err) // e.g. embedder: model file not found (status 20): embd_open: ...
		return
	}
	defer m.Close()
	v, err := m.Embed([]string{"A man is playing guitar.", "Someone is playing an instrument."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.2f\n", embedder.CosineSimilarity(v[0], v[1]))
}

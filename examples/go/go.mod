module github.com/embedder/embedder-go

go 1.19

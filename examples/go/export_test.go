package embedder

// SetOutputGuess sets the buffer bound and the per-text guesses of
// EmbedSparse and EmbedMultiVector for a test (small values make the first
// call's buffer too small, so the second call, at the size the library
// reports, is taken); the returned function restores them. Tests that use it
// must not run in parallel.
func SetOutputGuess(sure, sparsePerText, vectorsPerText int) (restore func()) {
	a, b, c := sureEntries, sparseGuess, multiVectorGuess
	sureEntries, sparseGuess, multiVectorGuess = sure, sparsePerText, vectorsPerText
	return func() { sureEntries, sparseGuess, multiVectorGuess = a, b, c }
}

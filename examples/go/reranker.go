package embedder

/*
#include <stdlib.h>
#include <string.h>
#include <embedder.h>
#include "embd_go.h"

// As in embedder.go: each helper copies embd_last_error() in the same C call.

static embd_status embd_go_rerank_open(const char *path, size_t threads, size_t max_len,
                                       embd_precision precision, embd_reranker **out, char **err) {
	*err = NULL;
	*out = NULL;
	embd_options *o = embd_options_new();
	if (o == NULL) return EMBD_STATUS_INTERNAL;
	embd_status st = embd_options_set_threads(o, threads);
	if (st == EMBD_STATUS_OK) st = embd_options_set_max_seq_length(o, max_len);
	if (st == EMBD_STATUS_OK) st = embd_options_set_precision(o, precision);
	if (st == EMBD_STATUS_OK) st = embd_rerank_open(path, o, out);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	embd_options_free(o);
	return st;
}


// Pairs: texts 0..n-1 are the queries, n..2n-1 the passages.
// prompt: NULL for the model's instruction.
static embd_status embd_go_rerank_score(const embd_reranker *r, const char *prompt, const char *buf,
                                        const size_t *lens, size_t n, float *scores, float *logits,
                                        size_t out_len, size_t *tokens, uint8_t *truncated, char **err) {
	*err = NULL;
	embd_text *t = embd_go_texts(buf, lens, 2 * n);
	if (t == NULL) return EMBD_STATUS_OUT_OF_MEMORY;
	embd_status st = embd_rerank_score_prompted(r, prompt, t, t + n, n, scores, logits, out_len,
	                                            tokens, truncated);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	free(t);
	return st;
}

// Text 0 is the query, 1..n the documents.
static embd_status embd_go_rerank_rank(const embd_reranker *r, const char *prompt, const char *buf,
                                       const size_t *lens, size_t n, size_t top_k, int raw,
                                       embd_ranked *out, size_t out_len, size_t *n_out, char **err) {
	*err = NULL;
	embd_text *t = embd_go_texts(buf, lens, n + 1);
	if (t == NULL) return EMBD_STATUS_OUT_OF_MEMORY;
	embd_status st = embd_rerank_rank_prompted(r, prompt, t[0], t + 1, n, top_k, raw, out, out_len,
	                                           n_out);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	free(t);
	return st;
}

static embd_status embd_go_rerank_tokenize(const embd_reranker *r, _GoString_ q, _GoString_ p,
                                           uint32_t *ids, uint32_t *types, size_t cap, size_t *n,
                                           char **err) {
	embd_text tq = {_GoStringLen(q) ? _GoStringPtr(q) : NULL, _GoStringLen(q)};
	embd_text tp = {_GoStringLen(p) ? _GoStringPtr(p) : NULL, _GoStringLen(p)};
	embd_status st = embd_rerank_tokenize(r, tq, tp, ids, types, cap, n);
	*err = st != EMBD_STATUS_OK ? embd_go_copy_error() : NULL;
	return st;
}
*/
import "C"

import (
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Pair is one (query, passage) pair to score.
type Pair struct {
	Query, Passage string
}

// Ranked is one document of a ranking: its index in the call, score and logit.
type Ranked struct {
	Index int
	Score float32
	Logit float32
}

// Reranker is an open cross-encoder (a model converted from a HF
// *ForSequenceClassification folder), scoring pairs as sentence-transformers'
// CrossEncoder. Safe for concurrent use; Close it when done.
type Reranker struct {
	mu     sync.RWMutex
	h      *C.embd_reranker
	labels int
	maxLen int
}

// RerankerOption configures OpenReranker.
type RerankerOption func(*rerankConfig)

type rerankConfig struct {
	threads, maxLen int
	precision       Precision
}

// RerankWithThreads sets the worker threads per call (0 = all CPUs).
func RerankWithThreads(n int) RerankerOption { return func(c *rerankConfig) { c.threads = n } }

// RerankWithMaxLength sets the tokens of a pair, special tokens included
// (CrossEncoder's max_length; 0 = the model's).
func RerankWithMaxLength(n int) RerankerOption { return func(c *rerankConfig) { c.maxLen = n } }

// RerankWithPrecision sets the arithmetic of the encoder's dense layers.
func RerankWithPrecision(p Precision) RerankerOption {
	return func(c *rerankConfig) { c.precision = p }
}

// OpenReranker loads a cross-encoder file. An embedding model gives
// StatusModel (open it with Open).
func OpenReranker(path string, opts ...RerankerOption) (*Reranker, error) {
	var cfg rerankConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.threads < 0 || cfg.maxLen < 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "threads and max length must not be negative"}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var h *C.embd_reranker
	var msg *C.char
	st := C.embd_go_rerank_open(cpath, C.size_t(cfg.threads), C.size_t(cfg.maxLen),
		C.embd_precision(cfg.precision), &h, &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, newError(st, msg)
	}
	r := &Reranker{
		h:      h,
		labels: int(C.embd_rerank_num_labels(h)),
		maxLen: int(C.embd_rerank_max_seq_length(h)),
	}
	runtime.SetFinalizer(r, (*Reranker).free)
	return r, nil
}

func (r *Reranker) free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h != nil {
		C.embd_rerank_free(r.h)
		r.h = nil
	}
}

// Close frees the reranker after running calls return; later calls return
// ErrClosed.
func (r *Reranker) Close() error {
	r.free()
	runtime.SetFinalizer(r, nil)
	return nil
}

func (r *Reranker) acquire() (*C.embd_reranker, error) {
	r.mu.RLock()
	if r.h == nil {
		r.mu.RUnlock()
		return nil, ErrClosed
	}
	return r.h, nil
}

// NumLabels is the number of scores per pair.
func (r *Reranker) NumLabels() int { return r.labels }

// MaxLength is the tokens of a pair, special tokens included.
func (r *Reranker) MaxLength() int { return r.maxLen }

// packTexts concatenates texts into one buffer plus one length per text:
// neither holds Go pointers, so both may be passed to C (embd_go_texts builds
// the embd_text array in C memory). The buffer is never empty (&buf[0] is
// always valid).
func packTexts(texts []string) ([]byte, []C.size_t) {
	total := 0
	for _, t := range texts {
		total += len(t)
	}
	buf := make([]byte, 0, total+1)
	lens := make([]C.size_t, len(texts))
	for i, t := range texts {
		buf = append(buf, t...)
		lens[i] = C.size_t(len(t))
	}
	return append(buf, 0), lens
}

// Score returns each pair's scores and logits (NumLabels() values per pair,
// row-major) and its token count and truncation flag.
func (r *Reranker) Score(pairs []Pair) (scores, logits []float32, info []TextInfo, err error) {
	return r.score(pairs, nil)
}

// ScorePrompted is Score under an instruction: an LLM reranker's
// CrossEncoder prompt (Qwen3-Reranker's <Instruct>). A cross-encoder without
// a prompt template gives StatusInvalidArgument.
func (r *Reranker) ScorePrompted(pairs []Pair, prompt string) (scores, logits []float32, info []TextInfo, err error) {
	return r.score(pairs, &prompt)
}

// cPrompt is prompt as a C string (NULL for nil; freed by the caller), or
// an error for a NUL byte inside it.
func cPrompt(prompt *string) (*C.char, error) {
	if prompt == nil {
		return nil, nil
	}
	if strings.IndexByte(*prompt, 0) >= 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "prompt must not contain NUL"}
	}
	return C.CString(*prompt), nil
}

func (r *Reranker) score(pairs []Pair, prompt *string) (scores, logits []float32, info []TextInfo, err error) {
	cp, err := cPrompt(prompt)
	if err != nil {
		return nil, nil, nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	h, err := r.acquire()
	if err != nil {
		return nil, nil, nil, err
	}
	defer r.mu.RUnlock()
	n := len(pairs)
	if n == 0 {
		return []float32{}, []float32{}, []TextInfo{}, nil
	}
	texts := make([]string, 2*n)
	for i, p := range pairs {
		texts[i], texts[n+i] = p.Query, p.Passage
	}
	buf, lens := packTexts(texts)
	scores = make([]float32, n*r.labels)
	logits = make([]float32, n*r.labels)
	tokens := make([]C.size_t, n)
	truncated := make([]C.uint8_t, n)
	var msg *C.char
	st := C.embd_go_rerank_score(h, cp, (*C.char)(unsafe.Pointer(&buf[0])), &lens[0], C.size_t(n),
		(*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&logits[0])), C.size_t(len(scores)),
		&tokens[0], &truncated[0], &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, nil, nil, newError(st, msg)
	}
	info = make([]TextInfo, n)
	for i := range info {
		info[i] = TextInfo{Tokens: int(tokens[i]), Truncated: truncated[i] != 0}
	}
	return scores, logits, info, nil
}

// Rank returns the best topK documents for query (topK in 1..len(docs);
// len(docs) for all), best first, ties by index; by logit when raw. An empty
// query, no documents or a topK out of range give StatusInvalidArgument.
func (r *Reranker) Rank(query string, docs []string, topK int, raw bool) ([]Ranked, error) {
	return r.rank(query, docs, topK, raw, nil)
}

// RankPrompted is Rank under an instruction (see ScorePrompted).
func (r *Reranker) RankPrompted(query string, docs []string, topK int, raw bool, prompt string) ([]Ranked, error) {
	return r.rank(query, docs, topK, raw, &prompt)
}

func (r *Reranker) rank(query string, docs []string, topK int, raw bool, prompt *string) ([]Ranked, error) {
	cp, err := cPrompt(prompt)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	h, err := r.acquire()
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	if topK < 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "topK must not be negative"}
	}
	buf, lens := packTexts(append([]string{query}, docs...))
	out := make([]C.embd_ranked, topK+1)
	var nOut C.size_t
	rawFlag := 0
	if raw {
		rawFlag = 1
	}
	var msg *C.char
	st := C.embd_go_rerank_rank(h, cp, (*C.char)(unsafe.Pointer(&buf[0])), &lens[0], C.size_t(len(docs)),
		C.size_t(topK), C.int(rawFlag), &out[0], C.size_t(len(out)), &nOut, &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, newError(st, msg)
	}
	res := make([]Ranked, int(nOut))
	for i := range res {
		res[i] = Ranked{Index: int(out[i].index), Score: float32(out[i].score), Logit: float32(out[i].logit)}
	}
	return res, nil
}

// Tokenize returns the pair's ids and token types as the model reads them.
func (r *Reranker) Tokenize(query, passage string) (ids, types []uint32, err error) {
	h, err := r.acquire()
	if err != nil {
		return nil, nil, err
	}
	defer r.mu.RUnlock()
	capacity := r.maxLen + 1
	ids = make([]uint32, capacity)
	types = make([]uint32, capacity)
	var n C.size_t
	var msg *C.char
	st := C.embd_go_rerank_tokenize(h, query, passage, (*C.uint32_t)(unsafe.Pointer(&ids[0])),
		(*C.uint32_t)(unsafe.Pointer(&types[0])), C.size_t(capacity), &n, &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, nil, newError(st, msg)
	}
	return ids[:n:n], types[:n:n], nil
}

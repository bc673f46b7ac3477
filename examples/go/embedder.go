// Package embedder is a Go binding (cgo) of the embedder C library: sentence
// embeddings on the CPU.
//
//	m, err := embedder.Open("all-MiniLM-L6-v2.weights", embedder.WithThreads(2))
//	if err != nil { ... }
//	defer m.Close()
//	vecs, err := m.Embed([]string{"The cat sits outside", "A man is playing guitar"})
//
// The library is found through pkg-config (embedder.pc, installed by
// `cmake --install`; set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig).
//
// Errors are *Error values carrying the library's status code and message;
// errors.Is(err, embedder.StatusNotFound) tests the code. A *Model is safe for
// concurrent use by many goroutines: the C model is immutable and the library
// takes no global lock, so calls run in parallel. Close waits for running
// calls; later calls return ErrClosed.
package embedder

/*
#cgo pkg-config: embedder
#include <stdlib.h>
#include <string.h>
#include <embedder.h>
#include "embd_go.h"

// Every helper below calls one embd_* function and, when it fails, copies
// embd_last_error() into malloc'd memory in the SAME C call: the message is
// per OS thread, and a goroutine may move to another thread between two cgo
// calls. The caller frees *err with free().


extern int embdGoProgress(uintptr_t user, size_t done, size_t total);

// The progress callback handed to the library: user carries a cgo.Handle.
static int embd_go_progress_tramp(void *user, size_t done, size_t total) {
	return embdGoProgress((uintptr_t)user, done, total);
}

static embd_status embd_go_open(const char *path, size_t threads, size_t max_seq, int normalize,
                                int verify, embd_precision precision, size_t dimensions,
                                const float *ranges, size_t ranges_len, const char *prompt,
                                const char *prompt_name, int windows, size_t overlap,
                                const char *matryoshka, uintptr_t progress, embd_model **out,
                                char **err) {
	*err = NULL;
	*out = NULL;
	embd_options *o = embd_options_new();
	if (o == NULL) {
		*err = embd_go_copy_error();
		return EMBD_STATUS_INTERNAL;
	}
	embd_status st = embd_options_set_threads(o, threads);
	if (st == EMBD_STATUS_OK) st = embd_options_set_max_seq_length(o, max_seq);
	if (st == EMBD_STATUS_OK) st = embd_options_set_normalize(o, normalize);
	if (st == EMBD_STATUS_OK) st = embd_options_set_verify_checksums(o, verify);
	if (st == EMBD_STATUS_OK) st = embd_options_set_precision(o, precision);
	if (st == EMBD_STATUS_OK) st = embd_options_set_dimensions(o, dimensions);
	if (st == EMBD_STATUS_OK) st = embd_options_set_matryoshka(o, matryoshka);
	if (st == EMBD_STATUS_OK) st = embd_options_set_output_ranges(o, ranges, ranges_len);
	if (st == EMBD_STATUS_OK) st = embd_options_set_prompt(o, prompt);
	if (st == EMBD_STATUS_OK) st = embd_options_set_prompt_name(o, prompt_name);
	if (st == EMBD_STATUS_OK) st = embd_options_set_windows(o, windows, overlap);
	if (st == EMBD_STATUS_OK && progress != 0)
		st = embd_options_set_progress(o, embd_go_progress_tramp, (void *)progress);
	if (st == EMBD_STATUS_OK) st = embd_open(path, o, out);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	embd_options_free(o);
	return st;
}

// Texts arrive as one buffer of concatenated UTF-8 bytes plus one length per
// text (Go memory without Go pointers, so cgo may pass it); the embd_text
// (pointer, length) pairs are built here, in C memory.
// tokens and truncated are NULL when not wanted (embd_encode_ex).
static embd_status embd_go_encode(const embd_model *m, const char *buf, const size_t *lens, size_t n,
                                  float *out, size_t out_len, size_t *tokens, uint8_t *truncated,
                                  char **err) {
	*err = NULL;
	embd_text *texts = (embd_text *)malloc(n * sizeof(embd_text));
	if (texts == NULL) {
		*err = NULL;
		return EMBD_STATUS_OUT_OF_MEMORY;
	}
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		texts[i].ptr = lens[i] ? buf + off : NULL;
		texts[i].len = lens[i];
		off += lens[i];
	}
	embd_status st = embd_encode_ex(m, texts, n, out, out_len, tokens, truncated);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	free(texts);
	return st;
}

// Per-call options made from the arguments (see embd_go_call_options) and
// freed here, around embd_encode_with (tokens 0: n_floats unused) or
// embd_encode_tokens (tokens 1: with out NULL and out_len 0,
// EMBD_STATUS_BUFFER_TOO_SMALL and *n_floats the size, no error copied).
static embd_status embd_go_encode_with(int tokens, const embd_model *m, int normalize, size_t dims,
                                       const char *prompt, const char *prompt_name,
                                       embd_truncation truncation, const char *buf,
                                       const size_t *lens, size_t n, float *out, size_t out_len,
                                       size_t *n_floats, size_t *tokens_out, uint8_t *truncated,
                                       char **err) {
	*err = NULL;
	embd_status st;
	embd_call_options *o = embd_go_call_options(normalize, dims, prompt, prompt_name, truncation, &st, err);
	if (o == NULL) return st;
	embd_text *texts = embd_go_texts(buf, lens, n);
	if (texts == NULL) {
		embd_call_options_free(o);
		return EMBD_STATUS_OUT_OF_MEMORY;
	}
	if (tokens) {
		st = embd_encode_tokens(m, o, texts, n, out, out_len, n_floats, tokens_out, truncated);
	} else {
		st = embd_encode_with(m, o, texts, n, out, out_len, tokens_out, truncated);
	}
	int size_query = tokens && st == EMBD_STATUS_BUFFER_TOO_SMALL && out == NULL;
	if (st != EMBD_STATUS_OK && !size_query) *err = embd_go_copy_error();
	free(texts);
	embd_call_options_free(o);
	return st;
}

// As embd_go_encode, into a buffer of the output precision's element type.
static embd_status embd_go_encode_quantized(const embd_model *m, const char *buf, const size_t *lens,
                                            size_t n, embd_output_precision p, void *out, size_t out_len,
                                            size_t *tokens, uint8_t *truncated, char **err) {
	*err = NULL;
	embd_text *texts = (embd_text *)malloc(n * sizeof(embd_text));
	if (texts == NULL) return EMBD_STATUS_OUT_OF_MEMORY;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		texts[i].ptr = lens[i] ? buf + off : NULL;
		texts[i].len = lens[i];
		off += lens[i];
	}
	embd_status st = embd_encode_quantized(m, texts, n, p, out, out_len, tokens, truncated);
	if (st != EMBD_STATUS_OK) *err = embd_go_copy_error();
	free(texts);
	return st;
}

static embd_status embd_go_tokenize(const embd_model *m, _GoString_ s, uint32_t *ids, size_t ids_len,
                                    size_t *n, char **err) {
	size_t len = _GoStringLen(s);
	embd_status st = embd_tokenize(m, len ? _GoStringPtr(s) : NULL, len, ids, ids_len, n);
	*err = st != EMBD_STATUS_OK ? embd_go_copy_error() : NULL;
	return st;
}

static embd_status embd_go_count_tokens(const embd_model *m, _GoString_ s, size_t *n, char **err) {
	size_t len = _GoStringLen(s);
	embd_status st = embd_count_tokens(m, len ? _GoStringPtr(s) : NULL, len, n);
	*err = st != EMBD_STATUS_OK ? embd_go_copy_error() : NULL;
	return st;
}
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"
)

// Status is an embd_status code of the C library. Numbers are stable. A Status
// is also an error, so errors.Is(err, StatusNotFound) matches any *Error with
// that code.
type Status int32

// The embd_status codes (include/embedder.h).
const (
	StatusOK              Status = 0
	StatusNullArgument    Status = 1
	StatusInvalidArgument Status = 2
	StatusInvalidHandle   Status = 3
	StatusBufferTooSmall  Status = 4
	StatusInvalidUTF8     Status = 5
	StatusLimitExceeded   Status = 6
	StatusCancelled       Status = 7
	StatusNotFound        Status = 20
	StatusIO              Status = 21
	StatusUnknownFormat   Status = 30
	StatusFormat          Status = 31
	StatusChecksum        Status = 32
	StatusUnsupported     Status = 40
	StatusModel           Status = 41
	StatusOutOfMemory     Status = 50
	StatusInternal        Status = 90
	StatusInternalPanic   Status = 91
)

// String is the library's static phrase for the status (embd_status_str).
func (s Status) String() string { return C.GoString(C.embd_status_str(C.int32_t(s))) }

// Error makes a Status usable as an error target for errors.Is.
func (s Status) Error() string { return "embedder: " + s.String() }

// Error is a failure reported by the C library: the status code and the
// detailed message of embd_last_error().
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("embedder: %s (status %d): %s", e.Status.String(), int32(e.Status), e.Message)
}

// Unwrap returns the Status, so errors.Is(err, StatusX) works.
func (e *Error) Unwrap() error { return e.Status }

// ErrClosed is returned by the methods of a Model after Close.
var ErrClosed = &Error{Status: StatusInvalidHandle, Message: "model is closed"}

// newError builds an *Error from a status and a message copied by a C helper
// (freed here).
func newError(st C.embd_status, msg *C.char) *Error {
	e := &Error{Status: Status(st)}
	if msg != nil {
		e.Message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	} else {
		e.Message = e.Status.String()
	}
	return e
}

// Version is the C library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.embd_version()) }

// Precision is the arithmetic of the encoder's dense layers, an
// embd_precision of the C library (include/embedder.h). Attention, LayerNorm,
// GELU and pooling always run in float32.
type Precision int32

// The embd_precision values.
const (
	// PrecisionDefault is the model file's own precision: int8 for files
	// converted with --dtype int8, bfloat16 for --dtype bf16 (packed), float32
	// otherwise. Only an option value:
	// Model.Precision never returns it.
	PrecisionDefault Precision = C.EMBD_PRECISION_DEFAULT
	// PrecisionF32 is float32 weights and activations: the reference numbers.
	PrecisionF32 Precision = C.EMBD_PRECISION_F32
	// PrecisionBF16 rounds weights and activations to bfloat16, with float32
	// accumulation.
	PrecisionBF16 Precision = C.EMBD_PRECISION_BF16
	// PrecisionInt8 is int8 weights (per output channel) and activations (per
	// token), with exact int32 accumulation.
	PrecisionInt8 Precision = C.EMBD_PRECISION_INT8
)

// String is the precision's name as the embd command line spells it: "f32",
// "bf16", "int8", or "default"; "Precision(N)" for an unknown value.
func (p Precision) String() string {
	if s := C.embd_precision_name(C.embd_precision(p)); s != nil {
		return C.GoString(s)
	}
	return fmt.Sprintf("Precision(%d)", int32(p))
}

// ParsePrecision parses "f32", "bf16", "int8" or "default" (ASCII
// case-insensitive); anything else gives an *Error with StatusInvalidArgument.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range []Precision{PrecisionDefault, PrecisionF32, PrecisionBF16, PrecisionInt8} {
		if strings.EqualFold(strings.TrimSpace(s), p.String()) {
			return p, nil
		}
	}
	return PrecisionDefault, &Error{Status: StatusInvalidArgument,
		Message: fmt.Sprintf("unknown precision %q (expected f32, bf16, int8 or default)", s)}
}

type config struct {
	threads    int
	maxSeqLen  int
	normalize  int // -1 model default, 0 off, 1 on
	verify     int
	precision  Precision
	dims       int
	ranges     []float32 // dims minima, then dims maxima; nil = the model's
	prompt     *string
	promptNm   *string
	matryoshka *string
	windows    bool
	overlap    int
	progress   func(done, total int) bool
}

// Option configures Open.
type Option func(*config)

// WithThreads sets the worker threads one call may use (0 = all CPUs, the default).
func WithThreads(n int) Option { return func(c *config) { c.threads = n } }

// WithMaxSeqLength overrides the model's maximum sequence length in tokens
// (0 = the model's own). Open fails (StatusInvalidArgument or StatusModel)
// when it is outside 2..the model's position-embedding count.
func WithMaxSeqLength(n int) Option { return func(c *config) { c.maxSeqLen = n } }

// WithNormalize forces L2 normalization of the vectors on or off (default:
// the model's metadata).
func WithNormalize(on bool) Option {
	return func(c *config) {
		c.normalize = 0
		if on {
			c.normalize = 1
		}
	}
}

// WithVerifyChecksums turns verification of the file's checksums at Open on
// (the default) or off.
func WithVerifyChecksums(on bool) Option {
	return func(c *config) {
		c.verify = 0
		if on {
			c.verify = 1
		}
	}
}

// WithPrecision sets the arithmetic of the encoder's dense layers (default
// PrecisionDefault, the file's own). A lower precision than the file's
// converts the weights at Open. An unknown value makes Open fail with
// StatusInvalidArgument.
func WithPrecision(p Precision) Option { return func(c *config) { c.precision = p } }

// WithDimensions keeps only the first k components of every vector
// (Matryoshka truncation; 0 = all, the default). When the model normalizes,
// each cut vector is L2-normalized again. Dim() then returns k. Open fails with
// StatusInvalidArgument when k exceeds the model's dimension.
func WithDimensions(k int) Option { return func(c *config) { c.dims = k } }

// WithMatryoshka sets how a vector is cut to WithDimensions: "truncate"
// (the default, sentence-transformers' truncate_dim) or "layer-norm"
// (nomic-embed-text-v1.5's recipe: a layer norm without affine, the cut,
// then L2 normalization; applied with or without WithDimensions). Open fails
// with StatusInvalidArgument for another name.
func WithMatryoshka(recipe string) Option { return func(c *config) { c.matryoshka = &recipe } }

// WithOutputRanges sets the per-dimension ranges of OutputInt8 and
// OutputUint8 output (sentence-transformers' ranges array: min[j], max[j]),
// overriding the ranges stored in the model file. Both slices need one value
// per output dimension (after WithDimensions), else Open fails with
// StatusInvalidArgument.
func WithOutputRanges(min, max []float32) Option {
	return func(c *config) {
		c.ranges = append(append([]float32{}, min...), max...)
		if len(min) != len(max) {
			c.ranges = append(c.ranges, 0) // odd length: refused by the library
		}
	}
}

// WithPrompt prepends prompt to every text, as sentence-transformers'
// prompt (token counts include it). When the model's pooling config says
// include_prompt false, the prompt's tokens are left out of the pooling. An
// empty prompt turns the model's default prompt off.
func WithPrompt(prompt string) Option { return func(c *config) { c.prompt = &prompt } }

// WithPromptName selects a prompt stored in the model file by name (from
// config_sentence_transformers.json), as sentence-transformers' prompt_name.
// Open fails with StatusInvalidArgument for a name the model does not store,
// or when WithPrompt is given too.
func WithPromptName(name string) Option { return func(c *config) { c.promptNm = &name } }

// WithWindows embeds texts longer than MaxSeqLength() as windows of
// MaxSeqLength() tokens, each with its own [CLS] and [SEP], consecutive
// windows sharing overlap tokens; the windows' vectors are averaged weighted
// by their token counts and normalized (when the model normalizes). Default:
// truncation. Open fails with StatusInvalidArgument unless 0 <= overlap <
// MaxSeqLength()-2.
func WithWindows(overlap int) Option {
	return func(c *config) { c.windows, c.overlap = true, overlap }
}

// WithProgress sets a function every embedding call on the model calls
// between chunks of work (at least every ~50 ms of work; with WithWindows,
// every 16 texts), on the calling goroutine, with the number of the call's
// texts whose vectors are complete and the call's number of texts. Returning
// false stops the call: it returns an error with StatusCancelled (no vectors
// are returned). f must not panic.
func WithProgress(f func(done, total int) bool) Option {
	return func(c *config) { c.progress = f }
}

// OutputPrecision is the element type of quantized vectors, an
// embd_output_precision of the C library, with the semantics of
// sentence-transformers' quantize_embeddings.
type OutputPrecision int32

// The embd_output_precision values.
const (
	// OutputFloat32 is float32 components (what Embed returns).
	OutputFloat32 OutputPrecision = C.EMBD_OUTPUT_FLOAT32
	// OutputInt8 is one int8 per component: the uint8 bucket minus 128.
	OutputInt8 OutputPrecision = C.EMBD_OUTPUT_INT8
	// OutputUint8 is one byte per component: the bucket
	// clamp(floor((x-min)/step), 0, 255) of the dimension's range, step =
	// (max-min)/255. Needs ranges (WithOutputRanges or stored in the model).
	OutputUint8 OutputPrecision = C.EMBD_OUTPUT_UINT8
	// OutputBinary is the OutputUbinary bytes minus 128, as int8.
	OutputBinary OutputPrecision = C.EMBD_OUTPUT_BINARY
	// OutputUbinary is the bits x > 0, 8 per byte, first component in the
	// most significant bit (numpy.packbits).
	OutputUbinary OutputPrecision = C.EMBD_OUTPUT_UBINARY
)

// String is the name sentence-transformers uses: "float32", "int8",
// "uint8", "binary", "ubinary"; "OutputPrecision(N)" for an unknown value.
func (p OutputPrecision) String() string {
	if s := C.embd_output_precision_name(C.embd_output_precision(p)); s != nil {
		return C.GoString(s)
	}
	return fmt.Sprintf("OutputPrecision(%d)", int32(p))
}

// Quantized holds the vectors of EmbedQuantized: RowLen bytes per text in
// Data (Dim() for int8/uint8, (Dim()+7)/8 for binary/ubinary).
type Quantized struct {
	Precision OutputPrecision
	RowLen    int
	Data      []byte
}

// Row returns text i's bytes (uint8 and ubinary).
func (q *Quantized) Row(i int) []byte { return q.Data[i*q.RowLen : (i+1)*q.RowLen : (i+1)*q.RowLen] }

// Int8Row returns text i's elements as int8 (int8 and binary).
func (q *Quantized) Int8Row(i int) []int8 {
	r := q.Row(i)
	out := make([]int8, len(r))
	for k, b := range r {
		out[k] = int8(b)
	}
	return out
}

// TextInfo tells what one text became in an embedding call.
type TextInfo struct {
	// Tokens the model saw, [CLS] and [SEP] included, after truncation.
	Tokens int
	// Truncated is true when the text had more than MaxSeqLength() tokens
	// and the rest was cut off.
	Truncated bool
}

// Model is an open model. Safe for concurrent use; Close it when done (a
// finalizer frees a forgotten one).
type Model struct {
	mu        sync.RWMutex // read-held by every call, write-held by Close
	h         *C.embd_model
	progress  cgo.Handle // of the WithProgress function; 0 = none
	dim       int
	maxSeq    int
	name      string
	precision Precision
}

// Open loads a model file (EMBD .weights or a legacy cpp_embedder file).
func Open(path string, opts ...Option) (*Model, error) {
	cfg := config{normalize: -1, verify: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.threads < 0 || cfg.maxSeqLen < 0 || cfg.dims < 0 || cfg.overlap < 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "threads, max sequence length and dimensions must not be negative"}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	// The ranges are copied by the library; pass them from C memory.
	var cranges *C.float
	if len(cfg.ranges) > 0 {
		cranges = (*C.float)(C.malloc(C.size_t(len(cfg.ranges)) * C.size_t(unsafe.Sizeof(C.float(0)))))
		defer C.free(unsafe.Pointer(cranges))
		copy(unsafe.Slice((*float32)(unsafe.Pointer(cranges)), len(cfg.ranges)), cfg.ranges)
	}
	windows := 0
	if cfg.windows {
		windows = 1
	}
	var cprompt, cpromptName *C.char
	if cfg.prompt != nil {
		cprompt = C.CString(*cfg.prompt)
		defer C.free(unsafe.Pointer(cprompt))
	}
	if cfg.promptNm != nil {
		cpromptName = C.CString(*cfg.promptNm)
		defer C.free(unsafe.Pointer(cpromptName))
	}
	var cmatryoshka *C.char
	if cfg.matryoshka != nil {
		cmatryoshka = C.CString(*cfg.matryoshka)
		defer C.free(unsafe.Pointer(cmatryoshka))
	}
	var progress cgo.Handle
	if cfg.progress != nil {
		progress = cgo.NewHandle(cfg.progress)
	}
	var h *C.embd_model
	var msg *C.char
	st := C.embd_go_open(cpath, C.size_t(cfg.threads), C.size_t(cfg.maxSeqLen), C.int(cfg.normalize),
		C.int(cfg.verify), C.embd_precision(cfg.precision), C.size_t(cfg.dims),
		cranges, C.size_t(len(cfg.ranges)), cprompt, cpromptName, C.int(windows), C.size_t(cfg.overlap),
		cmatryoshka, C.uintptr_t(progress), &h, &msg)
	if st != C.EMBD_STATUS_OK {
		if progress != 0 {
			progress.Delete()
		}
		return nil, newError(st, msg)
	}
	m := &Model{
		h:         h,
		dim:       int(C.embd_dim(h)),
		maxSeq:    int(C.embd_max_seq_length(h)),
		name:      C.GoString(C.embd_model_name(h)),
		precision: Precision(C.embd_model_precision(h)),
		progress:  progress,
	}
	runtime.SetFinalizer(m, (*Model).free)
	return m, nil
}

// free releases the C model; used by Close and the finalizer.
func (m *Model) free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		C.embd_free(m.h)
		m.h = nil
		if m.progress != 0 {
			m.progress.Delete()
			m.progress = 0
		}
	}
}

// Close frees the model after the calls running on it return. Closing twice
// is a no-op. Later calls return ErrClosed.
func (m *Model) Close() error {
	m.free()
	runtime.SetFinalizer(m, nil)
	return nil
}

// acquire read-locks the model and returns its handle, or ErrClosed.
func (m *Model) acquire() (*C.embd_model, error) {
	m.mu.RLock()
	if m.h == nil {
		m.mu.RUnlock()
		return nil, ErrClosed
	}
	return m.h, nil
}

// Dim is the number of floats per embedding (384 for all-MiniLM-L6-v2); 0
// after Close.
func (m *Model) Dim() int {
	if _, err := m.acquire(); err != nil {
		return 0
	}
	defer m.mu.RUnlock()
	return m.dim
}

// MaxSeqLength is the maximum sequence length in tokens, [CLS] and [SEP]
// included; 0 after Close.
func (m *Model) MaxSeqLength() int {
	if _, err := m.acquire(); err != nil {
		return 0
	}
	defer m.mu.RUnlock()
	return m.maxSeq
}

// Name is the model's name from its metadata.
func (m *Model) Name() string { return m.name }

// Precision is the arithmetic the model's dense layers run in: PrecisionF32,
// PrecisionBF16 or PrecisionInt8 (the WithPrecision override, else the file's
// own); PrecisionDefault after Close.
func (m *Model) Precision() Precision {
	if _, err := m.acquire(); err != nil {
		return PrecisionDefault
	}
	defer m.mu.RUnlock()
	return m.precision
}

// Embed returns one vector of Dim() floats per text, computed as one batch
// (each text gets exactly the vector it gets alone). Texts are UTF-8 (invalid
// UTF-8 gives StatusInvalidUTF8); NUL bytes are ordinary text.
func (m *Model) Embed(texts []string) ([][]float32, error) {
	v, _, err := m.embed(texts, false, nil)
	return v, err
}

// Truncation is what a call does with a text longer than MaxSeqLength()
// tokens (CallOptions.Truncation).
type Truncation int32

const (
	// TruncateRight keeps the first tokens (the default).
	TruncateRight Truncation = C.EMBD_TRUNCATION_RIGHT
	// TruncateLeft keeps the last tokens.
	TruncateLeft Truncation = C.EMBD_TRUNCATION_LEFT
	// TruncateRefuse fails the call with StatusLimitExceeded.
	TruncateRefuse Truncation = C.EMBD_TRUNCATION_REFUSE
)

// CallOptions are the options of one EmbedWith call on an open model (no
// second Open for queries and documents); the zero value changes nothing.
type CallOptions struct {
	// Normalize overrides the model's L2 normalization; nil keeps it.
	Normalize *bool
	// Dimensions keeps the first components of the model's full vector
	// (renormalized when normalizing); 0 means Dim().
	Dimensions int
	// Prompt replaces the prompt the model was opened with ("" = none); nil
	// keeps it.
	Prompt *string
	// PromptName picks one of the model's stored prompts; nil: unset.
	PromptName *string
	// Truncation of texts longer than MaxSeqLength().
	Truncation Truncation
}

// cCallOptions are CallOptions as the C helpers take them.
type cCallOptions struct {
	normalize          C.int
	prompt, promptName *C.char
}

func (o *CallOptions) toC() cCallOptions {
	c := cCallOptions{normalize: -1}
	if o.Normalize != nil {
		c.normalize = 0
		if *o.Normalize {
			c.normalize = 1
		}
	}
	if o.Prompt != nil {
		c.prompt = C.CString(*o.Prompt)
	}
	if o.PromptName != nil {
		c.promptName = C.CString(*o.PromptName)
	}
	return c
}

func (c cCallOptions) free() {
	C.free(unsafe.Pointer(c.prompt))
	C.free(unsafe.Pointer(c.promptName))
}

// EmbedTokens returns each text's token vectors, un-pooled, as
// sentence-transformers' encode(output_value="token_embeddings"): out[i][t]
// is the last hidden state of token t of text i ([CLS]/[SEP] and the
// prompt's tokens included), o.Dimensions floats (Dim() when 0). The
// prompt, truncation and dimensions of o apply as in EmbedWith; the vectors
// are normalized only when o.Normalize is true. The info is per text.
func (m *Model) EmbedTokens(texts []string, o CallOptions) ([][][]float32, []TextInfo, error) {
	h, err := m.acquire()
	if err != nil {
		return nil, nil, err
	}
	defer m.mu.RUnlock()
	if len(texts) == 0 {
		return [][][]float32{}, []TextInfo{}, nil
	}
	if o.Dimensions < 0 {
		return nil, nil, &Error{Status: StatusInvalidArgument, Message: "dimensions must not be negative"}
	}
	buf, lens := packTexts(texts)
	c := o.toC()
	defer c.free()
	tokens := make([]C.size_t, len(texts))
	truncated := make([]C.uint8_t, len(texts))
	var need C.size_t
	var msg *C.char
	call := func(out *C.float, outLen C.size_t) C.embd_status {
		return C.embd_go_encode_with(1, h, c.normalize, C.size_t(o.Dimensions), c.prompt, c.promptName,
			C.embd_truncation(o.Truncation), (*C.char)(unsafe.Pointer(&buf[0])), &lens[0],
			C.size_t(len(texts)), out, outLen, &need, &tokens[0], &truncated[0], &msg)
	}
	// The size first (the texts' token counts), then the vectors.
	if st := call(nil, 0); st != C.EMBD_STATUS_BUFFER_TOO_SMALL {
		if st == C.EMBD_STATUS_OK {
			return nil, nil, &Error{Status: StatusInternal, Message: "embd_encode_tokens gave no size"}
		}
		return nil, nil, newError(st, msg)
	}
	flat := make([]float32, int(need))
	if st := call((*C.float)(unsafe.Pointer(&flat[0])), need); st != C.EMBD_STATUS_OK {
		return nil, nil, newError(st, msg)
	}
	total := 0
	for _, t := range tokens {
		total += int(t)
	}
	dim := len(flat) / total
	out := make([][][]float32, len(texts))
	info := make([]TextInfo, len(texts))
	at := 0
	for i, t := range tokens {
		out[i] = make([][]float32, int(t))
		for k := range out[i] {
			out[i][k] = flat[at : at+dim : at+dim]
			at += dim
		}
		info[i] = TextInfo{Tokens: int(t), Truncated: truncated[i] != 0}
	}
	return out, info, nil
}

// EmbedWith is EmbedWithInfo under per-call options: each vector has
// o.Dimensions floats (Dim() when 0).
func (m *Model) EmbedWith(texts []string, o CallOptions) ([][]float32, []TextInfo, error) {
	return m.embed(texts, true, &o)
}

// EmbedWithInfo is Embed, also returning for each text its token count and
// whether it was truncated.
func (m *Model) EmbedWithInfo(texts []string) ([][]float32, []TextInfo, error) {
	return m.embed(texts, true, nil)
}

func (m *Model) embed(texts []string, withInfo bool, o *CallOptions) ([][]float32, []TextInfo, error) {
	h, err := m.acquire()
	if err != nil {
		return nil, nil, err
	}
	defer m.mu.RUnlock()
	if len(texts) == 0 {
		if withInfo {
			return [][]float32{}, []TextInfo{}, nil
		}
		return [][]float32{}, nil, nil
	}
	buf, lens := packTexts(texts)
	dim := m.dim
	if o != nil && o.Dimensions < 0 {
		return nil, nil, &Error{Status: StatusInvalidArgument, Message: "dimensions must not be negative"}
	}
	if o != nil && o.Dimensions > 0 {
		dim = o.Dimensions
	}
	flat := make([]float32, len(texts)*dim)
	var tokens []C.size_t
	var truncated []C.uint8_t
	var tokPtr *C.size_t
	var truncPtr *C.uint8_t
	if withInfo {
		tokens = make([]C.size_t, len(texts))
		truncated = make([]C.uint8_t, len(texts))
		tokPtr, truncPtr = &tokens[0], &truncated[0]
	}
	var msg *C.char
	var st C.embd_status
	if o == nil {
		st = C.embd_go_encode(h, (*C.char)(unsafe.Pointer(&buf[0])), &lens[0], C.size_t(len(texts)),
			(*C.float)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)), tokPtr, truncPtr, &msg)
	} else {
		c := o.toC()
		defer c.free()
		st = C.embd_go_encode_with(0, h, c.normalize, C.size_t(o.Dimensions), c.prompt, c.promptName,
			C.embd_truncation(o.Truncation), (*C.char)(unsafe.Pointer(&buf[0])), &lens[0],
			C.size_t(len(texts)), (*C.float)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)),
			nil, tokPtr, truncPtr, &msg)
	}
	if st != C.EMBD_STATUS_OK {
		return nil, nil, newError(st, msg)
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	var info []TextInfo
	if withInfo {
		info = make([]TextInfo, len(texts))
		for i := range info {
			info[i] = TextInfo{Tokens: int(tokens[i]), Truncated: truncated[i] != 0}
		}
	}
	return out, info, nil
}

// EmbedQuantized embeds texts and returns the vectors in output precision p
// (OutputInt8, OutputUint8, OutputBinary or OutputUbinary), as
// sentence-transformers' quantize_embeddings would turn Embed's vectors.
// OutputInt8 and OutputUint8 need ranges (WithOutputRanges, or stored in the
// model file by `embd convert --output-ranges-corpus`), else
// StatusInvalidArgument. With withInfo, the texts' TextInfo are returned too.
func (m *Model) EmbedQuantized(texts []string, p OutputPrecision, withInfo bool) (*Quantized, []TextInfo, error) {
	if p == OutputFloat32 {
		return nil, nil, &Error{Status: StatusInvalidArgument, Message: "OutputFloat32 is not quantized: use Embed"}
	}
	h, err := m.acquire()
	if err != nil {
		return nil, nil, err
	}
	defer m.mu.RUnlock()
	// embd_output_len's rule; an unknown p is refused by the encode call below.
	rowLen := m.dim
	if p == OutputBinary || p == OutputUbinary {
		rowLen = (m.dim + 7) / 8
	}
	q := &Quantized{Precision: p, RowLen: rowLen, Data: make([]byte, len(texts)*rowLen)}
	if len(texts) == 0 {
		return q, []TextInfo{}, nil
	}
	buf, lens := packTexts(texts)
	var tokens []C.size_t
	var truncated []C.uint8_t
	var tokPtr *C.size_t
	var truncPtr *C.uint8_t
	if withInfo {
		tokens = make([]C.size_t, len(texts))
		truncated = make([]C.uint8_t, len(texts))
		tokPtr, truncPtr = &tokens[0], &truncated[0]
	}
	var msg *C.char
	st := C.embd_go_encode_quantized(h, (*C.char)(unsafe.Pointer(&buf[0])), &lens[0], C.size_t(len(texts)),
		C.embd_output_precision(p), unsafe.Pointer(&q.Data[0]), C.size_t(len(q.Data)), tokPtr, truncPtr, &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, nil, newError(st, msg)
	}
	var info []TextInfo
	if withInfo {
		info = make([]TextInfo, len(texts))
		for i := range info {
			info[i] = TextInfo{Tokens: int(tokens[i]), Truncated: truncated[i] != 0}
		}
	}
	return q, info, nil
}

// EmbedOne returns the vector of one text.
func (m *Model) EmbedOne(text string) ([]float32, error) {
	v, err := m.Embed([]string{text})
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// Tokenize returns the token ids the model sees for text: [CLS], the
// WordPiece ids truncated to MaxSeqLength()-2, [SEP].
func (m *Model) Tokenize(text string) ([]uint32, error) {
	h, err := m.acquire()
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	ids := make([]uint32, m.maxSeq+2) // never more than maxSeq ids
	var n C.size_t
	var msg *C.char
	st := C.embd_go_tokenize(h, text, (*C.uint32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), &n, &msg)
	if st != C.EMBD_STATUS_OK {
		return nil, newError(st, msg)
	}
	return ids[:int(n):int(n)], nil
}

// CountTokens returns len(Tokenize(text)) without building the ids.
func (m *Model) CountTokens(text string) (int, error) {
	h, err := m.acquire()
	if err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	var n C.size_t
	var msg *C.char
	st := C.embd_go_count_tokens(h, text, &n, &msg)
	if st != C.EMBD_STATUS_OK {
		return 0, newError(st, msg)
	}
	return int(n), nil
}

// CosineSimilarity returns the cosine similarity of two vectors of equal
// length (0 when either is all zeros); it panics if the lengths differ.
func CosineSimilarity(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("embedder: CosineSimilarity of vectors of lengths %d and %d", len(a), len(b)))
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(dot / (math.Sqrt(na) * math.Sqrt(nb)))
}

package embedder

// The sparse (SPLADE, BGE-M3 lexical weights) and multi-vector (ColBERT,
// BGE-M3) outputs: embd_encode_sparse, embd_encode_multi_vector,
// embd_has_output and embd_multi_vector_dim of the C library.

/*
#include <stdlib.h>
#include <string.h>
#include <embedder.h>
#include "embd_go.h"

// As embd_go_encode_with, around embd_encode_sparse (sparse 1: offsets,
// indices, values, capacity, *count the entry count) or
// embd_encode_multi_vector (sparse 0: values the floats, capacity their
// room, *count the float count, offsets the vectors per text). The error is
// copied on any failure but EMBD_STATUS_BUFFER_TOO_SMALL, which the Go side
// answers with one call at the size the library gave.
static embd_status embd_go_encode_output(int sparse, const embd_model *m, int normalize, size_t dims,
                                         const char *prompt, const char *prompt_name,
                                         embd_truncation truncation, embd_task task, const char *buf,
                                         const size_t *lens, size_t n, size_t top_k, size_t *offsets,
                                         uint32_t *indices, float *values, size_t capacity,
                                         size_t *count, char **err) {
	*err = NULL;
	*count = 0;
	embd_status st;
	embd_call_options *o = embd_go_call_options(normalize, dims, prompt, prompt_name, truncation, &st, err);
	if (o == NULL) return st;
	embd_text *texts = embd_go_texts(buf, lens, n);
	if (texts == NULL) {
		embd_call_options_free(o);
		return EMBD_STATUS_OUT_OF_MEMORY;
	}
	if (sparse) {
		st = embd_encode_sparse(m, o, task, texts, n, top_k, offsets, indices, values, capacity, count);
	} else {
		st = embd_encode_multi_vector(m, o, task, texts, n, values, capacity, count, offsets);
	}
	if (st != EMBD_STATUS_OK && st != EMBD_STATUS_BUFFER_TOO_SMALL) *err = embd_go_copy_error();
	free(texts);
	embd_call_options_free(o);
	return st;
}

static int embd_go_has_output(const embd_model *m, const char *name) {
	return embd_has_output(m, name);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Task says whether a call encodes queries or documents, an embd_task of the
// C library. It chooses the model's stored prompt of that name (unless the
// CallOptions set one), an inference-free SPLADE's query weights, and
// ColBERT's query or document markers.
type Task int32

// The embd_task values.
const (
	// TaskNone is neither: ColBERT then encodes documents, a Router
	// (inference-free SPLADE) takes its default route.
	TaskNone Task = C.EMBD_TASK_NONE
	// TaskQuery encodes queries (sentence-transformers' encode_query).
	TaskQuery Task = C.EMBD_TASK_QUERY
	// TaskDocument encodes documents (sentence-transformers' encode_document).
	TaskDocument Task = C.EMBD_TASK_DOCUMENT
)

// String is "none", "query" or "document"; "Task(N)" for an unknown value.
func (t Task) String() string {
	switch t {
	case TaskNone:
		return "none"
	case TaskQuery:
		return "query"
	case TaskDocument:
		return "document"
	}
	return fmt.Sprintf("Task(%d)", int32(t))
}

// The output names of HasOutput and Outputs.
const (
	OutputDense       = "dense"
	OutputSparse      = "sparse"
	OutputMultiVector = "multi-vector"
)

// HasOutput tells whether the model has the output name: OutputDense
// ("dense"), OutputSparse ("sparse": SPLADE, BGE-M3) or OutputMultiVector
// ("multi-vector": ColBERT, BGE-M3). False for any other name and after Close.
func (m *Model) HasOutput(name string) bool {
	h, err := m.acquire()
	if err != nil {
		return false
	}
	defer m.mu.RUnlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.embd_go_has_output(h, cname) == 1
}

// Outputs lists the model's outputs in the order dense, sparse,
// multi-vector (e.g. [sparse] for SPLADE, [dense sparse multi-vector] for
// BGE-M3); nil after Close.
func (m *Model) Outputs() []string {
	var out []string
	for _, name := range []string{OutputDense, OutputSparse, OutputMultiVector} {
		if m.HasOutput(name) {
			out = append(out, name)
		}
	}
	return out
}

// MultiVectorDim is the number of floats per vector of the multi-vector
// output; 0 for a model without it and after Close.
func (m *Model) MultiVectorDim() int {
	h, err := m.acquire()
	if err != nil {
		return 0
	}
	defer m.mu.RUnlock()
	return int(C.embd_multi_vector_dim(h))
}

// SparseVector is one text's sparse vector: vocabulary ids in ascending
// order, with their weights at the same positions.
type SparseVector struct {
	Indices []uint32
	Values  []float32
}

// Len is the number of non-zero entries.
func (s SparseVector) Len() int { return len(s.Indices) }

// Dot is the dot product of two sparse vectors (the score of SPLADE and of
// BGE-M3's lexical matching), accumulated in float64.
func (s SparseVector) Dot(other SparseVector) float32 {
	var acc float64
	i, j := 0, 0
	for i < len(s.Indices) && j < len(other.Indices) {
		switch a, b := s.Indices[i], other.Indices[j]; {
		case a < b:
			i++
		case a > b:
			j++
		default:
			acc += float64(s.Values[i]) * float64(other.Values[j])
			i++
			j++
		}
	}
	return float32(acc)
}

// MultiVector is one text's vectors (ColBERT): Rows() vectors of Dim
// floats, row-major in Data.
type MultiVector struct {
	Dim  int
	Data []float32
}

// Rows is the number of vectors.
func (v MultiVector) Rows() int {
	if v.Dim == 0 {
		return 0
	}
	return len(v.Data) / v.Dim
}

// Row returns vector i (a slice of Data).
func (v MultiVector) Row(i int) []float32 {
	return v.Data[i*v.Dim : (i+1)*v.Dim : (i+1)*v.Dim]
}

// MaxSim is ColBERT's late-interaction score of the query v against doc:
// the sum over v's vectors of the largest dot product with one of doc's
// vectors. 0 when doc has no vectors; it panics if the dimensions differ.
func (v MultiVector) MaxSim(doc MultiVector) float32 {
	if v.Dim != doc.Dim {
		panic(fmt.Sprintf("embedder: MaxSim of vectors of dimensions %d and %d", v.Dim, doc.Dim))
	}
	if doc.Rows() == 0 {
		return 0
	}
	var total float32
	for i := 0; i < v.Rows(); i++ {
		q := v.Row(i)
		best := float32(0)
		for j := 0; j < doc.Rows(); j++ {
			d := doc.Row(j)
			var dot float32
			for k := range q {
				dot += q[k] * d[k]
			}
			if j == 0 || dot > best {
				best = dot
			}
		}
		total += best
	}
	return total
}

// SparseOptions are the options of one EmbedSparse call; the zero value
// encodes with no task, the model's own top-k and the model's prompt and
// truncation.
type SparseOptions struct {
	// Task: TaskQuery makes an inference-free SPLADE use its static query
	// weights (no encoder); it also picks the model's stored prompt of that
	// name.
	Task Task
	// TopK keeps only the TopK largest weights of each text; 0 means the
	// model's own setting (sentence-transformers' max_active_dims, if any;
	// else every non-zero weight).
	TopK int
	// CallOptions: Prompt, PromptName and Truncation apply; Dimensions and
	// Normalize do not concern sparse vectors.
	CallOptions
}

// Buffers of the output calls: up to sureEntries elements, a capacity that
// surely suffices (a size query would cost a whole encode); beyond it, a
// guess of sparseGuess entries or multiVectorGuess vectors per text (at least
// sureEntries elements), and when the library reports more, one more call at
// the size it gives. (Variables for the tests.)
var (
	sureEntries      = 1 << 22
	sparseGuess      = 256
	multiVectorGuess = 64
)

// EmbedSparse returns one sparse vector per text (SPLADE, BGE-M3's lexical
// weights), computed as one batch (each text gets the vector it gets alone).
// A model without the sparse output gives StatusUnsupported, the message
// naming its outputs.
func (m *Model) EmbedSparse(texts []string, o SparseOptions) ([]SparseVector, error) {
	h, err := m.acquire()
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	if o.TopK < 0 || o.Dimensions < 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "top-k and dimensions must not be negative"}
	}
	if len(texts) == 0 {
		return []SparseVector{}, nil
	}
	n := len(texts)
	// At most min(vocabulary, top-k) entries per text.
	k := int(C.embd_vocab_size(h))
	if o.TopK > 0 && (k == 0 || o.TopK < k) {
		k = o.TopK
	}
	capacity := n * k
	if k == 0 {
		capacity = n * sparseGuess
	} else if capacity > sureEntries {
		capacity = sureEntries
		if g := n * sparseGuess; g > capacity {
			capacity = g
		}
		if capacity > n*k {
			capacity = n * k
		}
	}
	buf, lens := packTexts(texts)
	c := o.CallOptions.toC()
	defer c.free()
	offsets := make([]C.size_t, n+1)
	var indices []uint32
	var values []float32
	var nnz C.size_t
	var msg *C.char
	var st C.embd_status
	for try := 0; try < 2; try++ {
		indices = make([]uint32, max1(capacity))
		values = make([]float32, max1(capacity))
		st = C.embd_go_encode_output(1, h, c.normalize, C.size_t(o.Dimensions), c.prompt, c.promptName,
			C.embd_truncation(o.Truncation), C.embd_task(o.Task), (*C.char)(unsafe.Pointer(&buf[0])),
			&lens[0], C.size_t(n), C.size_t(o.TopK), &offsets[0],
			(*C.uint32_t)(unsafe.Pointer(&indices[0])), (*C.float)(unsafe.Pointer(&values[0])),
			C.size_t(capacity), &nnz, &msg)
		if st != C.EMBD_STATUS_BUFFER_TOO_SMALL {
			break
		}
		capacity = int(nnz)
	}
	if st == C.EMBD_STATUS_BUFFER_TOO_SMALL {
		return nil, &Error{Status: StatusBufferTooSmall,
			Message: fmt.Sprintf("embd_encode_sparse asked for %d entries twice", int(nnz))}
	}
	if st != C.EMBD_STATUS_OK {
		return nil, newError(st, msg)
	}
	total := int(nnz)
	if total < len(indices) {
		// Keep only the entries, not the room.
		indices = append([]uint32(nil), indices[:total]...)
		values = append([]float32(nil), values[:total]...)
	}
	out := make([]SparseVector, n)
	for i := range out {
		a, b := int(offsets[i]), int(offsets[i+1])
		out[i] = SparseVector{Indices: indices[a:b:b], Values: values[a:b:b]}
	}
	return out, nil
}

// EmbedMultiVector returns each text's vectors (ColBERT, BGE-M3's
// colbert_vecs), computed as one batch (each text gets the vectors it gets
// alone). With TaskQuery, ColBERT's query marker and expansion (a query is
// padded with mask tokens to its fixed length); otherwise its document
// marker and skip-list. o's Prompt, PromptName and Truncation apply. A model
// without the multi-vector output gives StatusUnsupported.
func (m *Model) EmbedMultiVector(texts []string, task Task, o CallOptions) ([]MultiVector, error) {
	h, err := m.acquire()
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	if o.Dimensions < 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "dimensions must not be negative"}
	}
	if len(texts) == 0 {
		return []MultiVector{}, nil
	}
	n := len(texts)
	dim := int(C.embd_multi_vector_dim(h))
	// One vector per token at most (a query's expansion may exceed it: then
	// one more call at the size the library gives).
	capacity := n * m.maxSeq * dim
	if capacity > sureEntries {
		capacity = sureEntries
		if g := n * multiVectorGuess * dim; g > capacity {
			capacity = g
		}
	}
	buf, lens := packTexts(texts)
	c := o.toC()
	defer c.free()
	vectors := make([]C.size_t, n)
	var flat []float32
	var nFloats C.size_t
	var msg *C.char
	var st C.embd_status
	for try := 0; try < 2; try++ {
		flat = make([]float32, max1(capacity))
		st = C.embd_go_encode_output(0, h, c.normalize, C.size_t(o.Dimensions), c.prompt, c.promptName,
			C.embd_truncation(o.Truncation), C.embd_task(task), (*C.char)(unsafe.Pointer(&buf[0])),
			&lens[0], C.size_t(n), 0, &vectors[0], nil, (*C.float)(unsafe.Pointer(&flat[0])),
			C.size_t(capacity), &nFloats, &msg)
		if st != C.EMBD_STATUS_BUFFER_TOO_SMALL {
			break
		}
		capacity = int(nFloats)
	}
	if st == C.EMBD_STATUS_BUFFER_TOO_SMALL {
		return nil, &Error{Status: StatusBufferTooSmall,
			Message: fmt.Sprintf("embd_encode_multi_vector asked for %d floats twice", int(nFloats))}
	}
	if st != C.EMBD_STATUS_OK {
		return nil, newError(st, msg)
	}
	used := int(nFloats)
	if used < len(flat) {
		flat = append([]float32(nil), flat[:used]...)
	}
	rows := 0
	for _, v := range vectors {
		rows += int(v)
	}
	if rows > 0 {
		dim = used / rows // the floats per vector of this call
	}
	out := make([]MultiVector, n)
	at := 0
	for i, v := range vectors {
		end := at + int(v)*dim
		out[i] = MultiVector{Dim: dim, Data: flat[at:end:end]}
		at = end
	}
	return out, nil
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

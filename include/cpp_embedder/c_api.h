/* cpp_embedder/c_api.h: the cpp_embedder C API, implemented by `embedder`.
 * SPDX-License-Identifier: MIT
 *
 * Drop-in replacement for cpp_embedder's include/bindings/c_api.h: the same 29
 * functions, signatures, types, macros and error-code values. Link against
 * libembedder instead of libcpp_embedder. Hand-written (not generated);
 * c_tests check it compiles alone as C99/C11/C++17 and that every function
 * links.
 *
 * Behaviour follows cpp_embedder except where cpp_embedder had bugs; see
 * docs/C_API.md, "cpp_embedder compatibility". In short:
 *  - embeddings match sentence-transformers (theirs did not);
 *  - the `normalize` flag of *_ex is honoured both ways; `num_threads` is
 *    honoured; one handle is really safe to use from many threads at once;
 *  - the vocabulary comes from the model file (a sibling `<stem>.vocab` is read
 *    only when the file has none); embedder_create_with_vocab checks that the
 *    given vocab equals the file's;
 *  - load failures report the specific error code (10 bad magic, 13 checksum,
 *    3 malformed, ...) instead of always 1;
 *  - freed or foreign handles are detected (CPP_EMBEDDER_ERROR_INVALID_INPUT)
 *    instead of crashing; the TokenizerHandle stays valid across embedder_load;
 *  - embedder_get_dim / embedder_get_vocab_size return 0 when no model is
 *    loaded (the dimension is a property of the model);
 *  - tokenizer_decode honours skip_special.
 *
 * Thread safety: every function may be called from any thread. All calls
 * taking an EmbedderHandle or TokenizerHandle may run concurrently on the same
 * handle, except embedder_destroy (and embedder_load, which atomically swaps
 * the model: calls running at that moment finish with the old model). The
 * error code and message are per thread.
 */
#ifndef CPP_EMBEDDER_C_API_H
#define CPP_EMBEDDER_C_API_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(CPP_EMBEDDER_BUILD_SHARED)
#    define CPP_EMBEDDER_API __declspec(dllexport)
#  else
#    define CPP_EMBEDDER_API __declspec(dllimport)
#  endif
#else
#  define CPP_EMBEDDER_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque embedder handle; create with embedder_create*, free with embedder_destroy. */
typedef void* EmbedderHandle;
/** Borrowed tokenizer of an EmbedderHandle (embedder_get_tokenizer); never destroy it. */
typedef void* TokenizerHandle;

/** all-MiniLM-L6-v2 constants (other models: ask embedder_get_dim etc.). */
#define CPP_EMBEDDER_DIM 384
#define CPP_EMBEDDER_VOCAB_SIZE 30522
#define CPP_EMBEDDER_MAX_SEQ_LENGTH 512
#define CPP_EMBEDDER_NUM_LAYERS 6
#define CPP_EMBEDDER_NUM_ATTENTION_HEADS 12

/** Error codes, returned as int and by embedder_get_error_code(). */
typedef enum {
    CPP_EMBEDDER_OK = 0,
    CPP_EMBEDDER_ERROR_FILE_NOT_FOUND = 1,
    CPP_EMBEDDER_ERROR_FILE_READ = 2,
    CPP_EMBEDDER_ERROR_FILE_FORMAT = 3,
    CPP_EMBEDDER_ERROR_INVALID_MAGIC = 10,
    CPP_EMBEDDER_ERROR_UNSUPPORTED_VERSION = 11,
    CPP_EMBEDDER_ERROR_WEIGHT_MISMATCH = 12,
    CPP_EMBEDDER_ERROR_CHECKSUM_MISMATCH = 13,
    CPP_EMBEDDER_ERROR_VOCAB_NOT_LOADED = 20,
    CPP_EMBEDDER_ERROR_TOKEN_NOT_FOUND = 21,
    CPP_EMBEDDER_ERROR_SEQUENCE_TOO_LONG = 22,
    CPP_EMBEDDER_ERROR_MODEL_NOT_LOADED = 30,
    CPP_EMBEDDER_ERROR_INVALID_INPUT = 31,
    CPP_EMBEDDER_ERROR_COMPUTATION = 32,
    CPP_EMBEDDER_ERROR_ALLOCATION_FAILED = 40,
    CPP_EMBEDDER_ERROR_INVALID_CONFIG = 50,
    CPP_EMBEDDER_ERROR_NULL_POINTER = 60,
    CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL = 61,
    CPP_EMBEDDER_ERROR_UNKNOWN = 99
} CppEmbedderError;

/* ---- version and errors ------------------------------------------------ */

/** "1.0.0": the cpp_embedder API version implemented. Static, do not free. */
CPP_EMBEDDER_API const char* embedder_version(void);
/** Build description naming this library. Static, do not free. */
CPP_EMBEDDER_API const char* embedder_build_info(void);
/** Last error message of the calling thread; "" (never NULL) when none. Valid until the next call on this thread. */
CPP_EMBEDDER_API const char* embedder_get_error(void);
/** Last error code of the calling thread (CPP_EMBEDDER_OK when none). */
CPP_EMBEDDER_API CppEmbedderError embedder_get_error_code(void);
/** Resets the calling thread's error code and message. */
CPP_EMBEDDER_API void embedder_clear_error(void);

/* ---- lifetime ----------------------------------------------------------- */

/** Same as embedder_create_with_config(weights_path, 0, 1, 0). */
CPP_EMBEDDER_API EmbedderHandle embedder_create(const char* weights_path);
/** Creates a handle and loads the model. NULL or "" path: a handle with no
 *  model (use embedder_load). max_seq_length 0: the model's own (256 for
 *  MiniLM); above the model's limit fails with CPP_EMBEDDER_ERROR_INVALID_CONFIG.
 *  normalize: default of embedder_embed/_batch. num_threads 0: all CPUs.
 *  Returns NULL on failure (see embedder_get_error_code). */
CPP_EMBEDDER_API EmbedderHandle embedder_create_with_config(const char* weights_path,
                                                            uint32_t max_seq_length,
                                                            int normalize,
                                                            uint32_t num_threads);
/** Like embedder_create, with a vocab.txt that must equal the model file's
 *  vocabulary (CPP_EMBEDDER_ERROR_WEIGHT_MISMATCH otherwise) or that supplies
 *  it when the file has none. NULL or "" vocab_path: same as embedder_create. */
CPP_EMBEDDER_API EmbedderHandle embedder_create_with_vocab(const char* weights_path,
                                                           const char* vocab_path);
/** Loads (or replaces) the model of a handle with the handle's settings. On
 *  failure the previous model, if any, stays loaded. */
CPP_EMBEDDER_API CppEmbedderError embedder_load(EmbedderHandle handle, const char* weights_path);
/** Destroys a handle. NULL is fine; a freed handle is detected and ignored. */
CPP_EMBEDDER_API void embedder_destroy(EmbedderHandle handle);
/** 1 if a model is loaded, else 0 (also for NULL). */
CPP_EMBEDDER_API int embedder_is_loaded(EmbedderHandle handle);
/** Embedding dimension (384 for MiniLM); 0 for NULL or no model. */
CPP_EMBEDDER_API uint32_t embedder_get_dim(EmbedderHandle handle);
/** Effective maximum sequence length; 0 for NULL. */
CPP_EMBEDDER_API uint32_t embedder_get_max_seq_length(EmbedderHandle handle);
/** Vocabulary size; 0 for NULL or no model. */
CPP_EMBEDDER_API uint32_t embedder_get_vocab_size(EmbedderHandle handle);

/* ---- embedding ---------------------------------------------------------- */

/** Embeds one NUL-terminated UTF-8 text into output[0..dim) using the
 *  handle's normalize setting. output_size is in floats. */
CPP_EMBEDDER_API CppEmbedderError embedder_embed(EmbedderHandle handle, const char* text,
                                                 float* output, uint32_t output_size);
/** embedder_embed with an explicit normalize flag (0: raw pooled vector,
 *  non-zero: unit length). */
CPP_EMBEDDER_API CppEmbedderError embedder_embed_ex(EmbedderHandle handle, const char* text,
                                                    float* output, uint32_t output_size,
                                                    int normalize);
/** Embeds num_texts texts into a row-major [num_texts, dim] block, using the
 *  handle's normalize setting. num_texts 0 returns OK. */
CPP_EMBEDDER_API CppEmbedderError embedder_embed_batch(EmbedderHandle handle, const char** texts,
                                                       uint32_t num_texts, float* output,
                                                       uint32_t output_size);
/** embedder_embed_batch with an explicit normalize flag. */
CPP_EMBEDDER_API CppEmbedderError embedder_embed_batch_ex(EmbedderHandle handle, const char** texts,
                                                          uint32_t num_texts, float* output,
                                                          uint32_t output_size, int normalize);

/* ---- tokenizer ---------------------------------------------------------- */

/** The handle's tokenizer (borrowed; never destroy). NULL for NULL or when no
 *  model is loaded. Invalid after embedder_destroy (detected). */
CPP_EMBEDDER_API TokenizerHandle embedder_get_tokenizer(EmbedderHandle handle);
/** Writes [CLS] ids [SEP] truncated to max_length (0: 256; 1: 2; above 2^20:
 *  CPP_EMBEDDER_ERROR_SEQUENCE_TOO_LONG) and padded with [PAD] to exactly
 *  max_length ids; *actual_length = max_length. */
CPP_EMBEDDER_API CppEmbedderError tokenizer_encode(TokenizerHandle tokenizer, const char* text,
                                                   uint32_t* output, uint32_t output_size,
                                                   uint32_t* actual_length, uint32_t max_length);
/** Decodes ids into a NUL-terminated string (output_size >= length + 1);
 *  skip_special non-zero drops [PAD] [UNK] [CLS] [SEP] [MASK]. */
CPP_EMBEDDER_API CppEmbedderError tokenizer_decode(TokenizerHandle tokenizer, const uint32_t* token_ids,
                                                   uint32_t num_tokens, char* output,
                                                   uint32_t output_size, int skip_special);
/** Special-token ids (101/102/0/100 for BERT uncased); 0 for NULL. */
CPP_EMBEDDER_API uint32_t tokenizer_cls_token_id(TokenizerHandle tokenizer);
CPP_EMBEDDER_API uint32_t tokenizer_sep_token_id(TokenizerHandle tokenizer);
CPP_EMBEDDER_API uint32_t tokenizer_pad_token_id(TokenizerHandle tokenizer);
CPP_EMBEDDER_API uint32_t tokenizer_unk_token_id(TokenizerHandle tokenizer);

/* ---- vector math (pure, re-entrant) ------------------------------------ */

/** Cosine similarity; 0 for NULL, dim 0 or a zero vector. */
CPP_EMBEDDER_API float embedder_cosine_similarity(const float* a, const float* b, uint32_t dim);
/** L2-normalizes in place; unchanged when the norm is ~0. */
CPP_EMBEDDER_API void embedder_normalize(float* embedding, uint32_t dim);
/** L2 norm; 0 for NULL or dim 0. */
CPP_EMBEDDER_API float embedder_norm(const float* embedding, uint32_t dim);
/** Dot product; 0 for NULL or dim 0. */
CPP_EMBEDDER_API float embedder_dot_product(const float* a, const float* b, uint32_t dim);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* CPP_EMBEDDER_C_API_H */

/* The headers compile alone (C99/C11, -Wall -Wextra -Werror -pedantic), twice,
 * every declared function links, and the version macros equal the runtime. */
#include "embedder.h"
#include "embedder.h"
#include "cpp_embedder/c_api.h"
#include "cpp_embedder/c_api.h"

#include <stdio.h>
#include <string.h>

typedef void (*any_fn)(void);

int main(void) {
    int fails = 0;
    /* Every export of both headers (also checks they link). */
    any_fn fns[] = {
        (any_fn)&embd_options_new, (any_fn)&embd_options_free,
        (any_fn)&embd_options_set_threads, (any_fn)&embd_options_set_max_seq_length,
        (any_fn)&embd_options_set_normalize, (any_fn)&embd_options_set_verify_checksums,
        (any_fn)&embd_options_set_prepack_weights, (any_fn)&embd_options_set_precision,
        (any_fn)&embd_model_precision, (any_fn)&embd_precision_name,
        (any_fn)&embd_open, (any_fn)&embd_free, (any_fn)&embd_dim,
        (any_fn)&embd_max_seq_length, (any_fn)&embd_model_name,
        (any_fn)&embd_num_layers, (any_fn)&embd_num_heads, (any_fn)&embd_vocab_size,
        (any_fn)&embd_pooling, (any_fn)&embd_normalizes, (any_fn)&embd_encode,
        (any_fn)&embd_encode_texts, (any_fn)&embd_tokenize,
        (any_fn)&embd_count_tokens, (any_fn)&embd_similarity,
        (any_fn)&embd_last_error, (any_fn)&embd_status_str,
        (any_fn)&embd_version, (any_fn)&embd_version_number,
        /* cpp_embedder compatibility */
        (any_fn)&embedder_version, (any_fn)&embedder_build_info,
        (any_fn)&embedder_get_error, (any_fn)&embedder_get_error_code,
        (any_fn)&embedder_clear_error, (any_fn)&embedder_create,
        (any_fn)&embedder_create_with_config, (any_fn)&embedder_create_with_vocab,
        (any_fn)&embedder_load, (any_fn)&embedder_destroy,
        (any_fn)&embedder_is_loaded, (any_fn)&embedder_get_dim,
        (any_fn)&embedder_get_max_seq_length, (any_fn)&embedder_get_vocab_size,
        (any_fn)&embedder_embed, (any_fn)&embedder_embed_ex,
        (any_fn)&embedder_embed_batch, (any_fn)&embedder_embed_batch_ex,
        (any_fn)&embedder_get_tokenizer, (any_fn)&tokenizer_encode,
        (any_fn)&tokenizer_decode, (any_fn)&tokenizer_cls_token_id,
        (any_fn)&tokenizer_sep_token_id, (any_fn)&tokenizer_pad_token_id,
        (any_fn)&tokenizer_unk_token_id, (any_fn)&embedder_cosine_similarity,
        (any_fn)&embedder_normalize, (any_fn)&embedder_norm,
        (any_fn)&embedder_dot_product,
    };
    size_t i;
    embd_text t;
    embd_status st = EMBD_STATUS_OK;
    CppEmbedderError ce = CPP_EMBEDDER_OK;

    for (i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (fns[i] == NULL) {
            fprintf(stderr, "export %u is NULL\n", (unsigned)i);
            fails++;
        }
    }
    t.ptr = "x";
    t.len = 1;
    (void)t;
    (void)st;
    (void)ce;

    if (sizeof(embd_status) != 4) { fprintf(stderr, "embd_status is not 32-bit\n"); fails++; }
    if (sizeof(embd_precision) != 4) { fprintf(stderr, "embd_precision is not 32-bit\n"); fails++; }
    /* Stable precision numbers. */
    if (EMBD_PRECISION_DEFAULT != 0 || EMBD_PRECISION_F32 != 1 || EMBD_PRECISION_BF16 != 2 ||
        EMBD_PRECISION_INT8 != 3) {
        fprintf(stderr, "precision numbers changed\n");
        fails++;
    }
    if (EMBD_VERSION_NUMBER != EMBD_VERSION_MAJOR * 1000000 + EMBD_VERSION_MINOR * 1000 + EMBD_VERSION_PATCH) {
        fprintf(stderr, "EMBD_VERSION_NUMBER formula\n");
        fails++;
    }
    if (embd_version_number() != EMBD_VERSION_NUMBER) {
        fprintf(stderr, "embd_version_number() %u != EMBD_VERSION_NUMBER %u\n",
                (unsigned)embd_version_number(), (unsigned)EMBD_VERSION_NUMBER);
        fails++;
    }
    if (strcmp(embd_version(), EMBD_VERSION_STRING) != 0) {
        fprintf(stderr, "embd_version() %s != EMBD_VERSION_STRING %s\n", embd_version(), EMBD_VERSION_STRING);
        fails++;
    }
    if (strcmp(embedder_version(), "1.0.0") != 0) { fprintf(stderr, "embedder_version\n"); fails++; }
    /* Stable status numbers. */
    if (EMBD_STATUS_OK != 0 || EMBD_STATUS_NULL_ARGUMENT != 1 || EMBD_STATUS_INVALID_ARGUMENT != 2 ||
        EMBD_STATUS_INVALID_HANDLE != 3 || EMBD_STATUS_BUFFER_TOO_SMALL != 4 ||
        EMBD_STATUS_INVALID_UTF8 != 5 || EMBD_STATUS_LIMIT_EXCEEDED != 6 || EMBD_STATUS_NOT_FOUND != 20 ||
        EMBD_STATUS_IO != 21 || EMBD_STATUS_UNKNOWN_FORMAT != 30 || EMBD_STATUS_FORMAT != 31 ||
        EMBD_STATUS_CHECKSUM != 32 || EMBD_STATUS_UNSUPPORTED != 40 || EMBD_STATUS_MODEL != 41 ||
        EMBD_STATUS_OUT_OF_MEMORY != 50 || EMBD_STATUS_INTERNAL != 90 || EMBD_STATUS_INTERNAL_PANIC != 91) {
        fprintf(stderr, "status numbers changed\n");
        fails++;
    }
    /* cpp_embedder's error values. */
    if (CPP_EMBEDDER_ERROR_FILE_NOT_FOUND != 1 || CPP_EMBEDDER_ERROR_INVALID_MAGIC != 10 ||
        CPP_EMBEDDER_ERROR_MODEL_NOT_LOADED != 30 || CPP_EMBEDDER_ERROR_NULL_POINTER != 60 ||
        CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL != 61 || CPP_EMBEDDER_ERROR_UNKNOWN != 99) {
        fprintf(stderr, "cpp_embedder codes changed\n");
        fails++;
    }
    printf("header (C %ld): %s, embedder %s\n", (long)__STDC_VERSION__, fails ? "FAILED" : "ok", embd_version());
    return fails ? 1 : 0;
}

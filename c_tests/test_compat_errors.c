/* cpp_embedder compatibility API without a model: error codes, NULLs, stale
 * handles, vector math. */
#include "embedder.h"
#include "cpp_embedder/c_api.h"
#include "check.h"

#include <stdint.h>

#define CHECK_CODE(expr, want)                                                              \
    do {                                                                                    \
        int c_ = (int)(expr);                                                               \
        if (c_ != (int)(want)) {                                                            \
            fprintf(stderr, "%s:%d: %s = %d, want %d (%s)\n", __FILE__, __LINE__, #expr, c_, \
                    (int)(want), embedder_get_error());                                     \
            check_failures++;                                                               \
        }                                                                                   \
    } while (0)

int main(void) {
    EmbedderHandle h;
    float out[400];
    const char *texts[2] = {"a", "b"};
    char path[512];
    FILE *f;

    CHECK(strcmp(embedder_version(), "1.0.0") == 0);
    CHECK(strstr(embedder_build_info(), "embedder") != NULL);
    CHECK(embedder_get_error() != NULL && embedder_get_error()[0] == '\0');
    CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_OK);

    /* Missing file: NULL and code 1. */
    CHECK(embedder_create("/nonexistent/model.bin") == NULL);
    CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_FILE_NOT_FOUND);
    CHECK(strstr(embedder_get_error(), "Failed to load model") != NULL);
    embedder_clear_error();
    CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_OK);
    CHECK(embedder_get_error()[0] == '\0');

    /* Bad magic: code 10 (cpp_embedder said 1 for every load failure). */
    snprintf(path, sizeof path, "%s/compat_garbage.bin", EMBD_TEST_TMPDIR);
    f = fopen(path, "wb");
    REQUIRE(f);
    fputs("definitely not a weights file", f);
    fclose(f);
    CHECK(embedder_create_with_config(path, 0, 1, 0) == NULL);
    CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_INVALID_MAGIC);

    /* NULL path: a handle without a model. */
    h = embedder_create(NULL);
    REQUIRE(h != NULL);
    CHECK(embedder_is_loaded(h) == 0);
    CHECK(embedder_get_dim(h) == 0);
    CHECK(embedder_get_vocab_size(h) == 0);
    CHECK(embedder_get_max_seq_length(h) == 256);
    CHECK(embedder_get_tokenizer(h) == NULL);
    CHECK_CODE(embedder_embed(h, "x", out, 400), CPP_EMBEDDER_ERROR_MODEL_NOT_LOADED);
    CHECK_CODE(embedder_embed_batch(h, texts, 2, out, 400), CPP_EMBEDDER_ERROR_MODEL_NOT_LOADED);
    CHECK_CODE(embedder_embed_batch(h, texts, 0, out, 400), CPP_EMBEDDER_OK); /* 0 texts: OK first */
    CHECK_CODE(embedder_embed(h, NULL, out, 400), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_embed(h, "x", NULL, 400), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_embed_batch(h, NULL, 1, out, 400), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_embed_batch_ex(h, texts, 1, NULL, 400, 1), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_load(h, NULL), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_load(h, "/nonexistent/model.bin"), CPP_EMBEDDER_ERROR_FILE_NOT_FOUND);
    CHECK(strstr(embedder_get_error(), "Failed to load weights") != NULL);
    CHECK(embedder_is_loaded(h) == 0);
    embedder_destroy(h);

    /* Stale handle: detected (cpp_embedder would crash). */
    CHECK(embedder_is_loaded(h) == 0);
    CHECK_CODE(embedder_embed(h, "x", out, 400), CPP_EMBEDDER_ERROR_INVALID_INPUT);
    CHECK(strstr(embedder_get_error(), "not a live") != NULL);
    embedder_destroy(h); /* double destroy: ignored */
    embedder_destroy(NULL);

    /* NULL handle everywhere. */
    CHECK(embedder_is_loaded(NULL) == 0);
    CHECK(embedder_get_dim(NULL) == 0);
    CHECK(embedder_get_max_seq_length(NULL) == 0);
    CHECK(embedder_get_vocab_size(NULL) == 0);
    CHECK(embedder_get_tokenizer(NULL) == NULL);
    CHECK_CODE(embedder_embed(NULL, "x", out, 400), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_embed_ex(NULL, "x", out, 400, 0), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_embed_batch(NULL, texts, 1, out, 400), CPP_EMBEDDER_ERROR_NULL_POINTER);
    CHECK_CODE(embedder_load(NULL, "x"), CPP_EMBEDDER_ERROR_NULL_POINTER);
    {
        uint32_t ids[4], n = 0;
        char s[8];
        CHECK_CODE(tokenizer_encode(NULL, "x", ids, 4, &n, 4), CPP_EMBEDDER_ERROR_NULL_POINTER);
        CHECK_CODE(tokenizer_decode(NULL, ids, 1, s, 8, 1), CPP_EMBEDDER_ERROR_NULL_POINTER);
        CHECK(tokenizer_cls_token_id(NULL) == 0 && tokenizer_sep_token_id(NULL) == 0 &&
              tokenizer_pad_token_id(NULL) == 0 && tokenizer_unk_token_id(NULL) == 0);
    }
    /* An embd_options handle is not an EmbedderHandle. */
    {
        embd_options *o = embd_options_new();
        CHECK(embedder_is_loaded((EmbedderHandle)o) == 0);
        CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_INVALID_INPUT);
        embd_options_free(o);
    }

    /* Vector math. */
    {
        float a[3] = {3, 4, 0}, b[3] = {3, 4, 0}, z[3] = {0, 0, 0}, v[3] = {3, 4, 0};
        CHECK(fabsf(embedder_cosine_similarity(a, b, 3) - 1.0f) < 1e-6f);
        CHECK(embedder_cosine_similarity(a, z, 3) == 0.0f);
        CHECK(embedder_cosine_similarity(NULL, b, 3) == 0.0f);
        CHECK(embedder_cosine_similarity(a, b, 0) == 0.0f);
        CHECK(fabsf(embedder_norm(a, 3) - 5.0f) < 1e-6f);
        CHECK(embedder_norm(NULL, 3) == 0.0f);
        CHECK(fabsf(embedder_dot_product(a, b, 3) - 25.0f) < 1e-5f);
        CHECK(embedder_dot_product(a, NULL, 3) == 0.0f);
        embedder_normalize(v, 3);
        CHECK(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] - 0.8f) < 1e-6f);
        embedder_normalize(z, 3);
        CHECK(z[0] == 0.0f);
        embedder_normalize(NULL, 3);
    }
    return check_done("compat_errors");
}

/* The cpp_embedder compatibility API with the real model gives the same
 * vectors as the embd API, honours the normalize flags both ways, and its
 * tokenizer matches the reference ids. */
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

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    embd_model *m = NULL;
    EmbedderHandle h, raw;
    float want[REF_N * 384], got[REF_N * 384], one[384];
    size_t i, k;
    TokenizerHandle tok;

    REQUIRE(embd_open(path, NULL, &m) == EMBD_STATUS_OK);
    REQUIRE(embd_encode(m, ref_texts, REF_N, want, REF_N * 384) == EMBD_STATUS_OK);

    h = embedder_create(path);
    if (!h) {
        fprintf(stderr, "embedder_create: %d %s\n", (int)embedder_get_error_code(), embedder_get_error());
        return 1;
    }
    CHECK(embedder_is_loaded(h) == 1);
    CHECK(embedder_get_dim(h) == 384);
    CHECK(embedder_get_vocab_size(h) == 30522);
    CHECK(embedder_get_max_seq_length(h) == 256);

    /* embed / embed_batch == embd_encode */
    for (i = 0; i < REF_N; i++) {
        CHECK_CODE(embedder_embed(h, ref_texts[i], one, 384), CPP_EMBEDDER_OK);
        CHECK(max_abs_diff(one, want + i * 384, 384) < 1e-6f);
        CHECK(max_abs_diff(one, ref_head[i], 8) < 1e-4f);
    }
    CHECK_CODE(embedder_embed_batch(h, (const char **)ref_texts, REF_N, got, REF_N * 384), CPP_EMBEDDER_OK);
    CHECK(max_abs_diff(got, want, REF_N * 384) < 1e-6f);

    /* buffer checks and NULL elements */
    CHECK_CODE(embedder_embed(h, "x", one, 383), CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL);
    CHECK(strstr(embedder_get_error(), "need 384, got 383") != NULL);
    CHECK_CODE(embedder_embed_batch(h, (const char **)ref_texts, REF_N, got, REF_N * 384 - 1),
               CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL);
    CHECK_CODE(embedder_embed_batch(h, (const char **)ref_texts, UINT32_MAX, got, UINT32_MAX),
               CPP_EMBEDDER_ERROR_INVALID_INPUT); /* no u32 overflow: refused */
    {
        const char *with_null[3] = {"a", NULL, "b"};
        CHECK_CODE(embedder_embed_batch(h, with_null, 3, got, REF_N * 384), CPP_EMBEDDER_ERROR_NULL_POINTER);
        CHECK(strstr(embedder_get_error(), "Null text at index 1") != NULL);
    }
    CHECK_CODE(embedder_embed(h, "caf\xc3", one, 384), CPP_EMBEDDER_ERROR_INVALID_INPUT);

    /* normalize honoured both ways (cpp_embedder could not un-normalize). */
    raw = embedder_create_with_config(path, 0, 0, 2);
    REQUIRE(raw != NULL);
    CHECK_CODE(embedder_embed(raw, ref_texts[0], one, 384), CPP_EMBEDDER_OK);
    CHECK(fabsf(embedder_norm(one, 384) - 1.0f) > 1e-3f);
    embedder_normalize(one, 384);
    CHECK(max_abs_diff(one, want, 384) < 1e-5f);
    CHECK_CODE(embedder_embed_ex(raw, ref_texts[0], one, 384, 1), CPP_EMBEDDER_OK);
    CHECK(max_abs_diff(one, want, 384) < 1e-5f);
    CHECK_CODE(embedder_embed_ex(h, ref_texts[0], one, 384, 0), CPP_EMBEDDER_OK);
    CHECK(fabsf(embedder_norm(one, 384) - 1.0f) > 1e-3f);
    CHECK_CODE(embedder_embed_batch_ex(h, (const char **)ref_texts, REF_N, got, REF_N * 384, 0), CPP_EMBEDDER_OK);
    for (i = 0; i < REF_N; i++) {
        embedder_normalize(got + i * 384, 384);
        CHECK(max_abs_diff(got + i * 384, want + i * 384, 384) < 1e-5f);
    }
    embedder_destroy(raw);

    /* max_seq_length above the model's limit is refused at create. */
    CHECK(embedder_create_with_config(path, 100000, 1, 0) == NULL);
    CHECK(embedder_get_error_code() != CPP_EMBEDDER_OK);

    /* tokenizer */
    tok = embedder_get_tokenizer(h);
    REQUIRE(tok != NULL);
    CHECK(tokenizer_cls_token_id(tok) == 101);
    CHECK(tokenizer_sep_token_id(tok) == 102);
    CHECK(tokenizer_pad_token_id(tok) == 0);
    CHECK(tokenizer_unk_token_id(tok) == 100);
    {
        uint32_t ids[64], n = 0;
        char s[256];
        CHECK_CODE(tokenizer_encode(tok, ref_texts[0], ids, 64, &n, 20), CPP_EMBEDDER_OK);
        CHECK(n == 20);
        for (k = 0; k < 12; k++) CHECK(ids[k] == ref_ids_0[k]);
        for (k = 12; k < 20; k++) CHECK(ids[k] == 0);
        CHECK_CODE(tokenizer_encode(tok, ref_texts[0], ids, 64, &n, 6), CPP_EMBEDDER_OK);
        CHECK(n == 6 && ids[0] == 101 && ids[4] == ref_ids_0[4] && ids[5] == 102);
        CHECK_CODE(tokenizer_encode(tok, ref_texts[0], ids, 10, &n, 0), CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL);
        CHECK_CODE(tokenizer_encode(tok, ref_texts[0], ids, 64, NULL, 20), CPP_EMBEDDER_ERROR_NULL_POINTER);
        /* a huge max_length is refused instead of allocating it */
        CHECK_CODE(tokenizer_encode(tok, ref_texts[0], ids, UINT32_MAX, &n, UINT32_MAX),
                   CPP_EMBEDDER_ERROR_SEQUENCE_TOO_LONG);
        CHECK_CODE(tokenizer_decode(tok, ref_ids_0, 12, s, sizeof s, 1), CPP_EMBEDDER_OK);
        CHECK(strcmp(s, "return true if the object is a frame object .") == 0);
        CHECK_CODE(tokenizer_decode(tok, ref_ids_0, 12, s, sizeof s, 0), CPP_EMBEDDER_OK);
        CHECK(strncmp(s, "[CLS] return", 12) == 0);
        CHECK_CODE(tokenizer_decode(tok, ref_ids_0, 12, s, 5, 1), CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL);
        CHECK_CODE(tokenizer_decode(tok, NULL, 3, s, sizeof s, 1), CPP_EMBEDDER_ERROR_NULL_POINTER);
    }

    /* embedder_load into an empty handle; the tokenizer handle follows the model. */
    {
        EmbedderHandle e = embedder_create(NULL);
        REQUIRE(e);
        CHECK_CODE(embedder_load(e, path), CPP_EMBEDDER_OK);
        CHECK(embedder_is_loaded(e) == 1);
        CHECK_CODE(embedder_embed(e, ref_texts[1], one, 384), CPP_EMBEDDER_OK);
        CHECK(max_abs_diff(one, want + 384, 384) < 1e-6f);
        tok = embedder_get_tokenizer(e);
        CHECK_CODE(embedder_load(e, "/nonexistent.bin"), CPP_EMBEDDER_ERROR_FILE_NOT_FOUND);
        CHECK(embedder_is_loaded(e) == 1); /* the old model stays */
        CHECK(tokenizer_cls_token_id(tok) == 101);
        embedder_destroy(e);
        CHECK(tokenizer_cls_token_id(tok) == 0); /* stale tokenizer: detected */
        CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_INVALID_INPUT);
    }

    /* create_with_vocab: the real vocab.txt is accepted, a different one refused. */
    {
        FILE *f = fopen(EMBD_TEST_VOCAB, "rb");
        char bad[512];
        FILE *g;
        EmbedderHandle v;
        if (f) {
            fclose(f);
            v = embedder_create_with_vocab(path, EMBD_TEST_VOCAB);
            CHECK(v != NULL);
            embedder_destroy(v);
        } else {
            printf("compat: %s absent, skipping the matching-vocab case\n", EMBD_TEST_VOCAB);
        }
        snprintf(bad, sizeof bad, "%s/compat_bad.vocab", EMBD_TEST_TMPDIR);
        g = fopen(bad, "wb");
        REQUIRE(g);
        fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n", g);
        fclose(g);
        CHECK(embedder_create_with_vocab(path, bad) == NULL);
        CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_WEIGHT_MISMATCH);
        CHECK(embedder_create_with_vocab(path, "/nonexistent.vocab") == NULL);
        CHECK_CODE(embedder_get_error_code(), CPP_EMBEDDER_ERROR_VOCAB_NOT_LOADED);
    }

    embedder_destroy(h);
    embd_free(m);
    return check_done("compat");
}

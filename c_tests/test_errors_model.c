/* Error paths that need an open model: NULL arguments, zero and huge counts,
 * too-small buffers with the needed size, invalid UTF-8, embedded NULs, use
 * after free and double free of a model handle, bad options. */
#include "embedder.h"
#include "check.h"

#include <stdint.h>

static embd_model *open_model(const char *path) {
    embd_model *m = NULL;
    embd_status st = embd_open(path, NULL, &m);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open(%s): %s: %s\n", path, embd_status_str(st), embd_last_error());
        exit(1);
    }
    return m;
}

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    embd_model *m = open_model(path);
    size_t dim = embd_dim(m), n = 0, i;
    float *out, *out2;
    const char *texts[3] = {"hello", NULL, "world"};
    const char *bad_utf8[2] = {"fine", "caf\xc3"};
    embd_text t[2];
    uint32_t ids[64];

    /* Facts. */
    CHECK(dim == 384);
    CHECK(embd_max_seq_length(m) == 256);
    CHECK(embd_num_layers(m) == 6);
    CHECK(embd_num_heads(m) == 12);
    CHECK(embd_vocab_size(m) == 30522);
    CHECK(embd_pooling(m) != NULL && strcmp(embd_pooling(m), "mean") == 0);
    CHECK(embd_normalizes(m) == 1);
    CHECK(embd_model_name(m) != NULL && strstr(embd_model_name(m), "MiniLM") != NULL);

    out = (float *)calloc(4 * dim, sizeof(float));
    out2 = (float *)calloc(4 * dim, sizeof(float));
    REQUIRE(out && out2);

    /* embd_encode */
    CHECK_ST(embd_encode(m, NULL, 1, out, dim), EMBD_STATUS_NULL_ARGUMENT, "texts is NULL");
    CHECK_ST(embd_encode(m, texts, 3, out, 3 * dim), EMBD_STATUS_NULL_ARGUMENT, "texts[1] is NULL");
    CHECK_ST(embd_encode(m, texts, 1, NULL, dim), EMBD_STATUS_NULL_ARGUMENT, "out is NULL");
    CHECK_ST(embd_encode(m, NULL, 0, NULL, 0), EMBD_STATUS_OK, NULL); /* zero texts: nothing to do */
    CHECK_ST(embd_encode(m, texts, 1, out, dim - 1), EMBD_STATUS_BUFFER_TOO_SMALL, "needs 384");
    CHECK_ST(embd_encode(m, texts, 1, out, 0), EMBD_STATUS_BUFFER_TOO_SMALL, "needs 384");
    CHECK_ST(embd_encode(m, texts, SIZE_MAX, out, SIZE_MAX), EMBD_STATUS_LIMIT_EXCEEDED, "EMBD_MAX_BATCH");
    CHECK_ST(embd_encode(m, texts, (size_t)EMBD_MAX_BATCH + 1, out, SIZE_MAX), EMBD_STATUS_LIMIT_EXCEEDED, NULL);
    CHECK_ST(embd_encode(m, bad_utf8, 2, out, 2 * dim), EMBD_STATUS_INVALID_UTF8, "texts[1]");
    CHECK(strstr(embd_last_error(), "byte offset 3") != NULL);

    /* embd_encode_texts */
    t[0].ptr = NULL;
    t[0].len = 0; /* the empty text */
    t[1].ptr = "";
    t[1].len = 0;
    CHECK_ST(embd_encode_texts(m, t, 2, out, 2 * dim), EMBD_STATUS_OK, NULL);
    CHECK(max_abs_diff(out, out + dim, dim) == 0.0f);
    t[0].ptr = NULL;
    t[0].len = 5;
    CHECK_ST(embd_encode_texts(m, t, 1, out, dim), EMBD_STATUS_NULL_ARGUMENT, "texts[0] is NULL");
    t[0].ptr = "x";
    t[0].len = (size_t)EMBD_MAX_TEXT_BYTES + 1;
    CHECK_ST(embd_encode_texts(m, t, 1, out, dim), EMBD_STATUS_LIMIT_EXCEEDED, "texts[0]");
    t[0].ptr = "ok\xe2\x82";
    t[0].len = 4;
    CHECK_ST(embd_encode_texts(m, t, 1, out, dim), EMBD_STATUS_INVALID_UTF8, "byte offset 2");
    CHECK_ST(embd_encode_texts(m, NULL, 1, out, dim), EMBD_STATUS_NULL_ARGUMENT, "texts is NULL");
    CHECK_ST(embd_encode_texts(m, t, SIZE_MAX, out, dim), EMBD_STATUS_LIMIT_EXCEEDED, NULL);
    /* A length-delimited text may contain NUL bytes: it is text (BERT cleaning drops
     * the control character), not a terminator. */
    t[0].ptr = "a\0b";
    t[0].len = 3;
    t[1].ptr = "ab";
    t[1].len = 2;
    CHECK_ST(embd_encode_texts(m, t, 2, out, 2 * dim), EMBD_STATUS_OK, NULL);
    CHECK(max_abs_diff(out, out + dim, dim) < 1e-6f);
    /* (pointer, length) ignores bytes after len. */
    t[0].ptr = "hello world";
    t[0].len = 5;
    CHECK_ST(embd_encode_texts(m, t, 1, out, dim), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode(m, texts, 1, out2, dim), EMBD_STATUS_OK, NULL);
    CHECK(max_abs_diff(out, out2, dim) < 1e-6f);

    /* embd_tokenize / embd_count_tokens */
    CHECK_ST(embd_tokenize(m, ref_texts[0], strlen(ref_texts[0]), ids, 64, &n), EMBD_STATUS_OK, NULL);
    CHECK(n == 12);
    for (i = 0; i < 12 && i < n; i++) CHECK(ids[i] == ref_ids_0[i]);
    n = 0;
    CHECK_ST(embd_tokenize(m, ref_texts[0], strlen(ref_texts[0]), ids, 3, &n), EMBD_STATUS_BUFFER_TOO_SMALL,
             "needs 12");
    CHECK(n == 12); /* the needed size */
    n = 0;
    CHECK_ST(embd_tokenize(m, ref_texts[0], strlen(ref_texts[0]), NULL, 0, &n), EMBD_STATUS_BUFFER_TOO_SMALL,
             NULL);
    CHECK(n == 12);
    CHECK_ST(embd_tokenize(m, "x", 1, ids, 64, NULL), EMBD_STATUS_NULL_ARGUMENT, "n_ids_out");
    CHECK_ST(embd_tokenize(m, NULL, 4, ids, 64, &n), EMBD_STATUS_NULL_ARGUMENT, "text is NULL");
    CHECK_ST(embd_tokenize(m, "\xff", 1, ids, 64, &n), EMBD_STATUS_INVALID_UTF8, "text");
    CHECK(n == 0);
    CHECK_ST(embd_tokenize(m, NULL, 0, ids, 64, &n), EMBD_STATUS_OK, NULL);
    CHECK(n == 2 && ids[0] == 101 && ids[1] == 102);
    CHECK_ST(embd_count_tokens(m, ref_texts[0], strlen(ref_texts[0]), &n), EMBD_STATUS_OK, NULL);
    CHECK(n == 12);
    CHECK_ST(embd_count_tokens(m, "x", 1, NULL), EMBD_STATUS_NULL_ARGUMENT, "n_tokens_out");
    CHECK_ST(embd_count_tokens(m, "\xc0\x80", 2, &n), EMBD_STATUS_INVALID_UTF8, NULL);

    /* Bad option values are refused at open. */
    {
        embd_options *o = embd_options_new();
        embd_model *m2 = (embd_model *)(uintptr_t)1;
        embd_status st;
        REQUIRE(o);
        CHECK_ST(embd_options_set_max_seq_length(o, 100000), EMBD_STATUS_OK, NULL);
        st = embd_open(path, o, &m2);
        CHECK(st == EMBD_STATUS_MODEL || st == EMBD_STATUS_INVALID_ARGUMENT);
        CHECK(m2 == NULL);
        /* normalize off really gives raw pooled vectors */
        CHECK_ST(embd_options_set_max_seq_length(o, 0), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_options_set_normalize(o, 0), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_options_set_threads(o, 1), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_open(path, o, &m2), EMBD_STATUS_OK, NULL);
        embd_options_free(o); /* the model does not keep the options */
        CHECK(embd_normalizes(m2) == 0);
        CHECK_ST(embd_encode(m2, ref_texts, 1, out, dim), EMBD_STATUS_OK, NULL);
        {
            double sq = 0;
            for (i = 0; i < dim; i++) sq += (double)out[i] * out[i];
            CHECK(fabs(sqrt(sq) - 1.0) > 1e-3);
        }
        embd_free(m2);
    }

    /* Use after free and double free of a model handle are detected. */
    embd_free(m);
    CHECK(embd_dim(m) == 0);
    CHECK(strstr(embd_last_error(), "not a live embd_model") != NULL);
    CHECK_ST(embd_encode(m, texts, 1, out, dim), EMBD_STATUS_INVALID_HANDLE, "not a live embd_model");
    CHECK_ST(embd_tokenize(m, "x", 1, ids, 64, &n), EMBD_STATUS_INVALID_HANDLE, NULL);
    CHECK(embd_model_name(m) == NULL);
    embd_free(m);
    CHECK(strstr(embd_last_error(), "embd_free") != NULL);

    free(out);
    free(out2);
    return check_done("errors_model");
}

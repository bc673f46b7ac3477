/* Per-call options through the C API with the real model
 * (embd_call_options_*, embd_call_dim, embd_encode_with): each compared with a
 * model opened with the same embd_options, bit for bit. */
#include "embedder.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static embd_model *open_with(const char *path, int normalize, size_t dims, const char *prompt) {
    embd_options *o = embd_options_new();
    embd_model *m = NULL;
    embd_status st;
    REQUIRE(o != NULL);
    CHECK_ST(embd_options_set_threads(o, 1), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_options_set_normalize(o, normalize), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_options_set_dimensions(o, dims), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_options_set_prompt(o, prompt), EMBD_STATUS_OK, NULL);
    st = embd_open(path, o, &m);
    embd_options_free(o);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open: %s: %s\n", embd_status_str(st), embd_last_error());
        exit(1);
    }
    return m;
}

static embd_text txt(const char *s) {
    embd_text t;
    t.ptr = s;
    t.len = strlen(s);
    return t;
}

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    embd_model *m = open_with(path, -1, 0, NULL);
    embd_model *raw = open_with(path, 0, 0, NULL);
    embd_model *cut = open_with(path, -1, 64, NULL);
    embd_model *query = open_with(path, -1, 0, "query: ");
    embd_call_options *c = embd_call_options_new();
    embd_text t[2];
    float a[2 * 384], b[2 * 384];
    size_t dim = 0, tokens[2] = {0, 0};
    uint8_t truncated[2] = {9, 9};
    char long_text[6000];
    size_t i;

    REQUIRE(c != NULL);
    t[0] = txt("The cat sits outside");
    t[1] = txt("A man is playing guitar");

    /* Unset options (and NULL): embd_encode_ex exactly. */
    CHECK_ST(embd_encode_texts(m, t, 2, a, 768), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ST(embd_encode_with(m, NULL, t, 2, b, 768, tokens, truncated), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(tokens[0] == 6 && truncated[0] == 0);

    /* normalize 0 = a model opened with normalize 0. */
    CHECK_ST(embd_call_options_set_normalize(c, 0), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_texts(raw, t, 2, a, 768), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ST(embd_call_options_set_normalize(c, 2), EMBD_STATUS_INVALID_ARGUMENT, "-1, 0 or 1");
    CHECK_ST(embd_call_options_set_normalize(c, -1), EMBD_STATUS_OK, NULL);

    /* dimensions 64 = a model opened with dimensions 64; buffers sized by it. */
    CHECK_ST(embd_call_options_set_dimensions(c, 64), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_call_dim(m, c, &dim), EMBD_STATUS_OK, NULL);
    CHECK(dim == 64);
    CHECK_ST(embd_encode_texts(cut, t, 2, a, 128), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 127, NULL, NULL), EMBD_STATUS_BUFFER_TOO_SMALL, "128");
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 128, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, 128 * sizeof(float)) == 0);
    CHECK_ST(embd_call_options_set_dimensions(c, 385), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_INVALID_ARGUMENT, "1..=384");
    CHECK_ST(embd_call_dim(m, c, &dim), EMBD_STATUS_INVALID_ARGUMENT, "1..=384");
    CHECK_ST(embd_call_options_set_dimensions(c, 0), EMBD_STATUS_OK, NULL);

    /* A prompt per call = a model opened with it; "" turns it off again. */
    CHECK_ST(embd_call_options_set_prompt(c, "query: "), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_texts(query, t, 2, a, 768), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ST(embd_call_options_set_prompt(c, ""), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_texts(m, t, 2, a, 768), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(query, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ST(embd_call_options_set_prompt(c, NULL), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_call_options_set_prompt_name(c, "query"), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_INVALID_ARGUMENT, "stores none");
    CHECK_ST(embd_call_options_set_prompt_name(c, NULL), EMBD_STATUS_OK, NULL);

    /* Truncation: a text of 1000 words is cut (right, left) or refused. */
    long_text[0] = '\0';
    for (i = 0; i < 1000; i++) strcat(long_text, (i % 3) ? "cat " : "dog ");
    t[1] = txt(long_text);
    CHECK_ST(embd_call_options_set_truncation(c, EMBD_TRUNCATION_REFUSE), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_LIMIT_EXCEEDED, "text 1: input has");
    CHECK_ST(embd_call_options_set_truncation(c, EMBD_TRUNCATION_LEFT), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, b, 768, tokens, truncated), EMBD_STATUS_OK, NULL);
    CHECK(tokens[1] == 256 && truncated[1] == 1);
    CHECK_ST(embd_call_options_set_truncation(c, EMBD_TRUNCATION_RIGHT), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_encode_with(m, c, t, 2, a, 768, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) != 0);
    CHECK_ST(embd_encode_texts(m, t, 2, b, 768), EMBD_STATUS_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_ST(embd_call_options_set_truncation(c, 7), EMBD_STATUS_INVALID_ARGUMENT, "EMBD_TRUNCATION_REFUSE (2)");

    /* Argument checks. */
    CHECK_ST(embd_call_options_set_dimensions(NULL, 8), EMBD_STATUS_NULL_ARGUMENT, "options");
    CHECK_ST(embd_encode_with(m, (embd_call_options *)m, t, 2, b, 768, NULL, NULL), EMBD_STATUS_INVALID_HANDLE, "embd_call_options");
    CHECK_ST(embd_encode_with(NULL, c, t, 2, b, 768, NULL, NULL), EMBD_STATUS_NULL_ARGUMENT, "model");
    CHECK_ST(embd_call_dim(m, c, NULL), EMBD_STATUS_NULL_ARGUMENT, "dim_out");
    CHECK_ST(embd_encode_with(m, c, NULL, 0, NULL, 0, NULL, NULL), EMBD_STATUS_OK, NULL);

    /* Token vectors: ask for the size, then fill; their mean, normalized, is
     * the sentence vector (all-MiniLM-L6-v2 mean-pools every token). */
    {
        size_t n_floats = 99, n2 = 0, k, j, tok[2] = {0, 0};
        float *tv, *tv64;
        double mean[384], norm = 0.0, worst = 0.0;
        embd_call_options *c64 = embd_call_options_new();
        CHECK_ST(embd_encode_tokens(m, NULL, t, 1, NULL, 0, &n_floats, tok, NULL), EMBD_STATUS_BUFFER_TOO_SMALL, "needs 2304");
        CHECK(n_floats == 6 * 384 && tok[0] == 6);
        tv = (float *)malloc(n_floats * sizeof(float));
        tv64 = (float *)malloc(6 * 64 * sizeof(float));
        REQUIRE(tv != NULL && tv64 != NULL);
        CHECK_ST(embd_encode_tokens(m, NULL, t, 1, tv, n_floats, &n2, NULL, NULL), EMBD_STATUS_OK, NULL);
        CHECK(n2 == n_floats);
        CHECK_ST(embd_encode_texts(m, t, 1, a, 384), EMBD_STATUS_OK, NULL);
        for (j = 0; j < 384; j++) {
            mean[j] = 0.0;
            for (k = 0; k < 6; k++) mean[j] += tv[k * 384 + j];
            norm += mean[j] * mean[j];
        }
        norm = sqrt(norm);
        for (j = 0; j < 384; j++) {
            double d = fabs(mean[j] / norm - a[j]);
            if (d > worst) worst = d;
        }
        CHECK(worst < 1e-5);
        /* Dimensions cut each token vector (not normalized unless asked). */
        CHECK_ST(embd_call_options_set_dimensions(c64, 64), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_encode_tokens(m, c64, t, 1, tv64, 6 * 64, &n2, NULL, NULL), EMBD_STATUS_OK, NULL);
        CHECK(n2 == 6 * 64);
        for (k = 0; k < 6; k++) CHECK(memcmp(tv64 + k * 64, tv + k * 384, 64 * sizeof(float)) == 0);
        CHECK_ST(embd_encode_tokens(m, c64, t, 1, tv64, 6 * 64 - 1, &n2, NULL, NULL), EMBD_STATUS_BUFFER_TOO_SMALL, "needs 384");
        CHECK(n2 == 6 * 64);
        CHECK_ST(embd_encode_tokens(m, NULL, t, 1, NULL, 6 * 384, &n2, NULL, NULL), EMBD_STATUS_NULL_ARGUMENT, "out");
        CHECK_ST(embd_encode_tokens(m, NULL, t, 1, tv, n_floats, NULL, NULL, NULL), EMBD_STATUS_NULL_ARGUMENT, "n_floats_out");
        CHECK_ST(embd_call_options_set_dimensions(c64, 1000), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_encode_tokens(m, c64, t, 1, tv, n_floats, &n2, NULL, NULL), EMBD_STATUS_INVALID_ARGUMENT, "dimensions");
        CHECK_ST(embd_encode_tokens(m, NULL, NULL, 0, NULL, 0, &n2, NULL, NULL), EMBD_STATUS_OK, NULL);
        CHECK(n2 == 0);
        embd_call_options_free(c64);
        free(tv);
        free(tv64);
    }

    embd_call_options_free(c);
    embd_call_options_free(NULL);
    embd_free(m);
    embd_free(raw);
    embd_free(cut);
    embd_free(query);
    return check_done("call_options");
}

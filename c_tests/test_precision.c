/* embd_options_set_precision with the real model: every precision opens,
 * reports itself through embd_model_precision, and embeds; the default on an
 * f32 file is f32; a refused value leaves the options usable and unchanged.
 * (The vectors' accuracy per precision is checked by the Rust kernel tests
 * and bench/run.sh --check, not here.) */
#include "embedder.h"
#include "check.h"

#include <stdint.h>

static embd_model *open_with(const char *path, embd_precision p) {
    embd_options *o = embd_options_new();
    embd_model *m = NULL;
    embd_status st;
    REQUIRE(o != NULL);
    CHECK_ST(embd_options_set_threads(o, 1), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_options_set_precision(o, p), EMBD_STATUS_OK, NULL);
    st = embd_open(path, o, &m);
    embd_options_free(o); /* the model does not keep the options */
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open(%s, precision %s): %s: %s\n", path, embd_precision_name(p),
                embd_status_str(st), embd_last_error());
        exit(1);
    }
    return m;
}

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    static const struct {
        embd_precision asked, runs;
    } cases[] = {
        {EMBD_PRECISION_DEFAULT, EMBD_PRECISION_F32}, /* models/all-MiniLM-L6-v2.weights is f32 */
        {EMBD_PRECISION_F32, EMBD_PRECISION_F32},
        {EMBD_PRECISION_BF16, EMBD_PRECISION_BF16},
        {EMBD_PRECISION_INT8, EMBD_PRECISION_INT8},
    };
    size_t c, i;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        embd_model *m = open_with(path, cases[c].asked);
        size_t dim = embd_dim(m);
        float *out;
        double sq = 0;
        embd_precision got = embd_model_precision(m);
        if (got != cases[c].runs) {
            fprintf(stderr, "asked %s: embd_model_precision = %d (%s), want %s\n",
                    embd_precision_name(cases[c].asked), (int)got,
                    embd_precision_name(got) ? embd_precision_name(got) : "?",
                    embd_precision_name(cases[c].runs));
            check_failures++;
        }
        CHECK(dim == 384);
        out = (float *)calloc(2 * dim, sizeof(float));
        REQUIRE(out != NULL);
        CHECK_ST(embd_encode(m, ref_texts, 2, out, 2 * dim), EMBD_STATUS_OK, NULL);
        for (i = 0; i < dim; i++) sq += (double)out[i] * out[i];
        CHECK(fabs(sqrt(sq) - 1.0) < 1e-3); /* finite and normalized in every precision */
        free(out);
        embd_free(m);
        CHECK(embd_model_precision(m) == 0); /* freed: 0 and a message */
        CHECK(msg_has("not a live embd_model"));
    }

    /* A refused value leaves the options as they were (int8 here). */
    {
        embd_options *o = embd_options_new();
        embd_model *m = (embd_model *)(uintptr_t)1;
        REQUIRE(o != NULL);
        CHECK_ST(embd_options_set_threads(o, 1), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_options_set_precision(o, EMBD_PRECISION_INT8), EMBD_STATUS_OK, NULL);
        CHECK_ST(embd_options_set_precision(o, 42), EMBD_STATUS_INVALID_ARGUMENT, "precision 42");
        CHECK_ST(embd_open(path, o, &m), EMBD_STATUS_OK, NULL);
        embd_options_free(o);
        CHECK(m != NULL && embd_model_precision(m) == EMBD_PRECISION_INT8);
        embd_free(m);
    }
    return check_done("precision");
}

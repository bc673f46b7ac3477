/* Reference texts through the C API match sentence-transformers within 1e-4,
 * batched and one at a time, via embd_encode and embd_encode_texts. */
#include "embedder.h"
#include "check.h"

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    embd_model *m = NULL;
    embd_status st = embd_open(path, NULL, &m);
    size_t dim, i, k;
    float *batch, *one, *viatexts;
    embd_text t[REF_N];
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open: %s: %s\n", embd_status_str(st), embd_last_error());
        return 1;
    }
    dim = embd_dim(m);
    REQUIRE(dim == 384);
    batch = (float *)calloc(REF_N * dim, sizeof(float));
    one = (float *)calloc(dim, sizeof(float));
    viatexts = (float *)calloc(REF_N * dim, sizeof(float));
    REQUIRE(batch && one && viatexts);

    CHECK_ST(embd_encode(m, ref_texts, REF_N, batch, REF_N * dim), EMBD_STATUS_OK, NULL);
    for (i = 0; i < REF_N; i++) {
        float d = max_abs_diff(batch + i * dim, ref_head[i], 8);
        double sq = 0;
        if (d > 1e-4f) {
            fprintf(stderr, "text %u: max |diff| %g > 1e-4 (got %f %f %f ...)\n", (unsigned)i, d,
                    batch[i * dim], batch[i * dim + 1], batch[i * dim + 2]);
            check_failures++;
        }
        for (k = 0; k < dim; k++) sq += (double)batch[i * dim + k] * batch[i * dim + k];
        CHECK(fabs(sqrt(sq) - 1.0) < 1e-4);
        /* alone == in the batch */
        CHECK_ST(embd_encode(m, &ref_texts[i], 1, one, dim), EMBD_STATUS_OK, NULL);
        CHECK(max_abs_diff(one, batch + i * dim, dim) < 1e-5f);
        t[i].ptr = ref_texts[i];
        t[i].len = strlen(ref_texts[i]);
    }
    CHECK_ST(embd_encode_texts(m, t, REF_N, viatexts, REF_N * dim), EMBD_STATUS_OK, NULL);
    CHECK(max_abs_diff(viatexts, batch, REF_N * dim) < 1e-6f);
    {
        float s = 0;
        CHECK_ST(embd_similarity(batch, batch, dim, &s), EMBD_STATUS_OK, NULL);
        CHECK(fabsf(s - 1.0f) < 1e-5f);
        CHECK_ST(embd_similarity(batch, batch + dim, dim, &s), EMBD_STATUS_OK, NULL);
        CHECK(s < 0.9f);
    }
    free(batch);
    free(one);
    free(viatexts);
    embd_free(m);
    return check_done("parity");
}

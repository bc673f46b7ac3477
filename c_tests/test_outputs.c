/* The sparse and multi-vector outputs through the C API (embd_encode_sparse,
 * embd_encode_multi_vector, embd_has_output, embd_multi_vector_dim):
 * splade-tiny's CSR for "" and "<s>" against the first lines of
 * splade-tiny_reference.jsonl (sentence-transformers' SparseEncoder; the
 * expected numbers are copied from the file), the size query, NULL
 * arguments, an unknown task, and embd_encode (dense) refused on a sparse-only
 * model; colbert-tiny's query vectors for "hello" (32 vectors of 32 floats).
 *
 * The models are the folders in shared/reference/architectures:
 * $EMBD_SHARED_DIR/reference/architectures, else EMBD_TEST_FAMILIES/../architectures
 * (the shared folder beside the repository); argv[1] overrides both. */
#include "embedder.h"
#include "check.h"

#include <stdint.h>

static embd_text txt(const char *s) {
    embd_text t;
    t.ptr = s;
    t.len = strlen(s);
    return t;
}

static void test_splade(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/splade-tiny", dir);
    embd_model *m = NULL;
    CHECK_ST(embd_open(path, NULL, &m), EMBD_STATUS_OK, NULL);
    if (!m) return;

    CHECK(embd_has_output(m, "sparse") == 1);
    CHECK(embd_has_output(m, "multi-vector") == 0);
    CHECK(embd_has_output(m, "nope") == -1);
    CHECK(msg_has("nope"));
    CHECK(embd_has_output(m, NULL) == -1);
    CHECK(embd_has_output(NULL, "dense") == -1);
    CHECK(embd_multi_vector_dim(m) == 0);

    /* Reference: line 1 (""): 45 entries, ids 673 .. 30079, first weight
     * 0.658421278; line 4 ("<s>"): 73 entries, ids 142 .. 30079, first weight
     * 0.0985520929. */
    embd_text texts[2] = {txt(""), txt("<s>")};
    size_t offsets[3] = {99, 99, 99};
    size_t nnz = 99;

    /* The size query: no buffers, capacity 0. */
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 2, 0, offsets, NULL, NULL, 0, &nnz),
             EMBD_STATUS_BUFFER_TOO_SMALL, "118");
    CHECK(nnz == 45 + 73);
    CHECK(offsets[0] == 0 && offsets[1] == 45 && offsets[2] == 45 + 73);

    uint32_t *idx = (uint32_t *)malloc(nnz * sizeof *idx);
    float *val = (float *)malloc(nnz * sizeof *val);
    REQUIRE(idx && val);
    /* One short. */
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 2, 0, offsets, idx, val, 117, &nnz),
             EMBD_STATUS_BUFFER_TOO_SMALL, NULL);
    CHECK(nnz == 118);

    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_DOCUMENT, texts, 2, 0, offsets, idx, val, 118, &nnz),
             EMBD_STATUS_OK, NULL);
    CHECK(nnz == 118);
    CHECK(offsets[0] == 0 && offsets[1] == 45 && offsets[2] == 118);
    CHECK(idx[0] == 673 && idx[44] == 30079);
    CHECK(fabsf(val[0] - 0.658421278f) < 1e-4f);
    CHECK(idx[45] == 142 && idx[117] == 30079);
    CHECK(fabsf(val[45] - 0.0985520929f) < 1e-4f);
    for (size_t i = 1; i < 45; i++) CHECK(idx[i] > idx[i - 1]);

    /* top_k keeps the largest weights: 0.86437583 at id 19067 is text 0's. */
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 1, 1, offsets, idx, val, 118, &nnz),
             EMBD_STATUS_OK, NULL);
    CHECK(nnz == 1 && offsets[1] == 1 && idx[0] == 19067);

    /* No texts. */
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, NULL, 0, 0, offsets, NULL, NULL, 0, &nnz),
             EMBD_STATUS_OK, NULL);
    CHECK(nnz == 0 && offsets[0] == 0);

    /* Misuse. */
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 2, 0, NULL, idx, val, 118, &nnz),
             EMBD_STATUS_NULL_ARGUMENT, "offsets");
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 2, 0, offsets, idx, val, 118, NULL),
             EMBD_STATUS_NULL_ARGUMENT, "nnz_out");
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, NULL, 2, 0, offsets, idx, val, 118, &nnz),
             EMBD_STATUS_NULL_ARGUMENT, "texts");
    CHECK_ST(embd_encode_sparse(m, NULL, EMBD_TASK_NONE, texts, 2, 0, offsets, NULL, val, 118, &nnz),
             EMBD_STATUS_NULL_ARGUMENT, "indices");
    CHECK(nnz == 0);
    CHECK_ST(embd_encode_sparse(NULL, NULL, EMBD_TASK_NONE, texts, 2, 0, offsets, idx, val, 118, &nnz),
             EMBD_STATUS_NULL_ARGUMENT, "model");
    CHECK_ST(embd_encode_sparse(m, NULL, 7, texts, 2, 0, offsets, idx, val, 118, &nnz),
             EMBD_STATUS_INVALID_ARGUMENT, "task");

    /* Neither dense nor multi-vector on a sparse-only model. */
    const char *plain[1] = {"hello"};
    float *dense = (float *)calloc(embd_dim(m) + 1, sizeof *dense);
    REQUIRE(dense);
    CHECK_ST(embd_encode(m, plain, 1, dense, embd_dim(m) + 1), EMBD_STATUS_UNSUPPORTED, "sparse");
    size_t nf = 99;
    CHECK_ST(embd_encode_multi_vector(m, NULL, EMBD_TASK_QUERY, texts, 1, dense, 1, &nf, NULL),
             EMBD_STATUS_UNSUPPORTED, "sparse");
    CHECK(nf == 0);

    free(dense);
    free(idx);
    free(val);
    embd_free(m);
}

static void test_colbert(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/colbert-tiny", dir);
    embd_model *m = NULL;
    CHECK_ST(embd_open(path, NULL, &m), EMBD_STATUS_OK, NULL);
    if (!m) return;
    CHECK(embd_has_output(m, "multi-vector") == 1);
    CHECK(embd_has_output(m, "sparse") == 0);
    size_t dim = embd_multi_vector_dim(m);
    CHECK(dim == 32);

    embd_text texts[1] = {txt("hello")};
    size_t nf = 0, vectors = 0;
    CHECK_ST(embd_encode_multi_vector(m, NULL, EMBD_TASK_QUERY, texts, 1, NULL, 0, &nf, &vectors),
             EMBD_STATUS_BUFFER_TOO_SMALL, NULL);
    CHECK(nf == 32 * 32 && vectors == 32);
    float *out = (float *)malloc(32 * 32 * sizeof *out);
    REQUIRE(out);
    vectors = 0;
    CHECK_ST(embd_encode_multi_vector(m, NULL, EMBD_TASK_QUERY, texts, 1, out, 32 * 32, &nf, &vectors),
             EMBD_STATUS_OK, NULL);
    CHECK(nf == 32 * 32 && vectors == 32);
    for (size_t i = 0; i < nf; i++) CHECK(isfinite(out[i]));
    CHECK_ST(embd_encode_multi_vector(m, NULL, EMBD_TASK_QUERY, texts, 1, out, 32 * 32, NULL, NULL),
             EMBD_STATUS_NULL_ARGUMENT, "n_floats_out");
    CHECK_ST(embd_encode_multi_vector(m, NULL, EMBD_TASK_QUERY, texts, 1, NULL, 32 * 32, &nf, NULL),
             EMBD_STATUS_NULL_ARGUMENT, "out");
    free(out);
    embd_free(m);
}

int main(int argc, char **argv) {
    char dir[4096];
    const char *shared = getenv("EMBD_SHARED_DIR");
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else if (shared && *shared) {
        snprintf(dir, sizeof dir, "%s/reference/architectures", shared);
    } else {
        snprintf(dir, sizeof dir, "%s/../architectures", EMBD_TEST_FAMILIES);
    }
    test_splade(dir);
    test_colbert(dir);
    return check_done("outputs");
}

/* swift_c_calls: the exact sequence of embd_* calls that the Swift wrapper
 * (Sources/Embedder/Embedder.swift) makes, written in C so that it is built
 * and run by ctest on machines without a Swift toolchain:
 *   Model.init      embd_options_new, embd_options_set_* (threads, max seq
 *                   length, normalize, verify, precision), embd_open,
 *                   embd_options_free
 *   precision       embd_model_precision, embd_precision_name
 *   Model.embed     one contiguous UTF-8 buffer sliced into embd_text pairs
 *                   (empty texts as (NULL, 0)), embd_encode_texts
 *   tokenize        embd_tokenize into a buffer of embd_max_seq_length ids
 *   countTokens     embd_count_tokens
 *   errors          embd_status_str + embd_last_error right after the call
 *   deinit          embd_free
 * Usage: swift_c_calls MODEL. Prints "swift_c_calls: ok" on success.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <embedder.h>

static int failures = 0;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, embd_last_error());                              \
            ++failures;                                                               \
        }                                                                             \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: swift_c_calls MODEL\n");
        return 2;
    }
    /* Model(path:options: ModelOptions(threads: 2, maxSeqLength: 0, normalize: true, verifyChecksums: true,
     *                                  precision: .f32)) */
    embd_options *o = embd_options_new();
    CHECK(o != NULL);
    CHECK(embd_options_set_threads(o, 2) == EMBD_STATUS_OK);
    CHECK(embd_options_set_max_seq_length(o, 0) == EMBD_STATUS_OK);
    CHECK(embd_options_set_normalize(o, 1) == EMBD_STATUS_OK);
    CHECK(embd_options_set_verify_checksums(o, 1) == EMBD_STATUS_OK);
    CHECK(embd_options_set_precision(o, 1 /* Precision.f32.rawValue */) == EMBD_STATUS_OK);
    embd_model *m = NULL;
    embd_status st = embd_open(argv[1], o, &m);
    embd_options_free(o);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open: %s (status %d): %s\n", embd_status_str(st), (int)st, embd_last_error());
        return 1;
    }
    const size_t dim = embd_dim(m);
    CHECK(dim == 384);
    CHECK(embd_max_seq_length(m) == 256);
    CHECK(embd_model_name(m) != NULL);
    /* model.precision, Precision.description */
    CHECK(embd_model_precision(m) == 1);
    CHECK(embd_precision_name(embd_model_precision(m)) != NULL &&
          strcmp(embd_precision_name(embd_model_precision(m)), "f32") == 0);
    CHECK(strcmp(embd_precision_name(2), "bf16") == 0 && strcmp(embd_precision_name(3), "int8") == 0);

    /* embed(["Return true ...", "", "A classic mbox mailbox."]) */
    const char *texts[3] = {"Return true if the object is a frame object.", "", "A classic mbox mailbox."};
    char bytes[128];
    size_t lens[3], off = 0;
    for (int i = 0; i < 3; ++i) {
        lens[i] = strlen(texts[i]);
        memcpy(bytes + off, texts[i], lens[i]);
        off += lens[i];
    }
    embd_text items[3];
    off = 0;
    for (int i = 0; i < 3; ++i) {
        items[i].ptr = lens[i] == 0 ? NULL : bytes + off;
        items[i].len = lens[i];
        off += lens[i];
    }
    float *flat = calloc(3 * dim, sizeof *flat);
    CHECK(flat != NULL);
    if (flat == NULL) return 1;
    CHECK(embd_encode_texts(m, items, 3, flat, 3 * dim) == EMBD_STATUS_OK);
    /* minilm_reference.jsonl, within 1e-4 */
    CHECK(fabsf(flat[0] - 0.0596337095f) < 1e-4f);
    CHECK(fabsf(flat[2 * dim] - -0.0191084277f) < 1e-4f);
    /* the same vectors through embd_encode */
    float *ref = calloc(3 * dim, sizeof *ref);
    CHECK(ref != NULL && embd_encode(m, texts, 3, ref, 3 * dim) == EMBD_STATUS_OK);
    for (size_t j = 0; ref != NULL && j < 3 * dim; ++j) CHECK(fabsf(ref[j] - flat[j]) < 1e-6f);
    float sim = 0;
    CHECK(embd_similarity(flat, flat + 2 * dim, dim, &sim) == EMBD_STATUS_OK && sim < 0.9f);

    /* tokenize / countTokens */
    uint32_t ids[256];
    size_t n = 0;
    CHECK(embd_tokenize(m, texts[0], lens[0], ids, 256, &n) == EMBD_STATUS_OK && n == 12);
    CHECK(ids[0] == 101 && ids[11] == 102);
    CHECK(embd_tokenize(m, NULL, 0, ids, 256, &n) == EMBD_STATUS_OK && n == 2);
    CHECK(embd_count_tokens(m, texts[0], lens[0], &n) == EMBD_STATUS_OK && n == 12);
    CHECK(embd_count_tokens(m, "a\0b", 3, &n) == EMBD_STATUS_OK && n == 3);

    /* errors: status + message read right after the failing call */
    const char bad[] = "ok \xff";
    items[0].ptr = bad;
    items[0].len = sizeof bad - 1;
    st = embd_encode_texts(m, items, 1, flat, dim);
    CHECK(st == EMBD_STATUS_INVALID_UTF8);
    CHECK(strstr(embd_last_error(), "UTF-8") != NULL);
    CHECK(strcmp(embd_status_str(st), "") != 0);
    embd_model *none = NULL;
    CHECK(embd_open("/nonexistent/model.weights", NULL, &none) == EMBD_STATUS_NOT_FOUND && none == NULL);
    CHECK(strstr(embd_last_error(), "/nonexistent/model.weights") != NULL);

    free(ref);
    free(flat);
    embd_free(m); /* deinit */
    if (failures) {
        fprintf(stderr, "swift_c_calls: %d failure(s)\n", failures);
        return 1;
    }
    printf("swift_c_calls: ok\n");
    return 0;
}

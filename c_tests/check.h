/* Tiny test helpers shared by the C tests (C11 and C++17). */
#ifndef EMBD_CHECK_H
#define EMBD_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define CHECK_UNUSED __attribute__((unused))
#else
#define CHECK_UNUSED
#endif

static int check_failures = 0;

/* True if `needle` is NULL or occurs in the last error message. */
CHECK_UNUSED static int msg_has(const char *needle) {
    return needle == NULL || strstr(embd_last_error(), needle) != NULL;
}

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                    \
        }                                                                        \
    } while (0)

/* Checks a status and that the last-error message mentions `needle`. */
#define CHECK_ST(expr, want, needle)                                              \
    do {                                                                          \
        int st_ = (int)(expr);                                                    \
        if (st_ != (int)(want)) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %d (%s), want %d; last error: %s\n", \
                    __FILE__, __LINE__, #expr, st_, embd_status_str(st_), (int)(want), \
                    embd_last_error());                                           \
            check_failures++;                                                     \
        } else if (!msg_has(needle)) {                                            \
            fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", __FILE__,  \
                    __LINE__, #expr, embd_last_error(), (needle) ? (const char *)(needle) : ""); \
            check_failures++;                                                     \
        }                                                                         \
    } while (0)

#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

CHECK_UNUSED static int check_done(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* The model path: argv[1], else the compile-time EMBD_TEST_MODEL. Exits with a
 * clear message if the file does not exist. */
CHECK_UNUSED static const char *test_model_path(int argc, char **argv) {
    const char *p = argc > 1 ? argv[1] : EMBD_TEST_MODEL;
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr,
                "model file %s not found: this test needs the converted "
                "all-MiniLM-L6-v2 (models/all-MiniLM-L6-v2.weights)\n", p);
        exit(1);
    }
    fclose(f);
    return p;
}

/* Reference texts and the first 8 floats of their sentence-transformers
 * embeddings, copied from shared/reference/minilm_reference.jsonl. */
#define REF_N 3
CHECK_UNUSED static const char *const ref_texts[REF_N] = {
    "Return true if the object is a frame object.",
    "A classic mbox mailbox.",
    "The caf\xc3\xa9 served cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e to a na\xc3\xafve se\xc3\xb1or from Z\xc3\xbcrich.",
};
CHECK_UNUSED static const float ref_head[REF_N][8] = {
    {0.0596337095f, 0.00431673415f, -0.053703893f, 0.0180297252f, 0.0684356391f, -0.0169921722f, 0.0906027481f, -0.0304465853f},
    {-0.0191084277f, 0.0800412074f, 0.0267341658f, 0.0412592031f, 0.0199467987f, -0.0471359715f, 0.0582975969f, -0.040594887f},
    {0.0237144325f, -0.020605145f, -0.0125984224f, -0.0111153219f, 0.012283585f, -0.0228221137f, 0.0698201135f, 0.004602361f},
};
CHECK_UNUSED static const unsigned ref_ids_0[12] = {101, 2709, 2995, 2065, 1996, 4874, 2003, 1037, 4853, 4874, 1012, 102};

CHECK_UNUSED static float max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0.0f;
    size_t i;
    for (i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (d > m) m = d;
    }
    return m;
}

#endif

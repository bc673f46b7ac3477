/* Every model of tests/data/families.tsv and tests/data/static.tsv through the C API: ids (embd_tokenize,
 * embd_count_tokens) identical to sentence-transformers' and embeddings within
 * 1e-5 (cosine >= 0.99999) on every line of its reference
 * (shared/reference/<folder>_reference.jsonl), batched and one at a time (the
 * same bits); and the ids of every line of its tokenizer case file (ids without
 * truncation: a longer text gives its first max_seq_length - 1 ids and the
 * closing special token). A static model's reference has its own ids (no special
 * tokens; model2vec's already cut and without [UNK]) and the zero vector for a
 * text without tokens.
 *
 * argv[1] (default EMBD_TEST_FAMILIES_DIR) holds families.list (one check per
 * line: the model's name and the stem of its expected file), <name>.weights
 * (converted by `embd convert`) and the .expected files, all written by
 * c_tests/families_expected.py from the table; c_tests/run.sh makes them. */
#include <stdint.h>

#include "embedder.h"
#include "check.h"

#ifndef EMBD_TEST_FAMILIES_DIR
#define EMBD_TEST_FAMILIES_DIR "families"
#endif

#define MAX_TEXT (1u << 20)
#define MAX_IDS 4096
#define MAX_DIM 4096
#define MAX_LINES 4000

typedef struct {
    char *text;
    size_t len;
    uint32_t *ids;
    size_t n_ids;
    float *emb;
    size_t dim;
} expected_line;

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Reads one record; 1 on success, 0 at the end of the file. Exits on a malformed file. */
static int read_line(FILE *f, char *hex, expected_line *e) {
    size_t i;
    if (fscanf(f, "%zu", &e->len) != 1) return 0;
    REQUIRE(e->len < MAX_TEXT);
    REQUIRE(fscanf(f, "%2097151s", hex) == 1);
    e->text = (char *)malloc(e->len + 1);
    REQUIRE(e->text);
    if (e->len == 0) {
        REQUIRE(strcmp(hex, "-") == 0);
    } else {
        REQUIRE(strlen(hex) == 2 * e->len);
        for (i = 0; i < e->len; i++) {
            int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
            REQUIRE(hi >= 0 && lo >= 0);
            e->text[i] = (char)(hi * 16 + lo);
        }
    }
    e->text[e->len] = '\0';
    REQUIRE(fscanf(f, "%zu", &e->n_ids) == 1 && e->n_ids <= MAX_IDS);
    e->ids = (uint32_t *)malloc((e->n_ids + 1) * sizeof(uint32_t));
    REQUIRE(e->ids);
    for (i = 0; i < e->n_ids; i++) {
        unsigned long v;
        REQUIRE(fscanf(f, "%lu", &v) == 1);
        e->ids[i] = (uint32_t)v;
    }
    REQUIRE(fscanf(f, "%zu", &e->dim) == 1 && e->dim <= MAX_DIM);
    e->emb = (float *)malloc((e->dim + 1) * sizeof(float));
    REQUIRE(e->emb);
    for (i = 0; i < e->dim; i++) REQUIRE(fscanf(f, "%f", &e->emb[i]) == 1);
    return 1;
}

static double cosine(const float *a, const float *b, size_t n) {
    double dot = 0, na = 0, nb = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return dot / (sqrt(na) * sqrt(nb));
}

static int is_zero(const float *a, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (a[i] != 0.0f) return 0;
    return 1;
}

/* `name`.weights against `expected`.expected: ids of every line; with
 * embeddings (a reference file), the embeddings too. */
static void check_model(const char *dir, const char *name, const char *expected) {
    char path[4096], exp_path[4096];
    FILE *f;
    char *hex = (char *)malloc(2 * MAX_TEXT + 2);
    expected_line *lines = (expected_line *)calloc(MAX_LINES, sizeof(expected_line));
    embd_text *texts = (embd_text *)calloc(MAX_LINES, sizeof(embd_text));
    size_t n = 0, i, dim;
    embd_model *m = NULL;
    float *batch = NULL, *one = NULL;
    uint32_t *ids = (uint32_t *)malloc(MAX_IDS * sizeof(uint32_t));
    embd_status st;
    int failures_before = check_failures;

    REQUIRE(hex && lines && texts && ids);
    snprintf(path, sizeof path, "%s/%s.weights", dir, name);
    snprintf(exp_path, sizeof exp_path, "%s/%s.expected", dir, expected);
    f = fopen(exp_path, "r");
    if (!f) {
        fprintf(stderr, "%s not found: c_tests/run.sh writes it (families_expected.py)\n", exp_path);
        exit(1);
    }
    while (n < MAX_LINES && read_line(f, hex, &lines[n])) n++;
    fclose(f);
    REQUIRE(n >= 50);

    st = embd_open(path, NULL, &m);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open %s: %s: %s (c_tests/run.sh converts it)\n", path,
                embd_status_str(st), embd_last_error());
        exit(1);
    }
    dim = embd_dim(m);
    REQUIRE(lines[0].dim == 0 || dim == lines[0].dim);

    for (i = 0; i < n; i++) {
        size_t got = 0, count = 0, max = embd_max_seq_length(m);
        size_t want = lines[i].n_ids;
        if (max > 0 && want > max) {
            /* Cut on the right: the first max - 1 ids, then the closing one. */
            lines[i].ids[max - 1] = lines[i].ids[want - 1];
            want = max;
        }
        CHECK_ST(embd_tokenize(m, lines[i].text, lines[i].len, ids, MAX_IDS, &got), EMBD_STATUS_OK, NULL);
        if (got != want || memcmp(ids, lines[i].ids, got * sizeof(uint32_t)) != 0) {
            fprintf(stderr, "%s / %s line %u: ids differ (%u ids, expected %u)\n", name, expected,
                    (unsigned)(i + 1), (unsigned)got, (unsigned)want);
            check_failures++;
        }
        CHECK_ST(embd_count_tokens(m, lines[i].text, lines[i].len, &count), EMBD_STATUS_OK, NULL);
        CHECK(count == want);
        texts[i].ptr = lines[i].text;
        texts[i].len = lines[i].len;
    }
    if (lines[0].dim == 0) {
        printf("%s / %s: ids of %u lines checked, %s\n", name, expected, (unsigned)n,
               check_failures == failures_before ? "ok" : "FAILED");
        goto done;
    }

    batch = (float *)calloc(n * dim, sizeof(float));
    one = (float *)calloc(dim, sizeof(float));
    REQUIRE(batch && one);
    CHECK_ST(embd_encode_texts(m, texts, n, batch, n * dim), EMBD_STATUS_OK, NULL);
    for (i = 0; i < n; i++) {
        float d = max_abs_diff(batch + i * dim, lines[i].emb, dim);
        /* A text without a token (a static model's empty text) is the zero vector. */
        double c = is_zero(lines[i].emb, dim) && d == 0.0f ? 1.0
                                                           : cosine(batch + i * dim, lines[i].emb, dim);
        if (!(d <= 1e-5f) || !(c >= 0.99999)) {
            fprintf(stderr, "%s line %u: max |diff| %g, cosine %.9f\n", name, (unsigned)(i + 1), d, c);
            check_failures++;
        }
        /* alone == in the batch, bit for bit */
        CHECK_ST(embd_encode_texts(m, &texts[i], 1, one, dim), EMBD_STATUS_OK, NULL);
        CHECK(memcmp(one, batch + i * dim, dim * sizeof(float)) == 0);
    }
    printf("%s: %u lines checked, %s\n", name, (unsigned)n,
           check_failures == failures_before ? "ok" : "FAILED");

done:
    embd_free(m);
    for (i = 0; i < n; i++) {
        free(lines[i].text);
        free(lines[i].ids);
        free(lines[i].emb);
    }
    free(batch);
    free(one);
    free(ids);
    free(texts);
    free(lines);
    free(hex);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : EMBD_TEST_FAMILIES_DIR;
    char path[4096], name[256], expected[256];
    int checks = 0;
    FILE *list;
    snprintf(path, sizeof path, "%s/families.list", dir);
    list = fopen(path, "r");
    if (!list) {
        fprintf(stderr, "%s not found: c_tests/run.sh writes it (families_expected.py)\n", path);
        return 1;
    }
    while (fscanf(list, "%255s %255s", name, expected) == 2) {
        check_model(dir, name, expected);
        checks++;
    }
    fclose(list);
    REQUIRE(checks > 0);
    return check_done("families");
}

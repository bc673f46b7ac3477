/* Race check: one embd_model handle shared by 8 threads, each embedding
 * different texts and batches for many rounds, must give bit for bit the
 * vectors (and token ids) of a sequential run. Also calls embd_tokenize,
 * embd_count_tokens, embd_dim, and provokes EMBD_STATUS_INVALID_UTF8 with a
 * thread-specific message now and then, to exercise the per-thread
 * embd_last_error.
 *
 * Built to run under a race detector (helgrind, DRD, ThreadSanitizer) on a
 * tiny model; see c_tests/race/README.md. Manual check, not part of CI.
 *
 *   race_threads MODEL.weights [ROUNDS=20] [THREADS_PER_CALL=2]
 *
 * Exit status: 0 if every comparison matched, 1 otherwise (2 on bad usage or a
 * failed set-up).
 */
#include "embedder.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_THREADS 8
#define N_TEXTS 16
#define MAX_BATCH 6
#define MAX_IDS 512

/* Text 15 is long (well over 96 tokens, truncated to the model's maximum) so
 * that one call splits its kernels over the worker threads (the parallel
 * column blocks of src/kernels/gemm.rs and the per-head attention split). */
static const char *const texts[N_TEXTS] = {
    "The cat sits outside",
    "A man is playing guitar",
    "I love pasta",
    "Do you like pizza?",
    "The new movie is awesome",
    "The new movie is so great",
    "A classic mbox mailbox.",
    "Return true if the object is a frame object.",
    "",
    "the quick brown fox jumps over the lazy dog",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich",
    "data race: threads read and write one vector at once?!",
    "one two three four five six seven eight nine ten",
    "\xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80 unknown words",
    "red blue green big small house car tree sky sun moon",
    "the quick brown fox jumps over the lazy dog and the dog runs fast to the "
    "big red house where the cat sits outside in the sun reading a book; the "
    "man is playing guitar, the woman is playing piano, and the new movie is so "
    "great that all of them love it. one two three four five six seven eight "
    "nine ten, what when where why how who, not no yes all some many few more "
    "most very: the quick brown fox jumps over the lazy dog again and again "
    "while the moon and the sky and the water and the fire and the tree stay.",
};

static embd_model *model;
static size_t dim;
static float *ref_vec;                 /* N_TEXTS x dim, sequential */
static uint32_t ref_ids[N_TEXTS][MAX_IDS];
static size_t ref_n_ids[N_TEXTS];
static int rounds = 20;

struct result {
    long calls;
    long failures;
    long errors_checked;
};
static struct result results[N_THREADS];

#define FAIL(id, ...)                                  \
    do {                                               \
        fprintf(stderr, "thread %d: ", (id));          \
        fprintf(stderr, __VA_ARGS__);                  \
        fputc('\n', stderr);                           \
        results[(id)].failures++;                      \
    } while (0)

static int same_vec(const float *a, const float *b) {
    return memcmp(a, b, dim * sizeof(float)) == 0;
}

static void *worker(void *arg) {
    const int id = (int)(intptr_t)arg;
    struct result *res = &results[id];
    float *out = (float *)malloc(MAX_BATCH * dim * sizeof(float));
    uint32_t *ids = (uint32_t *)malloc(MAX_IDS * sizeof(uint32_t));
    char bad[64];
    char want[160];
    int r, j;
    if (!out || !ids) {
        FAIL(id, "out of memory");
        free(out);
        free(ids);
        return NULL;
    }
    for (r = 0; r < rounds; r++) {
        embd_status st;
        /* 1. One NUL-terminated text through embd_encode. */
        {
            int t = (id * 5 + r) % N_TEXTS;
            const char *p = texts[t];
            st = embd_encode(model, &p, 1, out, dim);
            res->calls++;
            if (st != EMBD_STATUS_OK)
                FAIL(id, "round %d: embd_encode(text %d): %s: %s", r, t, embd_status_str(st),
                     embd_last_error());
            else if (!same_vec(out, ref_vec + (size_t)t * dim))
                FAIL(id, "round %d: embd_encode(text %d) differs from the sequential vector", r, t);
        }
        /* 2. A batch of 1..MAX_BATCH different texts through embd_encode_texts. */
        {
            int n = 1 + (id + r) % MAX_BATCH, idx[MAX_BATCH];
            embd_text batch[MAX_BATCH];
            for (j = 0; j < n; j++) {
                idx[j] = (id * 3 + r + j * 7) % N_TEXTS;
                batch[j].ptr = texts[idx[j]];
                batch[j].len = strlen(texts[idx[j]]);
            }
            st = embd_encode_texts(model, batch, (size_t)n, out, (size_t)n * dim);
            res->calls++;
            if (st != EMBD_STATUS_OK)
                FAIL(id, "round %d: embd_encode_texts(%d texts): %s: %s", r, n,
                     embd_status_str(st), embd_last_error());
            else
                for (j = 0; j < n; j++)
                    if (!same_vec(out + (size_t)j * dim, ref_vec + (size_t)idx[j] * dim))
                        FAIL(id, "round %d: batch row %d (text %d) differs from the sequential vector",
                             r, j, idx[j]);
        }
        /* 3. Tokenize, count, dim. */
        {
            int t = (id + r * 3) % N_TEXTS;
            size_t n_ids = 0, n_count = 0;
            st = embd_tokenize(model, texts[t], strlen(texts[t]), ids, MAX_IDS, &n_ids);
            res->calls++;
            if (st != EMBD_STATUS_OK)
                FAIL(id, "round %d: embd_tokenize(text %d): %s", r, t, embd_last_error());
            else if (n_ids != ref_n_ids[t] || memcmp(ids, ref_ids[t], n_ids * sizeof(uint32_t)) != 0)
                FAIL(id, "round %d: embd_tokenize(text %d) differs from the sequential ids", r, t);
            st = embd_count_tokens(model, texts[t], strlen(texts[t]), &n_count);
            res->calls++;
            if (st != EMBD_STATUS_OK || n_count != ref_n_ids[t])
                FAIL(id, "round %d: embd_count_tokens(text %d) = %zu, want %zu", r, t, n_count,
                     ref_n_ids[t]);
            res->calls++;
            if (embd_dim(model) != dim) FAIL(id, "round %d: embd_dim changed", r);
        }
        /* 4. Every third round: a batch whose text k has invalid UTF-8 at a
         * thread- and round-specific offset; the message must be this thread's
         * own, and must survive the following successful calls (they do not
         * clear it) while the other threads set theirs. */
        if ((r + id) % 3 == 0) {
            int k = (id + r) % 3, off = id + (r % 5);
            embd_text batch[3];
            memset(bad, 'a', sizeof bad);
            bad[off] = (char)0xff;
            for (j = 0; j < 3; j++) {
                batch[j].ptr = texts[(id + j) % N_TEXTS];
                batch[j].len = strlen(batch[j].ptr);
            }
            batch[k].ptr = bad;
            batch[k].len = (size_t)off + 4;
            snprintf(want, sizeof want,
                     "texts[%d] is not valid UTF-8 (invalid byte sequence at byte offset %d)", k, off);
            st = embd_encode_texts(model, batch, 3, out, 3 * dim);
            res->calls++;
            res->errors_checked++;
            if (st != EMBD_STATUS_INVALID_UTF8)
                FAIL(id, "round %d: invalid UTF-8 gave %s, want EMBD_STATUS_INVALID_UTF8", r,
                     embd_status_str(st));
            else if (strstr(embd_last_error(), want) == NULL)
                FAIL(id, "round %d: last error \"%s\" lacks \"%s\"", r, embd_last_error(), want);
            /* A successful call in between, then the same message again. */
            {
                size_t n_count = 0;
                st = embd_count_tokens(model, texts[0], strlen(texts[0]), &n_count);
                res->calls++;
                if (st != EMBD_STATUS_OK || n_count != ref_n_ids[0])
                    FAIL(id, "round %d: embd_count_tokens after an error failed", r);
                if (strstr(embd_last_error(), want) == NULL)
                    FAIL(id, "round %d: last error changed to \"%s\" after a successful call", r,
                         embd_last_error());
            }
        }
    }
    free(out);
    free(ids);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t th[N_THREADS];
    embd_options *o;
    size_t threads_per_call = 2;
    long calls = 0, failures = 0, errors = 0;
    int i, j;
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.weights [ROUNDS=20] [THREADS_PER_CALL=2]\n", argv[0]);
        return 2;
    }
    if (argc > 2) rounds = atoi(argv[2]);
    if (argc > 3) threads_per_call = (size_t)atoi(argv[3]);
    if (rounds < 1) rounds = 1;

    o = embd_options_new();
    if (!o || embd_options_set_threads(o, threads_per_call) != EMBD_STATUS_OK) {
        fprintf(stderr, "options: %s\n", embd_last_error());
        return 2;
    }
    if (embd_open(argv[1], o, &model) != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open(%s): %s\n", argv[1], embd_last_error());
        return 2;
    }
    embd_options_free(o);
    dim = embd_dim(model);
    if (dim == 0) {
        fprintf(stderr, "embd_dim: %s\n", embd_last_error());
        return 2;
    }

    /* Sequential references: each text alone, in the main thread. */
    ref_vec = (float *)malloc(N_TEXTS * dim * sizeof(float));
    if (!ref_vec) return 2;
    for (i = 0; i < N_TEXTS; i++) {
        embd_text t;
        t.ptr = texts[i];
        t.len = strlen(texts[i]);
        if (embd_encode_texts(model, &t, 1, ref_vec + (size_t)i * dim, dim) != EMBD_STATUS_OK ||
            embd_tokenize(model, texts[i], t.len, ref_ids[i], MAX_IDS, &ref_n_ids[i]) != EMBD_STATUS_OK) {
            fprintf(stderr, "sequential text %d: %s\n", i, embd_last_error());
            return 2;
        }
    }
    /* Sanity: the references are not all alike, the long text reaches the
     * maximum length, and a sequential batch of all 16 texts gives the same
     * rows (batch invariance; a mismatch here is not a race). */
    for (i = 1; i < N_TEXTS; i++)
        if (same_vec(ref_vec, ref_vec + (size_t)i * dim)) {
            fprintf(stderr, "texts 0 and %d give the same vector: the model is degenerate\n", i);
            return 2;
        }
    printf("model: dim %zu, max_seq_length %zu, long text %zu tokens, %zu threads per call\n",
           dim, embd_max_seq_length(model), ref_n_ids[N_TEXTS - 1], threads_per_call);
    {
        embd_text all[N_TEXTS];
        float *batch = (float *)malloc(N_TEXTS * dim * sizeof(float));
        if (!batch) return 2;
        for (i = 0; i < N_TEXTS; i++) {
            all[i].ptr = texts[i];
            all[i].len = strlen(texts[i]);
        }
        if (embd_encode_texts(model, all, N_TEXTS, batch, N_TEXTS * dim) != EMBD_STATUS_OK) {
            fprintf(stderr, "sequential batch: %s\n", embd_last_error());
            return 2;
        }
        for (i = 0; i < N_TEXTS; i++)
            if (!same_vec(batch + (size_t)i * dim, ref_vec + (size_t)i * dim)) {
                fprintf(stderr, "sequential batch row %d differs from the text alone (batch invariance, not a race)\n", i);
                failures++;
            }
        free(batch);
    }

    for (i = 0; i < N_THREADS; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 2;
        }
    for (i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    for (j = 0; j < N_THREADS; j++) {
        calls += results[j].calls;
        failures += results[j].failures;
        errors += results[j].errors_checked;
    }
    free(ref_vec);
    embd_free(model);
    printf("race_threads: %d threads x %d rounds: %ld calls, %ld provoked errors, %ld mismatches\n",
           N_THREADS, rounds, calls, errors, failures);
    if (failures) {
        fprintf(stderr, "race_threads: FAILED\n");
        return 1;
    }
    printf("race_threads: ok\n");
    return 0;
}

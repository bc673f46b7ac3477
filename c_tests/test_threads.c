/* One model handle shared by 8 threads, each encoding different inputs many
 * times, gives exactly the vectors of a sequential run. */
#include "embedder.h"
#include "check.h"

#include <pthread.h>

#define N_THREADS 8
#define N_TEXTS 8
#define DEFAULT_ROUNDS 6

static int rounds = DEFAULT_ROUNDS; /* EMBD_TEST_ROUNDS overrides (valgrind runs use 1) */

static const char *const texts[N_TEXTS] = {
    "The cat sits outside",
    "A man is playing guitar",
    "I love pasta",
    "Do you like pizza?",
    "The new movie is awesome",
    "The new movie is so great",
    "A classic mbox mailbox.",
    "Return true if the object is a frame object.",
};

static embd_model *model;
static size_t dim;
static float *expected; /* N_TEXTS x dim, sequential */
static int thread_failures[N_THREADS];

static void *worker(void *arg) {
    int id = (int)(size_t)arg, r;
    float *out = (float *)malloc(2 * dim * sizeof(float));
    if (!out) {
        thread_failures[id]++;
        return NULL;
    }
    for (r = 0; r < rounds; r++) {
        /* two different texts per call, varying with the thread and round */
        const char *pair[2];
        int a = (id + r) % N_TEXTS, b = (id * 3 + r + 1) % N_TEXTS;
        embd_status st;
        pair[0] = texts[a];
        pair[1] = texts[b];
        st = embd_encode(model, pair, 2, out, 2 * dim);
        if (st != EMBD_STATUS_OK) {
            fprintf(stderr, "thread %d: %s: %s\n", id, embd_status_str(st), embd_last_error());
            thread_failures[id]++;
            break;
        }
        if (max_abs_diff(out, expected + (size_t)a * dim, dim) > 1e-6f ||
            max_abs_diff(out + dim, expected + (size_t)b * dim, dim) > 1e-6f) {
            fprintf(stderr, "thread %d round %d: vectors differ from the sequential run\n", id, r);
            thread_failures[id]++;
        }
        /* the per-thread error message is independent */
        if (embd_dim(NULL) != 0 || strstr(embd_last_error(), "model is NULL") == NULL) thread_failures[id]++;
    }
    free(out);
    return NULL;
}

int main(int argc, char **argv) {
    const char *path = test_model_path(argc, argv);
    pthread_t th[N_THREADS];
    size_t i;
    embd_options *o = embd_options_new();
    const char *env_rounds = getenv("EMBD_TEST_ROUNDS");
    if (env_rounds && atoi(env_rounds) > 0) rounds = atoi(env_rounds);
    REQUIRE(o);
    /* 2 worker threads per call, so 8 callers x 2 exercise nested parallelism */
    REQUIRE(embd_options_set_threads(o, 2) == EMBD_STATUS_OK);
    if (embd_open(path, o, &model) != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_open: %s\n", embd_last_error());
        return 1;
    }
    embd_options_free(o);
    dim = embd_dim(model);
    expected = (float *)malloc(N_TEXTS * dim * sizeof(float));
    REQUIRE(expected);
    for (i = 0; i < N_TEXTS; i++)
        REQUIRE(embd_encode(model, &texts[i], 1, expected + i * dim, dim) == EMBD_STATUS_OK);

    for (i = 0; i < N_THREADS; i++) REQUIRE(pthread_create(&th[i], NULL, worker, (void *)i) == 0);
    for (i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    for (i = 0; i < N_THREADS; i++) check_failures += thread_failures[i];

    free(expected);
    embd_free(model);
    return check_done("threads");
}

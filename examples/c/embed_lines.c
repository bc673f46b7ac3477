/* embed_lines: embeds each line of standard input with the embedder C API and
 * prints one JSON line per input line, like `embd encode`:
 *
 *   {"embedding": [0.0596337, 0.00431673, ...]}      (default)
 *   [0.0596337, 0.00431673, ...]                      (--array)
 *
 * Usage: embed_lines [--array] [--batch N] [--threads N] [--precision P] [MODEL]
 *   MODEL defaults to $EMBD_MODEL. P is f32, bf16, int8 or default (the
 *   file's own: int8 for files converted with --dtype int8, bf16 for
 *   --dtype bf16, else f32). Lines end with "\n" (a trailing "\r" is
 *   dropped); a final newline does not start another text; an empty line is
 *   the empty text. Input must be UTF-8.
 *
 * Exit status: 0 on success, 1 when the library reports an error (the
 * message names the status, its number and embd_last_error()), 2 on a usage
 * error. C11, no POSIX needed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <embedder.h>

static const char *prog = "embed_lines";

/* Prints a failed call's status and the calling thread's last error. */
static int fail(const char *what, embd_status st) {
    fprintf(stderr, "%s: %s: %s (status %d): %s\n", prog, what, embd_status_str(st), (int)st,
            embd_last_error());
    return 1;
}

static int usage(const char *msg) {
    if (msg != NULL) fprintf(stderr, "%s: %s\n", prog, msg);
    fprintf(stderr, "usage: %s [--array] [--batch N] [--threads N] [--precision f32|bf16|int8] [MODEL]\n"
                    "  reads one text per line on stdin, prints one JSON embedding per line;\n"
                    "  MODEL defaults to $EMBD_MODEL\n",
            prog);
    return 2;
}

static int parse_size(const char *s, size_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return 0;
    *out = (size_t)v;
    return 1;
}

/* The EMBD_PRECISION_* constant named `s` ("f32", "bf16", "int8", "default"),
 * by the library's own names (embd_precision_name); 0 if unknown. */
static int parse_precision(const char *s, embd_precision *out) {
    const embd_precision all[] = {EMBD_PRECISION_DEFAULT, EMBD_PRECISION_F32, EMBD_PRECISION_BF16,
                                  EMBD_PRECISION_INT8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        const char *name = embd_precision_name(all[i]);
        if (name != NULL && strcmp(s, name) == 0) {
            *out = all[i];
            return 1;
        }
    }
    return 0;
}

/* A growable byte buffer holding the lines of one batch back to back. */
typedef struct {
    char *data;
    size_t len, cap;
} buffer;

static int buffer_push(buffer *b, char c) {
    if (b->len == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        char *p = realloc(b->data, cap);
        if (p == NULL) return 0;
        b->data = p;
        b->cap = cap;
    }
    b->data[b->len++] = c;
    return 1;
}

/* Reads one line (without "\n" and a trailing "\r") onto the end of `b`.
 * Returns 1 when a line was read, 0 at end of input, -1 on a read or memory
 * error. A last line without "\n" still counts; an empty input has no line. */
static int read_line(FILE *in, buffer *b, size_t *line_len) {
    size_t start = b->len;
    int c, any = 0;
    while ((c = getc(in)) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (!buffer_push(b, (char)c)) return -1;
    }
    if (ferror(in)) return -1;
    if (!any) return 0;
    if (b->len > start && b->data[b->len - 1] == '\r') b->len--;
    *line_len = b->len - start;
    return 1;
}

static void print_row(const float *row, size_t dim, int as_array) {
    fputs(as_array ? "[" : "{\"embedding\": [", stdout);
    for (size_t j = 0; j < dim; ++j) printf(j ? ", %.9g" : "%.9g", (double)row[j]);
    fputs(as_array ? "]\n" : "]}\n", stdout);
}

/* Embeds the `n` lines held in `b` (lengths in `lens`) and prints them.
 * `first_line` is the 1-based line number of the first one (for messages). */
static int flush_batch(const embd_model *m, const buffer *b, const size_t *lens, size_t n,
                       embd_text *texts, float *out, size_t dim, int as_array, size_t first_line) {
    size_t off = 0;
    for (size_t i = 0; i < n; ++i) {
        texts[i].ptr = lens[i] ? b->data + off : NULL;
        texts[i].len = lens[i];
        off += lens[i];
    }
    embd_status st = embd_encode_texts(m, texts, n, out, n * dim);
    if (st != EMBD_STATUS_OK) {
        char what[64], msg[512];
        /* Copy the message now: the search below makes failing calls too. */
        snprintf(msg, sizeof msg, "%s", embd_last_error());
        size_t bad = n;
        if (st == EMBD_STATUS_INVALID_UTF8) {
            /* The message names texts[i] of this batch; find the input line. */
            size_t count = 0;
            for (bad = 0; bad < n; ++bad)
                if (embd_count_tokens(m, texts[bad].ptr, texts[bad].len, &count) == EMBD_STATUS_INVALID_UTF8) break;
        }
        if (bad < n)
            snprintf(what, sizeof what, "line %zu", first_line + bad);
        else
            snprintf(what, sizeof what, "lines %zu-%zu", first_line, first_line + n - 1);
        fprintf(stderr, "%s: %s: %s (status %d): %s\n", prog, what, embd_status_str(st), (int)st, msg);
        return 1;
    }
    for (size_t i = 0; i < n; ++i) print_row(out + i * dim, dim, as_array);
    return 0;
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    int as_array = 0;
    size_t batch = 32, threads = 0;
    embd_precision precision = EMBD_PRECISION_DEFAULT;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--array") == 0) {
            as_array = 1;
        } else if (strcmp(a, "--batch") == 0 || strcmp(a, "--threads") == 0) {
            size_t *dst = a[2] == 'b' ? &batch : &threads;
            if (i + 1 >= argc || !parse_size(argv[++i], dst)) return usage("expected a number after --batch/--threads");
        } else if (strcmp(a, "--precision") == 0) {
            if (i + 1 >= argc || !parse_precision(argv[++i], &precision))
                return usage("expected f32, bf16, int8 or default after --precision");
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(NULL);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage("unknown option");
        } else if (model_path == NULL) {
            model_path = a;
        } else {
            return usage("more than one model path");
        }
    }
    if (model_path == NULL) model_path = getenv("EMBD_MODEL");
    if (model_path == NULL || model_path[0] == '\0') return usage("no model: pass MODEL or set $EMBD_MODEL");
    if (batch == 0 || batch > EMBD_MAX_BATCH) return usage("--batch must be between 1 and EMBD_MAX_BATCH");

    if (embd_version_number() != EMBD_VERSION_NUMBER)
        fprintf(stderr, "%s: warning: header %s, library %s\n", prog, EMBD_VERSION_STRING, embd_version());

    embd_options *opts = embd_options_new();
    if (opts == NULL) return fail("embd_options_new", EMBD_STATUS_INTERNAL);
    embd_status st = embd_options_set_threads(opts, threads);
    if (st != EMBD_STATUS_OK) {
        embd_options_free(opts);
        return fail("embd_options_set_threads", st);
    }
    st = embd_options_set_precision(opts, precision);
    if (st != EMBD_STATUS_OK) {
        embd_options_free(opts);
        return fail("embd_options_set_precision", st);
    }
    embd_model *m = NULL;
    st = embd_open(model_path, opts, &m);
    embd_options_free(opts); /* embd_open does not keep it */
    if (st != EMBD_STATUS_OK) return fail("embd_open", st);

    int rc = 0;
    const size_t dim = embd_dim(m);
    buffer b = {NULL, 0, 0};
    size_t *lens = malloc(batch * sizeof *lens);
    embd_text *texts = malloc(batch * sizeof *texts);
    float *out = malloc(batch * dim * sizeof *out);
    if (lens == NULL || texts == NULL || out == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    }
    size_t n = 0, line_no = 0;
    while (rc == 0) {
        int r = read_line(stdin, &b, &lens[n]);
        if (r < 0) {
            fprintf(stderr, "%s: reading stdin: %s\n", prog, ferror(stdin) ? strerror(errno) : "out of memory");
            rc = 1;
            break;
        }
        if (r > 0) {
            ++n;
            ++line_no;
        }
        if (n > 0 && (n == batch || r == 0)) {
            rc = flush_batch(m, &b, lens, n, texts, out, dim, as_array, line_no - n + 1);
            n = 0;
            b.len = 0;
        }
        if (r == 0) break;
    }
    if (rc == 0 && fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing stdout: %s\n", prog, strerror(errno));
        rc = 1;
    }
    free(out);
    free(texts);
    free(lens);
    free(b.data);
    embd_free(m);
    return rc;
}

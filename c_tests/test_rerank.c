/* Cross-encoders through the C API (embd_rerank_*), against sentence-transformers'
 * CrossEncoder, for minilm-reranker (BERT, WordPiece) and xlmr-reranker-tiny
 * (XLM-R, Unigram, RoBERTa head): on every line of NAME_reference.jsonl the pair's ids
 * (and token types, where the file has them) are identical, the f32 score within 1e-5
 * and the logit within 1e-4; embd_rerank_rank gives NAME_rank.json's order; every
 * misuse gets its
 * status (never a crash): an embedding model opened as a reranker and the reverse,
 * empty query, no documents, top_k 0 or above the documents, raw not 0/1, NULLs,
 * too many documents, short buffers, a NUL inside a text.
 *
 * argv[1]: models/minilm-reranker.weights (scripts/fetch_reranker.sh), else
 * EMBD_TEST_RERANK_MODEL; argv[2]: the shared/reference/families folder, else
 * EMBD_TEST_FAMILIES; argv[3]: an embedding model, else EMBD_TEST_MODEL; argv[4]:
 * models/xlmr-reranker-tiny.weights (scripts/fetch_reranker.sh converts it), else the
 * file of that name beside the minilm-reranker model; qwen3-reranker-tiny.weights
 * beside it (Qwen3-Reranker, scored under an instruction with
 * embd_rerank_score_prompted), and deberta-reranker-tiny.weights (DeBERTa-v2). */
#include "embedder.h"
#include "check.h"

#include <stdint.h>

/* ---- a JSON reader just large enough for the reference files ---- */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static void put_utf8(char **o, unsigned long c) {
    unsigned char *u = (unsigned char *)*o;
    if (c < 0x80) {
        *u++ = (unsigned char)c;
    } else if (c < 0x800) {
        *u++ = (unsigned char)(0xC0 | (c >> 6));
        *u++ = (unsigned char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *u++ = (unsigned char)(0xE0 | (c >> 12));
        *u++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *u++ = (unsigned char)(0x80 | (c & 0x3F));
    } else {
        *u++ = (unsigned char)(0xF0 | (c >> 18));
        *u++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        *u++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *u++ = (unsigned char)(0x80 | (c & 0x3F));
    }
    *o = (char *)u;
}

/* Parses the JSON string at `p` (at its opening quote) into a new buffer;
 * `*len` gets its byte length (it may contain NUL). Returns the end. */
static const char *parse_string(const char *p, char **out, size_t *len) {
    char *buf, *o;
    REQUIRE(*p == '"');
    p++;
    buf = (char *)malloc(strlen(p) * 2 + 4);
    REQUIRE(buf);
    o = buf;
    while (*p != '"') {
        REQUIRE(*p != '\0');
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        p++;
        switch (*p) {
            case 'n': *o++ = '\n'; p++; break;
            case 't': *o++ = '\t'; p++; break;
            case 'r': *o++ = '\r'; p++; break;
            case 'b': *o++ = '\b'; p++; break;
            case 'f': *o++ = '\f'; p++; break;
            case 'u': {
                unsigned long c = strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
                p += 5;
                if (c >= 0xD800 && c < 0xDC00 && p[0] == '\\' && p[1] == 'u') {
                    unsigned long lo = strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
                    p += 6;
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                }
                put_utf8(&o, c);
                break;
            }
            default: *o++ = *p++; break; /* \" \\ \/ */
        }
    }
    *len = (size_t)(o - buf);
    *o = '\0';
    *out = buf;
    return p + 1;
}

/* The value of `"key":` in the object text `obj` (the first occurrence at
 * nesting depth 1), or NULL. */
static const char *find_key(const char *obj, const char *key) {
    const char *p = obj;
    int depth = 0;
    size_t klen = strlen(key);
    while (*p) {
        if (*p == '"') {
            const char *s = p + 1;
            const char *e = s;
            while (*e && *e != '"') e += (*e == '\\') ? 2 : 1;
            if (depth == 1 && (size_t)(e - s) == klen && memcmp(s, key, klen) == 0) {
                const char *v = skip_ws(e + 1);
                if (*v == ':') return skip_ws(v + 1);
            }
            p = e + 1;
            continue;
        }
        if (*p == '{' || *p == '[') depth++;
        if (*p == '}' || *p == ']') depth--;
        p++;
    }
    return NULL;
}

/* An array of non-negative integers at `p` into `out` (capacity `cap`). */
static size_t parse_uints(const char *p, uint32_t *out, size_t cap) {
    size_t n = 0;
    REQUIRE(*p == '[');
    p = skip_ws(p + 1);
    while (*p != ']') {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        REQUIRE(end != p && n < cap);
        out[n++] = (uint32_t)v;
        p = skip_ws(end);
        if (*p == ',') p = skip_ws(p + 1);
    }
    return n;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    long size;
    char *buf;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)size + 1);
    REQUIRE(buf);
    REQUIRE(fread(buf, 1, (size_t)size, f) == (size_t)size);
    buf[size] = '\0';
    fclose(f);
    return buf;
}

static embd_text text_of(const char *s, size_t len) {
    embd_text t;
    t.ptr = s;
    t.len = len;
    return t;
}

#define MAX_IDS 1024

/* Every reference line: ids, types (with `types`; a model without a token type table
 * reads none, and embd_rerank_tokenize gives it 0s), score and logit. */
static void check_reference(const embd_reranker *r, const char *families, const char *name, int want_lines,
                            int types) {
    char path[4096];
    char *data, *line, *next;
    int lines = 0;
    float worst_score = 0.0f, worst_logit = 0.0f;
    snprintf(path, sizeof path, "%s/%s_reference.jsonl", families, name);
    data = read_file(path);
    REQUIRE(data);
    for (line = data; line && *line; line = next) {
        char *q, *p, *prompt = NULL;
        size_t prompt_len = 0;
        const char *types_at, *prompt_at;
        size_t ql, pl, n_ids, n_types, n = 0, tokens = 0;
        uint32_t want_ids[MAX_IDS], want_types[MAX_IDS], ids[MAX_IDS], types_got[MAX_IDS];
        float score = 0.0f, logit = 0.0f, want_score, want_logit;
        unsigned char truncated = 9;
        embd_text tq, tp;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (*skip_ws(line) == '\0') continue;
        parse_string(find_key(line, "query"), &q, &ql);
        parse_string(find_key(line, "passage"), &p, &pl);
        /* An LLM reranker's line scored under its own instruction. */
        prompt_at = find_key(line, "prompt");
        if (prompt_at) parse_string(prompt_at, &prompt, &prompt_len);
        n_ids = parse_uints(find_key(line, "input_ids"), want_ids, MAX_IDS);
        /* A file without token types: all 0 (RoBERTa/XLM-R). */
        types_at = find_key(line, "token_type_ids");
        if (types_at) {
            n_types = parse_uints(types_at, want_types, MAX_IDS);
        } else {
            memset(want_types, 0, sizeof want_types);
            n_types = n_ids;
        }
        want_score = strtof(find_key(line, "score"), NULL);
        want_logit = strtof(find_key(line, "logit"), NULL);
        REQUIRE(n_ids == n_types);
        tq = text_of(q, ql);
        tp = text_of(p, pl);
        CHECK_ST(embd_rerank_tokenize(r, tq, tp, ids, types_got, MAX_IDS, &n), EMBD_STATUS_OK, NULL);
        /* (embd_rerank_tokenize frames a pair under the model's own instruction.) */
        if (!prompt && (n != n_ids || memcmp(ids, want_ids, n * 4) != 0 ||
                        (types && memcmp(types_got, want_types, n * 4) != 0))) {
            fprintf(stderr, "line %d: ids or types differ (%u vs %u ids)\n", lines + 1, (unsigned)n,
                    (unsigned)n_ids);
            check_failures++;
        }
        CHECK_ST(embd_rerank_score_prompted(r, prompt, &tq, &tp, 1, &score, &logit, 1, &tokens, &truncated),
                 EMBD_STATUS_OK, NULL);
        CHECK(tokens == n_ids);
        CHECK(truncated == 0 || truncated == 1);
        if (fabsf(score - want_score) > worst_score) worst_score = fabsf(score - want_score);
        if (fabsf(logit - want_logit) > worst_logit) worst_logit = fabsf(logit - want_logit);
        free(q);
        free(p);
        free(prompt);
        lines++;
    }
    printf("%s reference: %d lines, max |score diff| %.3g, max |logit diff| %.3g\n", name, lines, worst_score,
           worst_logit);
    CHECK(lines == want_lines);
    CHECK(worst_score <= 1e-5f);
    CHECK(worst_logit <= 1e-4f);
    free(data);
}

/* The rank file's order, and a cut to the first 10; with `misuse`, every misuse
 * of embd_rerank_rank. */
static void check_rank(const embd_reranker *r, const char *families, const char *name, int misuse) {
    char path[4096];
    char *data, *query, *docs[64];
    size_t ql, lens[64], n_docs = 0, i, n_out = 0;
    embd_text tdocs[64];
    size_t want[64], n_want = 0;
    embd_ranked out[64];
    const char *p;
    snprintf(path, sizeof path, "%s/%s_rank.json", families, name);
    data = read_file(path);
    REQUIRE(data);
    parse_string(find_key(data, "query"), &query, &ql);
    p = find_key(data, "documents");
    REQUIRE(p && *p == '[');
    p = skip_ws(p + 1);
    while (*p == '"') {
        REQUIRE(n_docs < 64);
        p = skip_ws(parse_string(p, &docs[n_docs], &lens[n_docs]));
        tdocs[n_docs] = text_of(docs[n_docs], lens[n_docs]);
        n_docs++;
        if (*p == ',') p = skip_ws(p + 1);
    }
    p = find_key(data, "ranking");
    REQUIRE(p);
    while ((p = strstr(p, "\"corpus_id\"")) != NULL) {
        p = skip_ws(strchr(p, ':') + 1);
        want[n_want++] = (size_t)strtoul(p, NULL, 10);
    }
    REQUIRE(n_want == n_docs);
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, n_docs, 0, out, 64, &n_out), EMBD_STATUS_OK,
             NULL);
    CHECK(n_out == n_docs);
    /* A document whose text another one repeats may take that one's place:
     * identical pairs get identical scores here (ties by index), while the
     * reference's batched, padded run breaks them by rounding noise. */
    for (i = 0; i < n_out; i++) {
        size_t a = out[i].index, w = want[i];
        int same_text = a < n_docs && lens[a] == lens[w] && memcmp(docs[a], docs[w], lens[w]) == 0;
        if (a != w && !same_text) {
            fprintf(stderr, "rank %u: document %u, want %u\n", (unsigned)i, (unsigned)out[i].index,
                    (unsigned)want[i]);
            check_failures++;
        }
        if (i > 0) CHECK(out[i - 1].score >= out[i].score);
    }
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, 10, 0, out, 10, &n_out), EMBD_STATUS_OK, NULL);
    CHECK(n_out == 10);
    for (i = 0; i < 10; i++)
        CHECK(out[i].index == want[i] ||
              (lens[out[i].index] == lens[want[i]] && memcmp(docs[out[i].index], docs[want[i]], lens[want[i]]) == 0));
    if (!misuse) goto done;

    /* Misuse: each with its status and a message naming it. */
    CHECK_ST(embd_rerank_rank(r, text_of("", 0), tdocs, n_docs, 1, 0, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "query is empty");
    CHECK(n_out == 0);
    CHECK_ST(embd_rerank_rank(r, text_of("  ", 2), tdocs, n_docs, 1, 0, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "query is empty");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, 0, 1, 0, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "no documents");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, 0, 0, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "top_k is 0");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, n_docs + 1, 0, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "more than the");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, 3, 2, out, 64, &n_out),
             EMBD_STATUS_INVALID_ARGUMENT, "raw");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, 10, 0, out, 9, &n_out),
             EMBD_STATUS_BUFFER_TOO_SMALL, NULL);
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), NULL, n_docs, 10, 0, out, 64, &n_out),
             EMBD_STATUS_NULL_ARGUMENT, "docs");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, n_docs, 10, 0, NULL, 64, &n_out),
             EMBD_STATUS_NULL_ARGUMENT, "out");
    CHECK_ST(embd_rerank_rank(r, text_of(query, ql), tdocs, EMBD_MAX_BATCH + 1, 10, 0, out, 64, &n_out),
             EMBD_STATUS_LIMIT_EXCEEDED, NULL);
    CHECK_ST(embd_rerank_rank(NULL, text_of(query, ql), tdocs, n_docs, 10, 0, out, 64, &n_out),
             EMBD_STATUS_NULL_ARGUMENT, "reranker");
done:
    for (i = 0; i < n_docs; i++) free(docs[i]);
    free(query);
    free(data);
}

static void check_misuse(const embd_reranker *r, const char *embedding_model, const char *reranker_model) {
    embd_text q = text_of("what is a file", 14), p = text_of("a file holds bytes", 18);
    embd_text joined = text_of("a fileholds bytes", 17);
    embd_text with_nul = text_of("a file\0holds bytes", 18), bad_utf8 = text_of("\xff", 1);
    float s[2], l[2];
    size_t n = 0;
    uint32_t ids[4];
    embd_reranker *r2 = NULL;
    embd_model *m = NULL;
    embd_options *o = embd_options_new();

    /* A NUL inside a text is text: cleaned away like any control character
     * (as HF's BertNormalizer), so the pair scores as without it. */
    CHECK_ST(embd_rerank_score(r, &q, &joined, 1, &s[0], &l[0], 1, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_rerank_score(r, &q, &with_nul, 1, &s[1], &l[1], 1, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK(s[0] == s[1] && l[0] == l[1]);
    CHECK_ST(embd_rerank_score(r, &q, &p, 1, s, NULL, 1, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_rerank_score(r, &q, &bad_utf8, 1, s, NULL, 1, NULL, NULL), EMBD_STATUS_INVALID_UTF8,
             "passages[0]");
    CHECK_ST(embd_rerank_score(r, &q, &p, 1, NULL, NULL, 1, NULL, NULL), EMBD_STATUS_INVALID_ARGUMENT,
             "both NULL");
    CHECK_ST(embd_rerank_score(r, &q, &p, 1, s, NULL, 0, NULL, NULL), EMBD_STATUS_BUFFER_TOO_SMALL, NULL);
    CHECK_ST(embd_rerank_score(r, NULL, &p, 1, s, NULL, 1, NULL, NULL), EMBD_STATUS_NULL_ARGUMENT, "queries");
    CHECK_ST(embd_rerank_score(r, &q, NULL, 1, s, NULL, 1, NULL, NULL), EMBD_STATUS_NULL_ARGUMENT, "passages");
    CHECK_ST(embd_rerank_score(r, &q, &p, EMBD_MAX_BATCH + 1, s, NULL, 1, NULL, NULL),
             EMBD_STATUS_LIMIT_EXCEEDED, NULL);
    CHECK_ST(embd_rerank_score(r, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_rerank_tokenize(r, q, p, ids, NULL, 4, &n), EMBD_STATUS_BUFFER_TOO_SMALL, NULL);
    CHECK(n > 4); /* [CLS] 4 words [SEP] 4 words [SEP] */
    CHECK_ST(embd_rerank_tokenize(r, q, p, NULL, NULL, 0, NULL), EMBD_STATUS_NULL_ARGUMENT, "n_out");

    /* An embedding model is not a reranker, and the reverse. */
    CHECK_ST(embd_rerank_open(embedding_model, NULL, &r2), EMBD_STATUS_MODEL, "open it as an embedder");
    CHECK(r2 == NULL);
    CHECK_ST(embd_open(reranker_model, NULL, &m), EMBD_STATUS_MODEL, "Reranker");
    CHECK(m == NULL);
    /* An embedding option on a reranker. */
    REQUIRE(o);
    CHECK_ST(embd_options_set_normalize(o, 0), EMBD_STATUS_OK, NULL);
    CHECK_ST(embd_rerank_open(reranker_model, o, &r2), EMBD_STATUS_INVALID_ARGUMENT, "normalize");
    embd_options_free(o);
    /* Handles of the other type. */
    CHECK_ST(embd_open(embedding_model, NULL, &m), EMBD_STATUS_OK, NULL);
    CHECK(embd_rerank_num_labels((const embd_reranker *)m) == 0);
    CHECK(msg_has("not an embd_reranker"));
    CHECK(embd_dim((const embd_model *)r) == 0);
    CHECK(msg_has("not an embd_model"));
    embd_free(m);
    embd_rerank_free(NULL);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : EMBD_TEST_RERANK_MODEL;
    const char *families = argc > 2 ? argv[2] : EMBD_TEST_FAMILIES;
    const char *embedding_model = argc > 3 ? argv[3] : EMBD_TEST_MODEL;
    embd_reranker *r = NULL;
    embd_options *o = embd_options_new();
    embd_status st;
    char xlmr[4096];
    REQUIRE(o);
    CHECK_ST(embd_options_set_max_seq_length(o, 256), EMBD_STATUS_OK, NULL);
    st = embd_rerank_open(path, o, &r);
    embd_options_free(o);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_rerank_open(%s): %s: %s (run scripts/fetch_reranker.sh)\n", path,
                embd_status_str(st), embd_last_error());
        return 1;
    }
    CHECK(embd_rerank_num_labels(r) == 1);
    CHECK(embd_rerank_max_seq_length(r) == 256);
    check_reference(r, families, "minilm-reranker", 151, 1);
    check_rank(r, families, "minilm-reranker", 1);
    check_misuse(r, embedding_model, path);
    embd_rerank_free(r);

    /* The XLM-R cross-encoder at its own maximum length (128, as its reference). */
    if (argc > 4) {
        snprintf(xlmr, sizeof xlmr, "%s", argv[4]);
    } else {
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) + 1 : 0;
        snprintf(xlmr, sizeof xlmr, "%.*sxlmr-reranker-tiny.weights", dir_len, path);
    }
    r = NULL;
    st = embd_rerank_open(xlmr, NULL, &r);
    if (st != EMBD_STATUS_OK) {
        fprintf(stderr, "embd_rerank_open(%s): %s: %s (run scripts/fetch_reranker.sh)\n", xlmr,
                embd_status_str(st), embd_last_error());
        return 1;
    }
    CHECK(embd_rerank_num_labels(r) == 1);
    CHECK(embd_rerank_max_seq_length(r) == 128);
    check_reference(r, families, "xlmr-reranker-tiny", 260, 1);
    check_rank(r, families, "xlmr-reranker-tiny", 0);
    /* A cross-encoder without a prompt template refuses a prompt, by name. */
    {
        embd_text tq = text_of("q", 1), tp = text_of("p", 1);
        float score = 0.0f;
        embd_ranked best;
        size_t n_best = 9;
        CHECK_ST(embd_rerank_score_prompted(r, "x", &tq, &tp, 1, &score, NULL, 1, NULL, NULL),
                 EMBD_STATUS_INVALID_ARGUMENT, "takes no prompt");
        CHECK_ST(embd_rerank_rank_prompted(r, "x", tq, &tp, 1, 1, 0, &best, 1, &n_best),
                 EMBD_STATUS_INVALID_ARGUMENT, "takes no prompt");
        CHECK(n_best == 0);
    }
    embd_rerank_free(r);

    /* Qwen3-Reranker (an LLM scored on two tokens; its reference's last 30 lines
     * under their own instruction, through embd_rerank_score_prompted). */
    {
        char qwen[4096], arch[4096];
        const char *slash = strrchr(xlmr, '/');
        int dir_len = slash ? (int)(slash - xlmr) + 1 : 0;
        snprintf(qwen, sizeof qwen, "%.*sqwen3-reranker-tiny.weights", dir_len, xlmr);
        snprintf(arch, sizeof arch, "%s/../architectures", families);
        r = NULL;
        st = embd_rerank_open(qwen, NULL, &r);
        if (st != EMBD_STATUS_OK) {
            fprintf(stderr, "embd_rerank_open(%s): %s: %s (run scripts/fetch_reranker.sh)\n", qwen,
                    embd_status_str(st), embd_last_error());
            return 1;
        }
        CHECK(embd_rerank_max_seq_length(r) == 512);
        check_reference(r, arch, "qwen3-reranker-tiny", 243, 1);
        check_rank(r, arch, "qwen3-reranker-tiny", 0);
        embd_rerank_free(r);

        /* DeBERTa-v2 (disentangled attention, SentencePiece): no token type table, so
         * the reference's passage types (1) are not model inputs. */
        {
            char deberta[4096], enc[4096];
            snprintf(deberta, sizeof deberta, "%.*sdeberta-reranker-tiny.weights", dir_len, xlmr);
            snprintf(enc, sizeof enc, "%s/../encoders", families);
            r = NULL;
            st = embd_rerank_open(deberta, NULL, &r);
            if (st != EMBD_STATUS_OK) {
                fprintf(stderr, "embd_rerank_open(%s): %s: %s (run scripts/fetch_reranker.sh)\n", deberta,
                        embd_status_str(st), embd_last_error());
                return 1;
            }
            CHECK(embd_rerank_num_labels(r) == 1);
            CHECK(embd_rerank_max_seq_length(r) == 512);
            check_reference(r, enc, "deberta-reranker-tiny", 213, 0);
            check_rank(r, enc, "deberta-reranker-tiny", 0);
            embd_rerank_free(r);
        }
    }
    return check_done("rerank");
}

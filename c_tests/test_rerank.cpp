// The C++ wrapper embedder/reranker.hpp over the reference cross-encoders: a
// line of minilm-reranker_reference.jsonl and the first line of
// xlmr-reranker-tiny_reference.jsonl (copied: query, passage, ids, score,
// logit) within 1e-5 / 1e-4, rank order of the same pairs' passages, and a
// misuse throwing embd::Error with its status. argv[1]: the minilm-reranker
// model; argv[2]: models/xlmr-reranker-tiny.weights, else the file of that
// name beside the first.
#include "embedder/reranker.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    const std::string path = argc > 1 ? argv[1] : EMBD_TEST_RERANK_MODEL;
    int fails = 0;
    try {
        embd::RerankerOptions o;
        o.max_length = 256;
        embd::Reranker r(path, o);
        if (r.num_labels() != 1 || r.max_length() != 256) fails++;
        // minilm-reranker_reference.jsonl, line 2.
        const std::string q = "Read a list of lines of uncompressed bytes from the file.";
        const std::string p2 = "Convert data to floats and compute the arithmetic mean.";
        std::vector<float> s = r.score({{q, p2}});
        if (s.size() != 1 || std::fabs(s[0] - 0.150952429f) > 1e-5f) {
            std::fprintf(stderr, "score %g, want 0.150952429\n", s.empty() ? -1.0 : s[0]);
            fails++;
        }
        std::vector<float> l = r.score({{q, p2}}, true);
        if (std::fabs(l[0] - (-1.72715044f)) > 1e-4f) fails++;
        auto ids = r.tokenize(q, p2);
        if (ids.first.size() != 27 || ids.first.front() != 101 || ids.second.back() != 1) fails++;
        auto ranked = r.rank(q, {p2, q}, 1);
        if (ranked.size() != 1) fails++;
        bool threw = false;
        try {
            r.rank("", {p2});
        } catch (const embd::Error& e) {
            threw = e.status() == EMBD_STATUS_INVALID_ARGUMENT;
        }
        if (!threw) fails++;

        // The XLM-R cross-encoder (Unigram, <s> q </s></s> p </s>, RoBERTa head).
        std::string xlmr = argc > 2 ? argv[2] : "";
        if (xlmr.empty()) {
            const auto slash = path.rfind('/');
            xlmr = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                   "xlmr-reranker-tiny.weights";
        }
        embd::Reranker x(xlmr);
        if (x.max_length() != 128) fails++;
        const std::vector<uint32_t> want_ids = {0, 957, 131, 189, 94, 61, 2, 2, 957, 131, 16, 121, 2795, 2};
        auto xi = x.tokenize("Macedonian", "Macedonisch");
        if (xi.first != want_ids || xi.second != std::vector<uint32_t>(want_ids.size(), 0)) {
            std::fprintf(stderr, "xlmr: ids differ\n");
            fails++;
        }
        std::vector<float> xs = x.score({{"Macedonian", "Macedonisch"}});
        std::vector<float> xl = x.score({{"Macedonian", "Macedonisch"}}, true);
        if (std::fabs(xs[0] - 0.485462457f) > 1e-5f || std::fabs(xl[0] - (-0.0581665635f)) > 1e-4f) {
            std::fprintf(stderr, "xlmr: score %g logit %g, want 0.485462457 -0.0581665635\n", xs[0], xl[0]);
            fails++;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    std::printf("rerank_cpp: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}

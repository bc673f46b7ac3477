// The C++ wrapper embedder/reranker.hpp over the reference cross-encoder: the
// first lines of minilm-reranker_reference.jsonl (copied: query, passage,
// score) within 1e-5, rank order of the same pairs' passages, and a misuse
// throwing embd::Error with its status.
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
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    std::printf("rerank_cpp: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}

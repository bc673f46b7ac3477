// semantic_search: a small semantic search with the cpp_embedder-style C++ API
// (<cpp_embedder/embedder.hpp>, namespace cpp_embedder::model) provided by the
// embedder library. Embeds a few documents as one batch, embeds the query, and
// prints the documents ranked by cosine similarity.
//
// Usage: semantic_search [--top K] [MODEL] [QUERY...]
//   MODEL defaults to $EMBD_MODEL (when the first argument is not a readable
//   file it is taken as the start of the query); the query defaults to
//   "How do I check whether something is a stack frame?".
//   Prints "query: ..." then one line per result: "rank. score  document".
// Exit status: 0 on success, 1 on a library error (the exception's message),
// 2 on a usage error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <cpp_embedder/embedder.hpp>

namespace {

const std::vector<std::string> kDocuments = {
    "Return true if the object is a frame object.",
    "A classic mbox mailbox.",
    "Extend the left side of the deque with elements from the iterable.",
    "The cat sits outside on the warm windowsill.",
    "A man is playing a guitar on stage.",
    "Return the smallest representable number larger than x.",
    "Raised when substitutions are nested too deeply.",
    "The new movie is awesome and the audience loved it.",
};

bool readable(const std::string& path) { return std::ifstream(path).good(); }

int usage(const char* msg) {
    if (msg != nullptr) std::fprintf(stderr, "semantic_search: %s\n", msg);
    std::fprintf(stderr, "usage: semantic_search [--top K] [MODEL] [QUERY...]\n"
                         "  MODEL defaults to $EMBD_MODEL\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    namespace cm = cpp_embedder::model;
    std::size_t top = kDocuments.size();
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--top") {
            if (i + 1 >= argc) return usage("--top needs a number");
            const long k = std::strtol(argv[++i], nullptr, 10);
            if (k <= 0) return usage("--top needs a positive number");
            top = std::min(top, static_cast<std::size_t>(k));
        } else if (a == "-h" || a == "--help") {
            usage(nullptr);
            return 0;
        } else {
            args.push_back(a);
        }
    }

    std::string model_path;
    if (!args.empty() && readable(args.front())) {
        model_path = args.front();
        args.erase(args.begin());
    } else if (const char* env = std::getenv("EMBD_MODEL")) {
        model_path = env;
    }
    if (model_path.empty()) return usage("no model: pass MODEL or set $EMBD_MODEL");
    std::string query = "How do I check whether something is a stack frame?";
    if (!args.empty()) {
        query = args.front();
        for (std::size_t i = 1; i < args.size(); ++i) query += " " + args[i];
    }

    try {
        cm::EmbedderConfig config;
        config.weights_path = model_path;
        config.max_seq_length = 256;
        config.normalize_embeddings = true;
        cm::Embedder embedder(config);  // throws std::runtime_error on failure

        const std::vector<std::vector<float>> docs = embedder.embed_batch(kDocuments);
        const std::vector<float> q = embedder.embed(query);

        std::vector<float> scores(docs.size());
        for (std::size_t i = 0; i < docs.size(); ++i) scores[i] = cm::cosine_similarity(q, docs[i]);
        std::vector<std::size_t> order(docs.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });

        std::printf("query: %s\n", query.c_str());
        std::printf("model: dim %zu, max_seq_length %zu, %zu documents\n", embedder.embedding_dim(),
                    embedder.max_seq_length(), docs.size());
        for (std::size_t r = 0; r < top; ++r)
            std::printf("%zu. %.4f  %s\n", r + 1, static_cast<double>(scores[order[r]]),
                        kDocuments[order[r]].c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "semantic_search: %s\n", e.what());
        return 1;
    }
    return 0;
}

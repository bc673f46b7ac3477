// embedder/reranker.hpp: header-only C++17 wrapper of the embd_rerank_* C API
// (<embedder.h>): cross-encoders scoring (query, passage) pairs as
// sentence-transformers' CrossEncoder.
// SPDX-License-Identifier: MIT
//
//   embd::Reranker r("models/minilm-reranker.weights");
//   std::vector<float> s = r.score({{"query", "passage"}});
//   for (const embd_ranked& d : r.rank("query", docs, 10)) ...
//
// Failures throw embd::Error (a std::runtime_error carrying the embd_status and
// the library's message). Thread safety: const methods may be called
// concurrently on one Reranker.
#ifndef EMBEDDER_RERANKER_HPP
#define EMBEDDER_RERANKER_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../embedder.h"

namespace embd {

/// A failed embd_* call: its status and message.
class Error : public std::runtime_error {
public:
    Error(embd_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
    embd_status status() const noexcept { return status_; }

private:
    embd_status status_;
};

namespace detail {
inline void check(embd_status st, const char* call) {
    if (st != EMBD_STATUS_OK) {
        const char* e = embd_last_error();
        throw Error(st, std::string(call) + ": " + embd_status_str(st) + ": " + (e ? e : ""));
    }
}
inline embd_text text(std::string_view s) noexcept {
    embd_text t;
    t.ptr = s.data();
    t.len = s.size();
    return t;
}
}  // namespace detail

/// Open options of a reranker (0 / empty: the model's own).
struct RerankerOptions {
    std::size_t threads = 0;
    std::size_t max_length = 0;  ///< tokens of a pair (CrossEncoder's max_length)
    embd_precision precision = EMBD_PRECISION_DEFAULT;
};

/// An open cross-encoder (move-only; frees its handle).
class Reranker {
public:
    explicit Reranker(const std::string& path, const RerankerOptions& opts = {}) {
        embd_options* o = embd_options_new();
        if (o == nullptr) throw Error(EMBD_STATUS_OUT_OF_MEMORY, "embd_options_new failed");
        embd_status st = EMBD_STATUS_OK;
        if (opts.threads) st = embd_options_set_threads(o, opts.threads);
        if (st == EMBD_STATUS_OK && opts.max_length) st = embd_options_set_max_seq_length(o, opts.max_length);
        if (st == EMBD_STATUS_OK) st = embd_options_set_precision(o, opts.precision);
        if (st == EMBD_STATUS_OK) st = embd_rerank_open(path.c_str(), o, &r_);
        embd_options_free(o);
        detail::check(st, "embd_rerank_open");
    }
    Reranker(const Reranker&) = delete;
    Reranker& operator=(const Reranker&) = delete;
    Reranker(Reranker&& other) noexcept : r_(std::exchange(other.r_, nullptr)) {}
    Reranker& operator=(Reranker&& other) noexcept {
        if (this != &other) {
            embd_rerank_free(r_);
            r_ = std::exchange(other.r_, nullptr);
        }
        return *this;
    }
    ~Reranker() { embd_rerank_free(r_); }

    /// Scores per pair.
    std::size_t num_labels() const noexcept { return embd_rerank_num_labels(r_); }
    /// Tokens of a pair, special tokens included.
    std::size_t max_length() const noexcept { return embd_rerank_max_seq_length(r_); }

    /// Scores (or, with raw, logits) of pairs: pairs.size() x num_labels() values.
    std::vector<float> score(const std::vector<std::pair<std::string_view, std::string_view>>& pairs,
                             bool raw = false) const {
        std::vector<embd_text> q, p;
        q.reserve(pairs.size());
        p.reserve(pairs.size());
        for (const auto& pr : pairs) {
            q.push_back(detail::text(pr.first));
            p.push_back(detail::text(pr.second));
        }
        std::vector<float> out(pairs.size() * num_labels());
        float* scores = raw ? nullptr : out.data();
        float* logits = raw ? out.data() : nullptr;
        detail::check(embd_rerank_score(r_, q.data(), p.data(), pairs.size(), scores, logits, out.size(),
                                        nullptr, nullptr),
                      "embd_rerank_score");
        return out;
    }

    /// The best top_k documents (0: all), best first, ties by index; by logit with raw.
    std::vector<embd_ranked> rank(std::string_view query, const std::vector<std::string_view>& docs,
                                  std::size_t top_k = 0, bool raw = false) const {
        std::vector<embd_text> d;
        d.reserve(docs.size());
        for (auto s : docs) d.push_back(detail::text(s));
        std::size_t k = top_k == 0 ? docs.size() : top_k;
        std::vector<embd_ranked> out(k == 0 ? 1 : k);
        std::size_t n = 0;
        detail::check(embd_rerank_rank(r_, detail::text(query), d.data(), d.size(), k, raw ? 1 : 0, out.data(),
                                       out.size(), &n),
                      "embd_rerank_rank");
        out.resize(n);
        return out;
    }

    /// The pair's ids and token types as the model reads them.
    std::pair<std::vector<uint32_t>, std::vector<uint32_t>> tokenize(std::string_view query,
                                                                     std::string_view passage) const {
        std::size_t n = 0;
        embd_status st = embd_rerank_tokenize(r_, detail::text(query), detail::text(passage), nullptr, nullptr,
                                              0, &n);
        detail::check(st, "embd_rerank_tokenize");
        std::vector<uint32_t> ids(n), types(n);
        detail::check(embd_rerank_tokenize(r_, detail::text(query), detail::text(passage), ids.data(),
                                           types.data(), n, &n),
                      "embd_rerank_tokenize");
        return {std::move(ids), std::move(types)};
    }

    /// The C handle (borrowed).
    const embd_reranker* handle() const noexcept { return r_; }

private:
    embd_reranker* r_ = nullptr;
};

}  // namespace embd

#endif  // EMBEDDER_RERANKER_HPP

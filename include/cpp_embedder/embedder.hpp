// cpp_embedder/embedder.hpp: header-only C++ API of cpp_embedder
// (namespace cpp_embedder::model), implemented over the cpp_embedder C API of
// the `embedder` library (<cpp_embedder/c_api.h>).
// SPDX-License-Identifier: MIT
//
// Same classes, methods and free functions as cpp_embedder's
// include/model/embedder.hpp; failures throw std::runtime_error with the
// library's message, as before. Differences (see docs/C_API.md):
//  - EmbedderConfig gains `num_threads` (0 = all CPUs), which is honoured;
//  - embed_batch embeds the texts as one batch (theirs looped one by one);
//  - the vocabulary comes from the model file; a non-empty vocab_path must
//    match it (or supplies it when the file has none);
//  - tokenizer() gives a thin WordPieceTokenizer with encode/decode and the
//    special ids; the original's Vocab and tokenize(text) -> pieces are not
//    provided.
// Thread safety: const methods may be called concurrently on one Embedder.
#ifndef CPP_EMBEDDER_EMBEDDER_HPP
#define CPP_EMBEDDER_EMBEDDER_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "c_api.h"

namespace cpp_embedder {

namespace detail {
inline std::string last_error(const char* fallback) {
    const char* e = embedder_get_error();
    return (e != nullptr && e[0] != '\0') ? std::string(e) : std::string(fallback);
}
}  // namespace detail

namespace tokenizer {

/// Token id type of cpp_embedder.
using TokenId = int32_t;

/// The tokenizer of an Embedder (borrowed view; valid while the Embedder lives).
class WordPieceTokenizer {
public:
    static constexpr size_t DEFAULT_MAX_LENGTH = 512;

    explicit WordPieceTokenizer(TokenizerHandle h = nullptr) noexcept : h_(h) {}

    /// [CLS] ids [SEP], truncated to max_length and padded with [PAD] to
    /// exactly max_length ids (cpp_embedder's contract).
    std::vector<TokenId> encode(const std::string& text, size_t max_length = DEFAULT_MAX_LENGTH) const {
        if (max_length < 2) max_length = 2;
        std::vector<uint32_t> ids(max_length);
        uint32_t n = 0;
        int rc = tokenizer_encode(h_, text.c_str(), ids.data(), static_cast<uint32_t>(ids.size()), &n,
                                  static_cast<uint32_t>(max_length));
        if (rc != CPP_EMBEDDER_OK) throw std::runtime_error(detail::last_error("tokenizer_encode failed"));
        return std::vector<TokenId>(ids.begin(), ids.begin() + n);
    }

    /// Batch of encode().
    std::vector<std::vector<TokenId>> encode_batch(const std::vector<std::string>& texts,
                                                   size_t max_length = DEFAULT_MAX_LENGTH) const {
        std::vector<std::vector<TokenId>> out;
        out.reserve(texts.size());
        for (const auto& t : texts) out.push_back(encode(t, max_length));
        return out;
    }

    /// Text of the ids; special tokens are skipped.
    std::string decode(const std::vector<TokenId>& ids) const {
        std::vector<uint32_t> u(ids.begin(), ids.end());
        std::vector<char> buf(16 * u.size() + 64);
        for (;;) {
            int rc = tokenizer_decode(h_, u.data(), static_cast<uint32_t>(u.size()), buf.data(),
                                      static_cast<uint32_t>(buf.size()), 1);
            if (rc == CPP_EMBEDDER_OK) return std::string(buf.data());
            if (rc != CPP_EMBEDDER_ERROR_BUFFER_TOO_SMALL || buf.size() > (1u << 30))
                throw std::runtime_error(detail::last_error("tokenizer_decode failed"));
            buf.resize(buf.size() * 2);
        }
    }

    TokenId cls_id() const noexcept { return static_cast<TokenId>(tokenizer_cls_token_id(h_)); }
    TokenId sep_id() const noexcept { return static_cast<TokenId>(tokenizer_sep_token_id(h_)); }
    TokenId pad_id() const noexcept { return static_cast<TokenId>(tokenizer_pad_token_id(h_)); }
    TokenId unk_id() const noexcept { return static_cast<TokenId>(tokenizer_unk_token_id(h_)); }

private:
    TokenizerHandle h_;
};

}  // namespace tokenizer

namespace model {

constexpr size_t HIDDEN_SIZE = 384;
constexpr size_t INTERMEDIATE_SIZE = 1536;
constexpr size_t NUM_ATTENTION_HEADS = 12;
constexpr size_t HEAD_DIM = 32;
constexpr size_t NUM_LAYERS = 6;
constexpr size_t MAX_POSITION_EMBEDDINGS = 512;
constexpr size_t VOCAB_SIZE = 30522;
constexpr size_t EMBEDDING_DIM = HIDDEN_SIZE;  // 384

/// How to build an Embedder.
struct EmbedderConfig {
    std::string weights_path;
    /// Optional vocab.txt; must equal the model file's vocabulary.
    std::string vocab_path;
    size_t max_seq_length = 256;
    bool normalize_embeddings = true;
    /// Worker threads per call (0 = all CPUs). Not in cpp_embedder; honoured here.
    uint32_t num_threads = 0;
};

/// A loaded model. Non-copyable, movable. Constructors throw on failure.
class Embedder {
public:
    explicit Embedder(const EmbedderConfig& config)
        : normalize_(config.normalize_embeddings) {
        if (config.vocab_path.empty()) {
            h_ = embedder_create_with_config(config.weights_path.c_str(),
                                             static_cast<uint32_t>(config.max_seq_length),
                                             config.normalize_embeddings ? 1 : 0, config.num_threads);
        } else {
            h_ = embedder_create_with_vocab(config.weights_path.c_str(), config.vocab_path.c_str());
        }
        check_created();
    }

    Embedder(const std::string& weights_path, const std::string& vocab_path) {
        h_ = vocab_path.empty() ? embedder_create(weights_path.c_str())
                                : embedder_create_with_vocab(weights_path.c_str(), vocab_path.c_str());
        check_created();
    }

    ~Embedder() { embedder_destroy(h_); }

    Embedder(const Embedder&) = delete;
    Embedder& operator=(const Embedder&) = delete;
    Embedder(Embedder&& o) noexcept : h_(o.h_), normalize_(o.normalize_) { o.h_ = nullptr; }
    Embedder& operator=(Embedder&& o) noexcept {
        if (this != &o) {
            embedder_destroy(h_);
            h_ = o.h_;
            normalize_ = o.normalize_;
            o.h_ = nullptr;
        }
        return *this;
    }

    /// Embedding of one text (embedding_dim() floats).
    std::vector<float> embed(const std::string& text) const {
        std::vector<float> out(embedding_dim());
        int rc = embedder_embed_ex(h_, text.c_str(), out.data(), static_cast<uint32_t>(out.size()),
                                   normalize_ ? 1 : 0);
        if (rc != CPP_EMBEDDER_OK) throw std::runtime_error(detail::last_error("embed failed"));
        return out;
    }

    /// Embeddings of several texts, computed as one batch.
    std::vector<std::vector<float>> embed_batch(const std::vector<std::string>& texts) const {
        const size_t dim = embedding_dim();
        std::vector<std::vector<float>> result;
        if (texts.empty()) return result;
        std::vector<const char*> ptrs;
        ptrs.reserve(texts.size());
        for (const auto& t : texts) ptrs.push_back(t.c_str());
        std::vector<float> flat(texts.size() * dim);
        int rc = embedder_embed_batch_ex(h_, ptrs.data(), static_cast<uint32_t>(ptrs.size()), flat.data(),
                                         static_cast<uint32_t>(flat.size()), normalize_ ? 1 : 0);
        if (rc != CPP_EMBEDDER_OK) throw std::runtime_error(detail::last_error("embed_batch failed"));
        result.reserve(texts.size());
        for (size_t i = 0; i < texts.size(); ++i)
            result.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                flat.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
        return result;
    }

    size_t embedding_dim() const noexcept { return embedder_get_dim(h_); }
    size_t max_seq_length() const noexcept { return embedder_get_max_seq_length(h_); }
    bool is_loaded() const noexcept { return embedder_is_loaded(h_) != 0; }

    /// The model's tokenizer (valid while this Embedder lives).
    tokenizer::WordPieceTokenizer tokenizer() const noexcept {
        return tokenizer::WordPieceTokenizer(embedder_get_tokenizer(h_));
    }

    /// The underlying C handle (borrowed).
    EmbedderHandle handle() const noexcept { return h_; }

private:
    void check_created() {
        if (h_ == nullptr) throw std::runtime_error(detail::last_error("Failed to load model"));
    }

    EmbedderHandle h_ = nullptr;
    bool normalize_ = true;
};

/// Cosine similarity; throws std::invalid_argument if sizes differ; 0 if a norm is ~0.
inline float cosine_similarity(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) throw std::invalid_argument("Embedding dimensions must match");
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        dot += static_cast<double>(a[i]) * b[i];
        na += static_cast<double>(a[i]) * a[i];
        nb += static_cast<double>(b[i]) * b[i];
    }
    const double d = std::sqrt(na) * std::sqrt(nb);
    return d < 1e-12 ? 0.0f : static_cast<float>(dot / d);
}

/// Dot product; throws std::invalid_argument if sizes differ.
inline float dot_product(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) throw std::invalid_argument("Embedding dimensions must match");
    double dot = 0;
    for (size_t i = 0; i < a.size(); ++i) dot += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(dot);
}

/// L2-normalizes in place when the norm is above 1e-12.
inline void normalize_embedding(std::vector<float>& v) {
    double sq = 0;
    for (float x : v) sq += static_cast<double>(x) * x;
    const double n = std::sqrt(sq);
    if (n > 1e-12)
        for (float& x : v) x = static_cast<float>(x / n);
}

}  // namespace model
}  // namespace cpp_embedder

#endif  // CPP_EMBEDDER_EMBEDDER_HPP

// The header-only C++ wrapper (namespace cpp_embedder::model) gives the same
// vectors as the embd API and throws like cpp_embedder did.
#include "embedder.h"
#include "cpp_embedder/embedder.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#define EMBD_TEST_CPP 1
#include "check.h"

using cpp_embedder::model::Embedder;
using cpp_embedder::model::EmbedderConfig;

int main(int argc, char** argv) {
    const char* path = test_model_path(argc, argv);
    embd_model* m = nullptr;
    REQUIRE(embd_open(path, nullptr, &m) == EMBD_STATUS_OK);
    std::vector<float> want(REF_N * 384);
    REQUIRE(embd_encode(m, ref_texts, REF_N, want.data(), want.size()) == EMBD_STATUS_OK);

    EmbedderConfig cfg;
    cfg.weights_path = path;
    cfg.num_threads = 2;
    Embedder e(cfg);
    CHECK(e.is_loaded());
    CHECK(e.embedding_dim() == 384);
    CHECK(e.max_seq_length() == 256);
    for (size_t i = 0; i < REF_N; ++i) {
        std::vector<float> v = e.embed(ref_texts[i]);
        CHECK(v.size() == 384);
        CHECK(max_abs_diff(v.data(), want.data() + i * 384, 384) < 1e-6f);
    }
    std::vector<std::string> texts(ref_texts, ref_texts + REF_N);
    auto batch = e.embed_batch(texts);
    CHECK(batch.size() == REF_N);
    for (size_t i = 0; i < batch.size(); ++i)
        CHECK(max_abs_diff(batch[i].data(), want.data() + i * 384, 384) < 1e-6f);
    CHECK(e.embed_batch({}).empty());

    // normalize_embeddings = false gives raw vectors
    EmbedderConfig raw_cfg = cfg;
    raw_cfg.normalize_embeddings = false;
    Embedder raw(raw_cfg);
    std::vector<float> r = raw.embed(ref_texts[0]);
    CHECK(std::fabs(std::sqrt(cpp_embedder::model::dot_product(r, r)) - 1.0f) > 1e-3f);
    cpp_embedder::model::normalize_embedding(r);
    CHECK(max_abs_diff(r.data(), want.data(), 384) < 1e-5f);

    // free functions
    CHECK(std::fabs(cpp_embedder::model::cosine_similarity(batch[0], batch[0]) - 1.0f) < 1e-5f);
    bool threw = false;
    try {
        cpp_embedder::model::cosine_similarity(batch[0], std::vector<float>(3));
    } catch (const std::invalid_argument&) {
        threw = true;
    }
    CHECK(threw);

    // tokenizer
    auto tok = e.tokenizer();
    auto ids = tok.encode(ref_texts[0], 16);
    CHECK(ids.size() == 16);
    CHECK(ids[0] == 101 && ids[11] == 102 && ids[12] == 0);
    CHECK(tok.decode(ids) == "return true if the object is a frame object .");
    CHECK(tok.cls_id() == 101);

    // move, and errors as exceptions
    Embedder moved(std::move(e));
    CHECK(moved.embed(ref_texts[1]).size() == 384);
    threw = false;
    try {
        Embedder bad("/nonexistent/model.bin", "");
    } catch (const std::runtime_error& ex) {
        threw = std::strstr(ex.what(), "Failed to load model") != nullptr;
    }
    CHECK(threw);

    embd_free(m);
    return check_done("compat_cpp");
}

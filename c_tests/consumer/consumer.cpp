// C++ consumer of the installed package, through the cpp_embedder wrapper.
#include <cpp_embedder/embedder.hpp>
#include <embedder.h>

#include <cstdio>
#include <stdexcept>

int main() {
    std::vector<float> a{1.0f, 2.0f}, b{2.0f, 4.0f};
    if (cpp_embedder::model::cosine_similarity(a, b) < 0.999f) return 1;
    try {
        cpp_embedder::model::Embedder e("/nonexistent/model.bin", "");
        return 1;
    } catch (const std::runtime_error& ex) {
        std::printf("consumer_cpp: embedder %s, %s\n", embd_version(), ex.what());
    }
    return 0;
}

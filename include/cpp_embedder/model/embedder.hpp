// Original include path of cpp_embedder: forwards to <cpp_embedder/embedder.hpp>.
#include "../embedder.hpp"

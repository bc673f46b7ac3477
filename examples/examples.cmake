# Included by the top-level CMakeLists.txt (one line) so that the examples can
# be built inside the source tree:
#   cmake -S . -B build -DEMBEDDER_BUILD_EXAMPLES=ON && cmake --build build
#   ctest --test-dir build -L examples
# They then link the in-tree targets embedder::embedder; standalone, the same
# examples/CMakeLists.txt uses find_package(embedder CONFIG REQUIRED).
option(EMBEDDER_BUILD_EXAMPLES "Build the C/C++ examples (examples/) and register them with ctest" OFF)
if(EMBEDDER_BUILD_EXAMPLES)
  enable_testing()
  add_subdirectory("${CMAKE_CURRENT_LIST_DIR}" "${PROJECT_BINARY_DIR}/examples")
endif()

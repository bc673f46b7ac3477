# Drives `cargo build --lib` for the embedder crate and defines the imported
# targets embedder::embedder (shared) and embedder::embedder_static (static).
# Inputs: EMBEDDER_CARGO_PROFILE, EMBEDDER_CARGO_TARGET_DIR,
# EMBEDDER_CARGO_FEATURES, EMBEDDER_TEST_PANIC.
# Outputs: EMBEDDER_SHARED_LIB, EMBEDDER_STATIC_LIB (paths), the custom target
# embedder_cargo.

find_program(CARGO_EXECUTABLE cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin")
if(NOT CARGO_EXECUTABLE)
  message(FATAL_ERROR "embedder: cargo not found; install Rust (https://rustup.rs) or set CARGO_EXECUTABLE")
endif()

set(_embd_features ${EMBEDDER_CARGO_FEATURES})
if(EMBEDDER_TEST_PANIC)
  list(APPEND _embd_features test-panic)
endif()
set(_embd_feature_args)
if(_embd_features)
  list(JOIN _embd_features "," _embd_features_csv)
  set(_embd_feature_args --features "${_embd_features_csv}")
endif()

if(EMBEDDER_CARGO_PROFILE STREQUAL "dev")
  set(_embd_profile_dir debug)
else()
  set(_embd_profile_dir "${EMBEDDER_CARGO_PROFILE}")
endif()
set(_embd_out "${EMBEDDER_CARGO_TARGET_DIR}/${_embd_profile_dir}")
set(EMBEDDER_SHARED_LIB "${_embd_out}/${CMAKE_SHARED_LIBRARY_PREFIX}embedder${CMAKE_SHARED_LIBRARY_SUFFIX}")
set(EMBEDDER_STATIC_LIB "${_embd_out}/${CMAKE_STATIC_LIBRARY_PREFIX}embedder${CMAKE_STATIC_LIBRARY_SUFFIX}")
set(EMBEDDER_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/include")

# Always run cargo (it is incremental and knows the Rust dependencies);
# the libraries are byproducts so Ninja/Make relink dependents when they change.
add_custom_target(embedder_cargo ALL
  COMMAND "${CMAKE_COMMAND}" -E env "CARGO_TARGET_DIR=${EMBEDDER_CARGO_TARGET_DIR}"
          "${CARGO_EXECUTABLE}" build --lib --profile "${EMBEDDER_CARGO_PROFILE}"
          --manifest-path "${PROJECT_SOURCE_DIR}/Cargo.toml" ${_embd_feature_args}
  BYPRODUCTS "${EMBEDDER_SHARED_LIB}" "${EMBEDDER_STATIC_LIB}"
  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
  USES_TERMINAL
  COMMENT "cargo build --lib --profile ${EMBEDDER_CARGO_PROFILE} (embedder)")

# System libraries the Rust standard library needs when linked statically
# (`cargo rustc -- --print native-static-libs`).
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(EMBEDDER_STATIC_DEPS Threads::Threads dl m rt util)
elseif(APPLE)
  set(EMBEDDER_STATIC_DEPS Threads::Threads m "-framework CoreFoundation" "-framework Security")
else()
  set(EMBEDDER_STATIC_DEPS Threads::Threads)
endif()

add_library(embedder_shared SHARED IMPORTED GLOBAL)
set_target_properties(embedder_shared PROPERTIES
  IMPORTED_LOCATION "${EMBEDDER_SHARED_LIB}"
  # cargo gives the cdylib no SONAME; link it by name (-lembedder).
  IMPORTED_NO_SONAME TRUE
  INTERFACE_INCLUDE_DIRECTORIES "${EMBEDDER_INCLUDE_DIR}")
add_dependencies(embedder_shared embedder_cargo)

add_library(embedder_static STATIC IMPORTED GLOBAL)
set_target_properties(embedder_static PROPERTIES
  IMPORTED_LOCATION "${EMBEDDER_STATIC_LIB}"
  INTERFACE_INCLUDE_DIRECTORIES "${EMBEDDER_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${EMBEDDER_STATIC_DEPS}")
add_dependencies(embedder_static embedder_cargo)

if(NOT TARGET embedder::embedder)
  add_library(embedder::embedder ALIAS embedder_shared)
endif()
if(NOT TARGET embedder::embedder_static)
  add_library(embedder::embedder_static ALIAS embedder_static)
endif()

# ctest script: install the built package to a temporary prefix, then build and
# run consumers against the *installed* files, with find_package(embedder
# CONFIG REQUIRED) (shared, static and the C++ wrapper) and with pkg-config.
# Also builds a consumer of the source tree through FetchContent.
# Inputs: BUILD_DIR WORK_DIR CONSUMER_DIR SOURCE_DIR CARGO_TARGET_DIR
# CARGO_FEATURES C_COMPILER CXX_COMPILER GENERATOR.
cmake_minimum_required(VERSION 3.16)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "ok: ${ARGN}\n${out}")
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

# 1. install
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/embedder.h include/cpp_embedder/c_api.h include/cpp_embedder/embedder.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE cfg "${prefix}/*/embedderConfig.cmake")
file(GLOB_RECURSE cfgv "${prefix}/*/embedderConfigVersion.cmake")
file(GLOB_RECURSE pc "${prefix}/*/embedder.pc")
if(NOT cfg OR NOT cfgv OR NOT pc)
  message(FATAL_ERROR "package files missing: config='${cfg}' version='${cfgv}' pc='${pc}'")
endif()

# 2. find_package consumer
run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer-build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer-build")
foreach(exe consumer consumer_static consumer_cpp)
  run("${WORK_DIR}/consumer-build/${exe}")
endforeach()

# 3. pkg-config consumer
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
get_filename_component(pcdir "${pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run("${PKG_CONFIG}" --cflags embedder)
string(STRIP "${LAST_OUTPUT}" cflags)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
run("${PKG_CONFIG}" --libs embedder)
string(STRIP "${LAST_OUTPUT}" libs)
separate_arguments(libs UNIX_COMMAND "${libs}")
run("${PKG_CONFIG}" --variable=libdir embedder)
string(STRIP "${LAST_OUTPUT}" libdir)
run("${C_COMPILER}" -std=c11 -Wall -Wextra -Werror ${cflags} "${CONSUMER_DIR}/consumer.c" -o "${WORK_DIR}/consumer_pc"
    ${libs} "-Wl,-rpath,${libdir}")
run("${WORK_DIR}/consumer_pc")
else()
  message(WARNING "pkg-config not found: skipping the pkg-config consumer")
endif()

# 4. FetchContent / add_subdirectory of the source tree (reusing the cargo
#    target directory of the main build, so nothing is rebuilt).
run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}/../fetch_consumer" -B "${WORK_DIR}/fetch-build" -G "${GENERATOR}"
    "-DEMBEDDER_SOURCE_DIR=${SOURCE_DIR}" "-DEMBEDDER_CARGO_TARGET_DIR=${CARGO_TARGET_DIR}"
    "-DEMBEDDER_CARGO_FEATURES=${CARGO_FEATURES}"
    "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/fetch-build")
run("${WORK_DIR}/fetch-build/consumer")
run("${WORK_DIR}/fetch-build/consumer_static")

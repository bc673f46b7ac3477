//! Generates the C header `embedder.h` from `src/capi/` with cbindgen, into
//! `OUT_DIR` only (cargo forbids writing to the source tree). The committed copy
//! `include/embedder.h` is compared with it by `tests/it/header.rs`
//! (`EMBD_BLESS=1 cargo test --test it header` refreshes it).

use std::env;
use std::path::PathBuf;

const CONVENTIONS: &str = r#"
/**
 * @file embedder.h
 * @brief Sentence embeddings on the CPU: C API.
 *
 * API conventions
 * ---------------
 * - Handles are opaque (`embd_model`, `embd_options`), created and destroyed
 *   only by the library (`embd_open`/`embd_free`,
 *   `embd_options_new`/`embd_options_free`). Free functions accept NULL as a
 *   no-op. Every handle is validated against a registry of live handles, so a
 *   freed, foreign or wrong-type handle gives EMBD_STATUS_INVALID_HANDLE
 *   instead of undefined behaviour (a freed address reused by a new handle of
 *   the same type cannot be told apart).
 * - Every fallible function returns an `embd_status`; EMBD_STATUS_OK is 0.
 *   Numbers are stable and never reused. `embd_status_str(st)` gives a static
 *   phrase; `embd_last_error()` gives a specific message for the most recent
 *   failure on the calling thread (never NULL, valid until the next failing
 *   call on that thread). Getters (`embd_dim`, ...) return 0 or NULL on an
 *   invalid handle and set the message.
 * - Every pointer parameter is checked for NULL; a NULL where a value is
 *   required gives EMBD_STATUS_NULL_ARGUMENT and a message naming the
 *   parameter. Out-handles are set to NULL on failure; out-counts to 0 (or to
 *   the needed size on EMBD_STATUS_BUFFER_TOO_SMALL).
 * - Text is UTF-8; invalid UTF-8 is EMBD_STATUS_INVALID_UTF8, never replaced.
 *   `embd_encode` takes NUL-terminated strings; `embd_encode_texts`,
 *   `embd_tokenize` and `embd_count_tokens` take (pointer, byte length) with no
 *   NUL needed, in which an embedded NUL byte is ordinary text.
 * - Outputs go to caller-owned buffers with an explicit capacity; the library
 *   never hands memory to the caller to free, except handles.
 * - Ownership phrases: "borrowed for the duration of the call" (the library
 *   keeps no reference), "owned by the caller, free with X", "owned by the
 *   library, valid until Y".
 * - Thread safety: an `embd_model` is immutable after `embd_open`; every
 *   function taking `const embd_model *` may run concurrently on one handle
 *   from any number of threads, without a global lock. `embd_options` must not
 *   be changed from two threads at once. Freeing a handle while another thread
 *   uses it is a caller bug, but memory-safe (the running call finishes).
 * - A panic inside the library is caught at the boundary and becomes
 *   EMBD_STATUS_INTERNAL_PANIC; the library never aborts the host process.
 * - The cpp_embedder-compatible API is in <cpp_embedder/c_api.h>.
 *
 * Usage
 * -----
 * @code
 *   embd_model *m = NULL;
 *   embd_status st = embd_open("all-MiniLM-L6-v2.weights", NULL, &m);
 *   if (st != EMBD_STATUS_OK) {
 *       fprintf(stderr, "%s: %s\n", embd_status_str(st), embd_last_error());
 *       return 1;
 *   }
 *   const char *texts[2] = {"The cat sits outside", "A man is playing guitar"};
 *   size_t dim = embd_dim(m);
 *   float *out = malloc(2 * dim * sizeof(float));
 *   st = embd_encode(m, texts, 2, out, 2 * dim);
 *   float sim = 0.0f;
 *   if (st == EMBD_STATUS_OK) embd_similarity(out, out + dim, dim, &sim);
 *   free(out);
 *   embd_free(m);
 * @endcode
 */
"#;

fn main() {
    println!("cargo:rerun-if-changed=src/capi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");

    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("version");
    let minor = env::var("CARGO_PKG_VERSION_MINOR").expect("version");
    let patch = env::var("CARGO_PKG_VERSION_PATCH").expect("version");
    let (ma, mi, pa): (u32, u32, u32) = (
        major.parse().expect("major"),
        minor.parse().expect("minor"),
        patch.parse().expect("patch"),
    );

    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is readable and valid");
    config.after_includes = Some(format!(
        "{CONVENTIONS}
/** Major version of this header. */
#define EMBD_VERSION_MAJOR {ma}
/** Minor version of this header. */
#define EMBD_VERSION_MINOR {mi}
/** Patch version of this header. */
#define EMBD_VERSION_PATCH {pa}
/** \"MAJOR.MINOR.PATCH\" of this header. */
#define EMBD_VERSION_STRING \"{ma}.{mi}.{pa}\"
/** MAJOR * 1000000 + MINOR * 1000 + PATCH; compare with embd_version_number(). */
#define EMBD_VERSION_NUMBER {num}
",
        num = ma * 1_000_000 + mi * 1000 + pa
    ));

    let header = out_dir.join("embedder.h");
    // Only the C API: parse src/capi, so public items of other modules (and the
    // cpp_embedder functions of src/compat, declared by the hand-written
    // include/cpp_embedder/c_api.h) never leak in. cbindgen follows the `mod`
    // declarations of src/capi/mod.rs, in their order.
    match cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/capi/mod.rs"))
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(&header);
        }
        Err(e) => panic!("cbindgen failed to generate embedder.h: {e}"),
    }
    println!("cargo:rustc-env=EMBD_GENERATED_HEADER={}", header.display());
}

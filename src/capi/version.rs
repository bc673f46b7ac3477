//! Library version at run time; the header carries the same numbers as macros
//! (`EMBD_VERSION_*`), written by `build.rs` from `Cargo.toml`.

use std::ffi::c_char;

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

/// Major version, from `Cargo.toml`.
pub(crate) const VERSION_MAJOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MAJOR"));
/// Minor version, from `Cargo.toml`.
pub(crate) const VERSION_MINOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MINOR"));
/// Patch version, from `Cargo.toml`.
pub(crate) const VERSION_PATCH: u32 = parse_u32(env!("CARGO_PKG_VERSION_PATCH"));
/// MAJOR * 1000000 + MINOR * 1000 + PATCH.
pub(crate) const VERSION_NUMBER: u32 =
    VERSION_MAJOR * 1_000_000 + VERSION_MINOR * 1000 + VERSION_PATCH;

static VERSION_STRING: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// Returns the library version as "MAJOR.MINOR.PATCH", equal to
/// `EMBD_VERSION_STRING` of the header the library was built with.
///
/// Returns a static NUL-terminated string, never NULL, owned by the library.
///
/// Thread safety: safe from any thread at any time.
#[no_mangle]
pub extern "C" fn embd_version() -> *const c_char {
    VERSION_STRING.as_ptr().cast()
}

/// Returns the library version as MAJOR * 1000000 + MINOR * 1000 + PATCH,
/// equal to `EMBD_VERSION_NUMBER` of the header the library was built with.
/// Compare it with the macro to detect a header/library mismatch.
///
/// Thread safety: safe from any thread at any time.
#[no_mangle]
pub extern "C" fn embd_version_number() -> u32 {
    VERSION_NUMBER
}

//! The setters both option objects share. `embd_options` (at `embd_open`)
//! and `embd_call_options` (per call) take normalization, Matryoshka
//! dimensions, a prompt and a prompt name with the same C values and the
//! same meaning, so each is read here once, for either object: an
//! `embd_*_set_*` export of those four is one line naming its row.

use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use super::boundary::{c_str, ffi_boundary, Fail, FfiResult};
use super::handles::{self, Handle};
use super::status::embd_status;
use crate::{CallOptions, Options};

/// A C options object: a handle over its Rust options.
pub(crate) trait OptionsHandle: Handle {
    /// The Rust options it holds.
    type Opts: Shared;
    /// Them, behind the lock that keeps two setters apart.
    fn opts(&self) -> &Mutex<Self::Opts>;
}

/// The fields both Rust option types have.
pub(crate) trait Shared {
    /// `normalize`, `dimensions`, `prompt`, `prompt_name`.
    fn shared(&mut self) -> Fields<'_>;
}

/// The shared fields of one options value.
pub(crate) struct Fields<'a> {
    normalize: &'a mut Option<bool>,
    dimensions: &'a mut Option<usize>,
    prompt: &'a mut Option<String>,
    prompt_name: &'a mut Option<String>,
}

impl Shared for Options {
    fn shared(&mut self) -> Fields<'_> {
        Fields {
            normalize: &mut self.normalize,
            dimensions: &mut self.dimensions,
            prompt: &mut self.prompt,
            prompt_name: &mut self.prompt_name,
        }
    }
}

impl Shared for CallOptions {
    fn shared(&mut self) -> Fields<'_> {
        Fields {
            normalize: &mut self.normalize,
            dimensions: &mut self.dimensions,
            prompt: &mut self.prompt,
            prompt_name: &mut self.prompt_name,
        }
    }
}

/// Runs `f` on the options behind `options`, as the export `func`.
pub(crate) fn with<H: OptionsHandle>(
    func: &str,
    options: *mut H,
    f: impl FnOnce(&mut H::Opts) -> FfiResult<()>,
) -> embd_status {
    ffi_boundary(func, || {
        let o = handles::resolve(options, "options")?;
        let mut g = o.opts().lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    })
}

/// A C flag: 0 or 1, else `EMBD_STATUS_INVALID_ARGUMENT` naming `param`.
pub(crate) fn bool_flag(v: c_int, param: &str) -> FfiResult<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Fail::new(
            embd_status::InvalidArgument,
            format!("{param} must be 0 or 1, got {v}"),
        )),
    }
}

/// A copy of an optional NUL-terminated UTF-8 string (NULL: `None`).
///
/// # Safety
/// `p` must be NULL or NUL-terminated.
unsafe fn opt_string(p: *const c_char, param: &str) -> FfiResult<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    Ok(Some(unsafe { c_str(p, param) }?.to_string()))
}

/// `normalize`: 1 on, 0 off, -1 unset (as the model was opened, or its
/// metadata).
pub(crate) fn normalize<H: OptionsHandle>(func: &str, options: *mut H, v: c_int) -> embd_status {
    with(func, options, |o| {
        *o.shared().normalize = match v {
            -1 => None,
            0 => Some(false),
            1 => Some(true),
            v => {
                return Err(Fail::new(
                    embd_status::InvalidArgument,
                    format!("normalize must be -1, 0 or 1, got {v}"),
                ))
            }
        };
        Ok(())
    })
}

/// `dimensions`: 0 unset (the model's own), else the Matryoshka size.
pub(crate) fn dimensions<H: OptionsHandle>(func: &str, options: *mut H, v: usize) -> embd_status {
    with(func, options, |o| {
        *o.shared().dimensions = (v != 0).then_some(v);
        Ok(())
    })
}

/// `prompt`: copied; NULL unset.
///
/// # Safety
/// `prompt` must be NULL or NUL-terminated.
pub(crate) unsafe fn prompt<H: OptionsHandle>(
    func: &str,
    options: *mut H,
    prompt: *const c_char,
) -> embd_status {
    with(func, options, |o| {
        // SAFETY: NULL or NUL-terminated per the contract.
        *o.shared().prompt = unsafe { opt_string(prompt, "prompt") }?;
        Ok(())
    })
}

/// `name`, a stored prompt's: copied; NULL unset.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
pub(crate) unsafe fn prompt_name<H: OptionsHandle>(
    func: &str,
    options: *mut H,
    name: *const c_char,
) -> embd_status {
    with(func, options, |o| {
        // SAFETY: NULL or NUL-terminated per the contract.
        *o.shared().prompt_name = unsafe { opt_string(name, "name") }?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use crate::capi::*;

    fn last() -> String {
        // SAFETY: embd_last_error never returns NULL; the string is valid
        // until the next failing call on this thread.
        unsafe { CStr::from_ptr(embd_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn both_objects_take_the_shared_options_alike() {
        let o = embd_options_new();
        let c = embd_call_options_new();
        for v in [-1, 0, 1] {
            assert_eq!(embd_options_set_normalize(o, v), embd_status::Ok);
            assert_eq!(embd_call_options_set_normalize(c, v), embd_status::Ok);
        }
        let bad = embd_status::InvalidArgument;
        assert_eq!(embd_options_set_normalize(o, 2), bad);
        let m = last();
        assert_eq!(
            m,
            "embd_options_set_normalize: normalize must be -1, 0 or 1, got 2"
        );
        assert_eq!(embd_call_options_set_normalize(c, 2), bad);
        assert_eq!(last(), m.replace("embd_options", "embd_call_options"));
        assert_eq!(embd_options_set_dimensions(o, 0), embd_status::Ok);
        assert_eq!(embd_call_options_set_dimensions(c, 8), embd_status::Ok);
        let bytes = b"\xff\0";
        let (p, name) = (c"query: ".as_ptr(), c"query".as_ptr());
        // SAFETY: NULL or NUL-terminated strings.
        unsafe {
            assert_eq!(embd_options_set_prompt(o, p), embd_status::Ok);
            assert_eq!(embd_call_options_set_prompt(c, p), embd_status::Ok);
            assert_eq!(embd_options_set_prompt_name(o, name), embd_status::Ok);
            assert_eq!(
                embd_call_options_set_prompt_name(c, std::ptr::null()),
                embd_status::Ok
            );
            let bad = bytes.as_ptr().cast();
            assert_eq!(embd_options_set_prompt(o, bad), embd_status::InvalidUtf8);
            assert_eq!(
                embd_call_options_set_prompt_name(c, bad),
                embd_status::InvalidUtf8
            );
        }
        let g = handles::resolve(c, "options").unwrap();
        let got = g.opts.lock().unwrap().clone();
        assert_eq!(got.normalize, Some(true));
        assert_eq!(got.dimensions, Some(8));
        assert_eq!(got.prompt.as_deref(), Some("query: "));
        assert_eq!(got.prompt_name, None);
        let g = handles::resolve(o, "options").unwrap();
        let got = g.opts.lock().unwrap().clone();
        assert_eq!(got.normalize, Some(true));
        assert_eq!(got.dimensions, None);
        assert_eq!(got.prompt.as_deref(), Some("query: "));
        assert_eq!(got.prompt_name.as_deref(), Some("query"));
        // A stale handle is refused, not dereferenced.
        embd_options_free(o);
        assert_eq!(
            embd_options_set_dimensions(o, 1),
            embd_status::InvalidHandle
        );
        embd_call_options_free(c);
        assert_eq!(
            embd_call_options_set_dimensions(c, 1),
            embd_status::InvalidHandle
        );
    }
}

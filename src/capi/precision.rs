//! `embd_precision`: the arithmetic of the encoder's dense layers as a plain
//! `int32_t` with named constants (see the `c_enum` module), its table
//! (`Precisions`: the mapping to [`Precision`] and the names), and
//! `embd_precision_name`.

use std::ffi::{c_char, CStr};

use super::c_enum::{c_enum, CEnum};
use crate::Precision;

/// Arithmetic of the encoder's dense (Linear) layers, for
/// `embd_options_set_precision` and `embd_model_precision`: one of the
/// `EMBD_PRECISION_*` constants. A plain `int32_t`, so any value can be passed
/// safely; an unknown one is refused with `EMBD_STATUS_INVALID_ARGUMENT`.
/// Attention, LayerNorm, GELU and pooling always run in f32.
pub type embd_precision = i32;

/// The model file's own precision (the default): `EMBD_PRECISION_INT8` for
/// files converted with `--dtype int8`, `EMBD_PRECISION_BF16` for `--dtype
/// bf16` (packed), `EMBD_PRECISION_F32` otherwise. Only an
/// option value: `embd_model_precision` never returns it for a live model.
pub const EMBD_PRECISION_DEFAULT: embd_precision = 0;

/// f32 weights and activations, f32 accumulation: the reference numbers.
pub const EMBD_PRECISION_F32: embd_precision = 1;

/// Weights and activations rounded to bfloat16 (round to nearest even), f32
/// accumulation.
pub const EMBD_PRECISION_BF16: embd_precision = 2;

/// Weights symmetric int8 per output channel, activations quantized per token
/// row, exact int32 accumulation, f32 epilogues.
pub const EMBD_PRECISION_INT8: embd_precision = 3;

c_enum! {
    /// `embd_precision` as the option value (`None`: the file's own) and the
    /// name the `embd` command line gives it.
    pub(crate) struct Precisions: Option<Precision>, "precision" {
        EMBD_PRECISION_DEFAULT => [None], c"default";
        EMBD_PRECISION_F32 => [Some(Precision::F32)], c"f32";
        EMBD_PRECISION_BF16 => [Some(Precision::Bf16)], c"bf16";
        EMBD_PRECISION_INT8 => [Some(Precision::Int8)], c"int8";
    }
}

/// Returns the lowercase name of a precision, as the `embd` command line
/// spells it: "f32", "bf16", "int8", or "default" for
/// `EMBD_PRECISION_DEFAULT`.
///
/// - `precision`: any integer.
///
/// Returns a static NUL-terminated string owned by the library, valid for the
/// life of the process; NULL for a value that is not an `EMBD_PRECISION_*`
/// constant. Does not touch `embd_last_error()`.
///
/// Thread safety: safe from any thread at any time (pure function).
#[no_mangle]
pub extern "C" fn embd_precision_name(precision: embd_precision) -> *const c_char {
    Precisions::name(precision).map_or(std::ptr::null(), CStr::as_ptr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::status::embd_status;

    #[test]
    fn constants_round_trip_and_names_match_the_cli() {
        for p in Precision::ALL {
            let c = Precisions::to_c(Some(p));
            assert_eq!(Precisions::from_c(c).unwrap(), Some(p));
            // SAFETY: embd_precision_name returns a static NUL-terminated string for known values.
            let name = unsafe { CStr::from_ptr(embd_precision_name(c)) };
            assert_eq!(name.to_str().unwrap(), p.name());
            assert_eq!(Precision::from_name(p.name()), Some(p));
        }
        assert_eq!(Precisions::from_c(EMBD_PRECISION_DEFAULT).unwrap(), None);
    }

    #[test]
    fn unknown_values_are_refused_by_name() {
        for v in [-1, 4, 7, i32::MIN, i32::MAX] {
            let e = Precisions::from_c(v).unwrap_err();
            assert_eq!(e.status, embd_status::InvalidArgument);
            assert_eq!(
                e.msg,
                format!(
                    "precision {v} is not supported; accepted: EMBD_PRECISION_DEFAULT (0), \
                     EMBD_PRECISION_F32 (1), EMBD_PRECISION_BF16 (2), EMBD_PRECISION_INT8 (3)"
                )
            );
            assert!(embd_precision_name(v).is_null());
        }
    }
}

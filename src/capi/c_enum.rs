//! The C enumerations as tables. A C enumeration is a plain `int32_t` type
//! with named constants (not a Rust enum taken by value, so any integer a C
//! caller passes is defined behaviour and an unknown one is a status). Its
//! constants stay `pub const` items beside their type, with their docs, so
//! that cbindgen writes them into the header; [`c_enum!`] lays them out as
//! one table of rows (constant, Rust value, lower-case name) and derives
//! from it every conversion the C layer needs: C value to Rust value (an
//! unknown one refused by a message listing the accepted constants), Rust
//! value to C value, and the name. A new constant is its `pub const` and one
//! row.

use std::ffi::CStr;

use super::boundary::{Fail, FfiResult};
use super::status::embd_status;

/// A C enumeration's table (implemented by [`c_enum!`]).
pub(crate) trait CEnum {
    /// What a constant stands for on the Rust side.
    type Value;
    /// What messages call a value: "precision".
    const WHAT: &'static str;
    /// Every constant and its C name, in the table's order.
    const ROWS: &'static [(i32, &'static str)];

    /// The Rust value of the constant `c`, if it is one.
    fn value(c: i32) -> Option<Self::Value>;

    /// The constant of `v`.
    fn to_c(v: Self::Value) -> i32;

    /// The lower-case name of the constant `c`, if it is one and the table
    /// names its constants.
    fn name(c: i32) -> Option<&'static CStr>;

    /// The Rust value of `c`, else `EMBD_STATUS_INVALID_ARGUMENT` with a
    /// message naming `c` and the accepted constants.
    fn from_c(c: i32) -> FfiResult<Self::Value> {
        Self::value(c).ok_or_else(|| {
            let accepted: Vec<String> = Self::ROWS
                .iter()
                .map(|(v, name)| format!("{name} ({v})"))
                .collect();
            Fail::new(
                embd_status::InvalidArgument,
                format!(
                    "{} {c} is not supported; accepted: {}",
                    Self::WHAT,
                    accepted.join(", ")
                ),
            )
        })
    }
}

/// Declares a unit struct implementing [`CEnum`] from rows
/// `CONSTANT => [rust value] (, c"name")?;`. The Rust values are written as
/// both expressions and patterns, so the compiler checks that every Rust
/// value has a row (`to_c` is an exhaustive `match`).
macro_rules! c_enum {
    (@name) => {
        None
    };
    (@name $name:literal) => {
        Some($name)
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $table:ident: $value:ty, $what:literal {
            $( $c:ident => [$($v:tt)+] $(, $name:literal)? ; )+
        }
    ) => {
        $(#[$meta])*
        $vis struct $table;

        impl $crate::capi::c_enum::CEnum for $table {
            type Value = $value;
            const WHAT: &'static str = $what;
            const ROWS: &'static [(i32, &'static str)] = &[$(($c, stringify!($c))),+];

            fn value(c: i32) -> Option<$value> {
                match c {
                    $($c => Some($($v)+),)+
                    _ => None,
                }
            }

            fn to_c(v: $value) -> i32 {
                match v {
                    $($($v)+ => $c,)+
                }
            }

            fn name(c: i32) -> Option<&'static std::ffi::CStr> {
                match c {
                    $($c => c_enum!(@name $($name)?),)+
                    _ => None,
                }
            }
        }
    };
}

pub(crate) use c_enum;

#[cfg(test)]
mod tests {
    use super::CEnum;
    use crate::capi::call::Truncations;
    use crate::capi::output::OutputPrecisions;
    use crate::capi::outputs::Tasks;
    use crate::capi::precision::Precisions;

    #[test]
    fn every_table_matches_the_header() {
        check::<Precisions>();
        check::<OutputPrecisions>();
        check::<Tasks>();
        check::<Truncations>();
    }

    #[test]
    fn messages_list_the_accepted_constants() {
        let msg = |e: crate::capi::boundary::Fail| e.msg;
        assert_eq!(
            msg(Truncations::from_c(3).unwrap_err()),
            "truncation 3 is not supported; accepted: EMBD_TRUNCATION_RIGHT (0), \
             EMBD_TRUNCATION_LEFT (1), EMBD_TRUNCATION_REFUSE (2)"
        );
        assert_eq!(
            msg(Tasks::from_c(-1).unwrap_err()),
            "task -1 is not supported; accepted: EMBD_TASK_NONE (0), EMBD_TASK_QUERY (1), \
             EMBD_TASK_DOCUMENT (2)"
        );
        assert_eq!(
            msg(OutputPrecisions::from_c(5).unwrap_err()),
            "output precision 5 is not supported; accepted: EMBD_OUTPUT_FLOAT32 (0), \
             EMBD_OUTPUT_INT8 (1), EMBD_OUTPUT_UINT8 (2), EMBD_OUTPUT_BINARY (3), \
             EMBD_OUTPUT_UBINARY (4)"
        );
        assert!(Tasks::name(0).is_none() && Truncations::name(0).is_none());
        assert_eq!(OutputPrecisions::name(4), Some(c"ubinary"));
    }

    /// The header cbindgen generated from `src/capi`.
    const HEADER: &str = include_str!(concat!(env!("OUT_DIR"), "/embedder.h"));

    /// Every row round-trips, its name (if any) is lower-case, and the
    /// header's `#define`s of the table's prefix are exactly its rows.
    fn check<E: CEnum>() {
        for &(c, c_name) in E::ROWS {
            let v = E::value(c).unwrap_or_else(|| panic!("{c_name} has no value"));
            let back = E::to_c(v);
            assert_eq!(back, c, "{c_name}");
            assert_eq!(E::from_c(c).ok().map(E::to_c), Some(c), "{c_name}");
            if let Some(name) = E::name(c) {
                let name = name.to_str().unwrap();
                assert_eq!(name, name.to_ascii_lowercase(), "{c_name}");
            }
        }
        // The prefix of the constants (`EMBD_PRECISION_`).
        let first = E::ROWS[0].1;
        let prefix = E::ROWS.iter().fold(first.to_string(), |p, (_, n)| {
            p.chars()
                .zip(n.chars())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect()
        });
        let prefix = &prefix[..=prefix.rfind('_').unwrap()];
        let mut in_header: Vec<(String, i32)> = HEADER
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter(|l| l.starts_with(prefix))
            .map(|l| {
                let (name, v) = l.split_once(' ').unwrap();
                (name.to_string(), v.trim().parse().unwrap())
            })
            .collect();
        in_header.sort();
        let mut rows: Vec<(String, i32)> =
            E::ROWS.iter().map(|&(v, n)| (n.to_string(), v)).collect();
        rows.sort();
        assert_eq!(in_header, rows, "the header's {prefix}* constants");
        for v in [-1, i32::MIN, i32::MAX] {
            if E::ROWS.iter().all(|&(c, _)| c != v) {
                assert!(E::value(v).is_none());
                assert!(E::name(v).is_none());
                let Err(e) = E::from_c(v) else {
                    panic!("{} {v} was taken", E::WHAT)
                };
                assert!(e.msg.contains(&format!("{} {v} ", E::WHAT)), "{}", e.msg);
                assert!(e
                    .msg
                    .contains(&format!("{} ({})", E::ROWS[0].1, E::ROWS[0].0)));
            }
        }
    }
}

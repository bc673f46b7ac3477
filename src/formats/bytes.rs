//! Checked little-endian reading shared by every container reader.
//!
//! Every read names what it reads (`what`) so that an error says which field of
//! the file is wrong and at which byte offset. Arithmetic on values read from a
//! file always goes through [`add`] / [`mul`], which fail instead of wrapping.
//!
//! # Panics
//! Never, for any input.

use crate::error::{Error, Result};

/// A forward cursor over a byte slice with bounds-checked reads.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at offset `pos` of `data` (positions are absolute in `data`).
    pub fn new(data: &'a [u8], pos: usize) -> Self {
        Cursor { data, pos }
    }

    /// The current absolute position.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to an absolute position (checked on the next read).
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Bytes left after the current position (0 if past the end).
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Takes `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let out = slice(self.data, self.pos, n, what)?;
        self.pos += n;
        Ok(out)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.bytes(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// Reads a `u8`.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    /// Reads a little-endian `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `i32`.
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `i64`.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian `f32`.
    pub fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }

    /// Reads `n` bytes that must be UTF-8.
    pub fn str(&mut self, n: usize, what: &str) -> Result<&'a str> {
        let at = self.pos;
        let b = self.bytes(n, what)?;
        utf8(b, what, at)
    }
}

/// `data[offset..offset + len]`, or a "truncated" error naming `what`.
pub fn slice<'a>(data: &'a [u8], offset: usize, len: usize, what: &str) -> Result<&'a [u8]> {
    let end = offset.checked_add(len).ok_or_else(|| {
        Error::format(
            what,
            offset as u64,
            format!("length {len} overflows the address space"),
        )
    })?;
    data.get(offset..end).ok_or_else(|| {
        Error::truncated(
            what,
            offset as u64,
            len as u64,
            data.len().saturating_sub(offset) as u64,
        )
    })
}

/// Validates UTF-8, naming the field and offset on failure.
pub fn utf8<'a>(b: &'a [u8], what: &str, offset: usize) -> Result<&'a str> {
    std::str::from_utf8(b)
        .map_err(|e| Error::format(what, (offset + e.valid_up_to()) as u64, "invalid UTF-8"))
}

/// Checked `a + b` for values read from a file.
pub fn add(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_add(b)
        .ok_or_else(|| Error::format(what, a, format!("{a} + {b} overflows")))
}

/// Checked `a * b` for values read from a file.
pub fn mul(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_mul(b)
        .ok_or_else(|| Error::format(what, 0, format!("{a} * {b} overflows")))
}

/// Converts a file-provided `u64` to `usize`, failing on 32-bit overflow.
pub fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::format(what, 0, format!("{v} does not fit in memory")))
}

/// Product of dims with overflow checks.
pub fn product(dims: &[usize], what: &str) -> Result<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        acc.checked_mul(d)
            .ok_or_else(|| Error::format(what, 0, format!("shape {dims:?} overflows")))
    })
}

/// 32-bit FNV-1a (offset basis 0x811C9DC5, prime 0x01000193).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// CRC32 (IEEE 802.3 / zlib) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Bytes below which [`crc32_parallel`] does not start a thread.
const PARALLEL_CRC_MIN: usize = 8 << 20;

/// Most threads [`crc32_parallel`] uses (memory bandwidth and page faults, not
/// the CRC itself, limit beyond that).
const PARALLEL_CRC_MAX_THREADS: usize = 4;

/// The CRC32 state after `bytes` (to [`crc32fast::Hasher::combine`] with others),
/// computed over up to 4 parts on scoped threads when `bytes` is large and
/// the machine has more than one core: for a memory-mapped file most of the
/// time goes into the page faults of first touch, which then run in parallel.
/// Each part first asks for its pages (`prefault`, e.g. `MADV_POPULATE_READ`),
/// which maps them in fewer, larger steps than faulting one page at a time.
pub fn crc32_parallel(bytes: &[u8], prefault: &(dyn Fn(&[u8]) + Sync)) -> crc32fast::Hasher {
    let one = |part: &[u8]| {
        let mut h = crc32fast::Hasher::new();
        // Prefault and check in slices, so that the pages just mapped are
        // checked while their page-table entries are still cached.
        for c in part.chunks(4 << 20) {
            prefault(c);
            h.update(c);
        }
        h
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores
        .min(PARALLEL_CRC_MAX_THREADS)
        .min(bytes.len() / PARALLEL_CRC_MIN)
        .max(1);
    if threads == 1 {
        return one(bytes);
    }
    let per = bytes.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut parts = bytes.chunks(per);
        let first = parts.next().unwrap_or(&[]);
        // A part whose thread cannot be started is checked here afterwards.
        let workers: Vec<_> = parts
            .map(|p| {
                (
                    p,
                    std::thread::Builder::new().spawn_scoped(s, move || one(p)),
                )
            })
            .collect();
        let mut h = one(first);
        for (p, w) in workers {
            let part = match w {
                Ok(j) => j.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                Err(_) => one(p),
            };
            h.combine(&part);
        }
        h
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian() {
        let d = [1u8, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0];
        let mut c = Cursor::new(&d, 0);
        assert_eq!(c.u16("a").unwrap(), 1);
        assert_eq!(c.u32("b").unwrap(), 2);
        assert_eq!(c.u64("c").unwrap(), 3);
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn truncated_read_names_field_and_offset() {
        let d = [1u8, 2, 3];
        let mut c = Cursor::new(&d, 1);
        let e = c.u32("header.flags").unwrap_err();
        assert!(e.to_string().contains("header.flags at offset 1"), "{e}");
    }

    #[test]
    fn slice_overflow_is_error() {
        assert!(slice(&[0u8; 4], usize::MAX, 2, "x").is_err());
        assert!(slice(&[0u8; 4], 2, 3, "x").is_err());
        assert_eq!(slice(&[0u8, 1, 2, 3], 1, 2, "x").unwrap(), &[1, 2]);
    }

    #[test]
    fn fnv1a_known_values() {
        // Published FNV-1a 32-bit test vectors.
        assert_eq!(fnv1a32(b""), 0x811C_9DC5);
        assert_eq!(fnv1a32(b"a"), 0xE40C_292C);
        assert_eq!(fnv1a32(b"foobar"), 0xBF9C_F968);
    }

    #[test]
    fn parallel_crc_matches_serial() {
        let data: Vec<u8> = (0..(33usize << 20) + 5).map(|i| (i % 253) as u8).collect();
        let touched = std::sync::atomic::AtomicUsize::new(0);
        let prefault = |c: &[u8]| {
            touched.fetch_add(c.len(), std::sync::atomic::Ordering::Relaxed);
        };
        for part in [&data[..], &data[..100], &data[7..(17 << 20) + 3], &[]] {
            touched.store(0, std::sync::atomic::Ordering::Relaxed);
            let h = crc32_parallel(part, &prefault);
            assert_eq!(h.finalize(), crc32(part));
            assert_eq!(
                touched.load(std::sync::atomic::Ordering::Relaxed),
                part.len()
            );
        }
    }

    #[test]
    fn crc32_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn invalid_utf8_is_error() {
        let d = [b'a', 0xFF, b'b'];
        let mut c = Cursor::new(&d, 0);
        let e = c.str(3, "name").unwrap_err();
        assert!(e.to_string().contains("invalid UTF-8"));
    }
}

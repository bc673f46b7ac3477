//! Checked little-endian reading shared by every container reader.
//!
//! Every read names what it reads (`what`) so that an error says which field of
//! the file is wrong and at which byte offset. Arithmetic on values read from a
//! file always goes through [`add`] / [`mul`], which fail instead of wrapping.
//!
//! # Panics
//! Never, for any input.

use crate::error::{Error, ErrorKind, Result};

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

    /// Takes a file magic: `magic.len()` bytes that must equal `magic`. Too
    /// few bytes are a format error naming `what`; other bytes are
    /// [`ErrorKind::UnknownFormat`] with the message `wrong`.
    pub fn magic(&mut self, magic: &[u8], what: &str, wrong: &str) -> Result<()> {
        if self.bytes(magic.len(), what)? != magic {
            return Err(Error::new(ErrorKind::UnknownFormat, wrong));
        }
        Ok(())
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

/// Bytes per work item of [`crc32_parallel`].
const CRC_CHUNK: usize = 4 << 20;

/// The CRC32 state after `bytes` (to [`crc32fast::Hasher::combine`] with others),
/// computed in chunks of 4 MiB on up to 4 scoped threads when `bytes` is large
/// and the machine has more than one core: for a memory-mapped file most of
/// the time goes into memory traffic and the page faults of first touch, which
/// then run in parallel. Each chunk first asks for its pages (`prefault`, e.g.
/// `MADV_POPULATE_READ`), which maps them in fewer, larger steps than faulting
/// one page at a time, then is checked while its page-table entries are still
/// cached.
///
/// Chunks are checked in any order and combined in file order. The chunks
/// overlapping `last` (a range of `bytes`) are checked last, from its end
/// back to its start, so that when the check ends the caches hold the start
/// of `last`: the data a caller reads first right after (the first layers of
/// an encoder) is then still in the last-level cache.
pub fn crc32_parallel(
    bytes: &[u8],
    last: std::ops::Range<usize>,
    prefault: &(dyn Fn(&[u8]) + Sync),
) -> crc32fast::Hasher {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let chunks: Vec<&[u8]> = bytes.chunks(CRC_CHUNK).collect();
    // Processing order: chunks before `last`, then after it, then `last`
    // backwards.
    let first_hot = last.start.min(bytes.len()) / CRC_CHUNK;
    let end_hot = last.end.min(bytes.len()).div_ceil(CRC_CHUNK).max(first_hot);
    let order: Vec<usize> = (0..first_hot)
        .chain(end_hot..chunks.len())
        .chain((first_hot..end_hot).rev())
        .collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&c) = order.get(i) else { break };
            prefault(chunks[c]);
            let mut h = crc32fast::Hasher::new();
            h.update(chunks[c]);
            done.push((c, h));
        }
        done
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores
        .min(PARALLEL_CRC_MAX_THREADS)
        .min(bytes.len() / PARALLEL_CRC_MIN)
        .max(1);
    let mut parts: Vec<Option<crc32fast::Hasher>> = vec![None; chunks.len()];
    std::thread::scope(|s| {
        // A thread that cannot be started leaves its share to the others.
        let workers: Vec<_> = (1..threads)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(s, work).ok())
            .collect();
        let mut all = work();
        for w in workers {
            all.extend(w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        for (c, h) in all {
            parts[c] = Some(h);
        }
    });
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.combine(&p.expect("every chunk checked"));
    }
    h
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
            let n = part.len();
            for last in [0..0, 0..n, n / 3..n, 5..n / 2, n..n + 9] {
                let h = crc32_parallel(part, last.clone(), &|_: &[u8]| {});
                assert_eq!(h.finalize(), crc32(part), "{n} {last:?}");
            }
            touched.store(0, std::sync::atomic::Ordering::Relaxed);
            let h = crc32_parallel(part, n / 2..n, &prefault);
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

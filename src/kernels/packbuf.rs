//! A large, long-lived float buffer for pre-packed weights: 64-byte aligned,
//! and on Linux an anonymous mapping advised to use transparent huge pages
//! (`MADV_HUGEPAGE`), so that filling it takes a few 2 MiB page faults instead
//! of thousands of 4 KiB ones, and streaming it through the kernels on every
//! call needs few TLB entries. Elsewhere (or if the mapping fails) it is a
//! plain heap allocation.
//!
//! A buffer can also be a read-only view of bytes someone else keeps alive
//! ([`PackBuf::shared`]): weights stored packed in a memory-mapped model file
//! are read in place, shared by every handle and process that maps the file.

use std::sync::Arc;

/// Huge-page size the mapping is aligned to.
#[cfg(target_os = "linux")]
const HUGE: usize = 2 << 20;

enum Storage {
    /// `map` is the whole anonymous mapping (`map_len` bytes); the floats
    /// start at `data`, inside it.
    #[cfg(target_os = "linux")]
    Mapped {
        map: *mut libc::c_void,
        map_len: usize,
        data: *mut f32,
    },
    /// Heap fallback; the floats start at index `start` (64-byte aligned).
    Heap { buf: Vec<f32>, start: usize },
    /// Read-only floats at `data`, inside memory that `_owner` keeps alive
    /// and never changes (a read-only file mapping).
    Shared {
        _owner: Arc<dyn Send + Sync>,
        data: *const f32,
    },
}

/// `len` floats, zero-initialised, 64-byte aligned.
pub struct PackBuf {
    storage: Storage,
    len: usize,
}

// SAFETY: `PackBuf` exclusively owns its memory (the mapping or the Vec), or
// holds an `Arc` to the owner of read-only memory; the raw pointers are never
// shared outside `&self` / `&mut self` borrows, so it is as thread-safe as a
// `Vec<f32>`.
unsafe impl Send for PackBuf {}
// SAFETY: as above: shared access only hands out `&[f32]`.
unsafe impl Sync for PackBuf {}

impl PackBuf {
    /// A zeroed buffer of `len` floats.
    pub fn zeroed(len: usize) -> PackBuf {
        #[cfg(target_os = "linux")]
        if let Some(b) = Self::mapped(len) {
            return b;
        }
        let buf = vec![0.0f32; len + 16];
        let start = buf.as_ptr().align_offset(64).min(16);
        PackBuf {
            storage: Storage::Heap { buf, start },
            len,
        }
    }

    /// A read-only view of `bytes` (packed weights read in place), kept
    /// alive by `owner`, which must never change or free them while it
    /// lives. `None` unless `bytes` is 64-byte aligned and a whole number of
    /// floats.
    pub fn shared(owner: Arc<dyn Send + Sync>, bytes: &[u8]) -> Option<PackBuf> {
        if !(bytes.as_ptr() as usize).is_multiple_of(64) || !bytes.len().is_multiple_of(4) {
            return None;
        }
        Some(PackBuf {
            storage: Storage::Shared {
                _owner: owner,
                data: bytes.as_ptr().cast(),
            },
            len: bytes.len() / 4,
        })
    }

    /// Whether the floats are read in place from memory owned elsewhere.
    pub fn is_shared(&self) -> bool {
        matches!(self.storage, Storage::Shared { .. })
    }

    #[cfg(target_os = "linux")]
    fn mapped(len: usize) -> Option<PackBuf> {
        let bytes = len.checked_mul(4)?;
        if bytes == 0 {
            return None;
        }
        // Room to align the start to a huge page.
        let map_len = bytes.checked_add(HUGE)?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected. The result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let skip = (map as usize).next_multiple_of(HUGE) - map as usize;
        let data = map.cast::<u8>().wrapping_add(skip);
        // SAFETY: `data .. data + bytes` lies inside the mapping just created
        // (skip < HUGE); the advice is only a hint, its failure is harmless.
        unsafe { libc::madvise(data.cast(), bytes, libc::MADV_HUGEPAGE) };
        Some(PackBuf {
            storage: Storage::Mapped {
                map,
                map_len,
                data: data.cast(),
            },
            len,
        })
    }

    /// The floats.
    pub fn as_slice(&self) -> &[f32] {
        match &self.storage {
            #[cfg(target_os = "linux")]
            // SAFETY: `data` points at `len` floats of the live mapping, zeroed
            // by the kernel and only written through `as_mut_slice`.
            Storage::Mapped { data, .. } => unsafe { std::slice::from_raw_parts(*data, self.len) },
            Storage::Heap { buf, start } => &buf[*start..*start + self.len],
            // SAFETY: `data` points at `len` floats (checked aligned in
            // `shared`) of memory `_owner` keeps alive and unchanged; any bit
            // pattern is a valid f32.
            Storage::Shared { data, .. } => unsafe { std::slice::from_raw_parts(*data, self.len) },
        }
    }

    /// The floats, writable.
    ///
    /// # Panics
    /// For a [`PackBuf::shared`] view (read-only memory): only buffers made
    /// by [`PackBuf::zeroed`] are filled.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        match &mut self.storage {
            #[cfg(target_os = "linux")]
            // SAFETY: as in `as_slice`, and `&mut self` makes this the only
            // reference to the memory.
            Storage::Mapped { data, .. } => unsafe {
                std::slice::from_raw_parts_mut(*data, self.len)
            },
            Storage::Heap { buf, start } => &mut buf[*start..*start + self.len],
            Storage::Shared { .. } => panic!("PackBuf: a shared view is read-only"),
        }
    }
}

impl Drop for PackBuf {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped { map, map_len, .. } = self.storage {
            // SAFETY: `map`/`map_len` are exactly the mapping made in `mapped`,
            // unmapped once, here; no slice of it outlives `self`.
            unsafe { libc::munmap(map, map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_writable() {
        for len in [0usize, 1, 17, 1 << 20, (3 << 20) + 5] {
            let mut b = PackBuf::zeroed(len);
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0.0));
            assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
            for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
                *x = i as f32;
            }
            assert!(b.as_slice().iter().enumerate().all(|(i, &x)| x == i as f32));
        }
    }

    #[test]
    fn shared_views_aligned_whole_floats_only() {
        let mut owner = PackBuf::zeroed(64);
        for (i, x) in owner.as_mut_slice().iter_mut().enumerate() {
            *x = i as f32;
        }
        let owner = Arc::new(owner);
        // SAFETY: reading the owner's initialised floats as bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts(owner.as_slice().as_ptr().cast::<u8>(), 256) };
        let v = PackBuf::shared(owner.clone(), &bytes[64..192]).unwrap();
        assert!(v.is_shared());
        assert_eq!(v.as_slice(), &owner.as_slice()[16..48]);
        assert!(PackBuf::shared(owner.clone(), &bytes[4..68]).is_none());
        assert!(PackBuf::shared(owner.clone(), &bytes[0..63]).is_none());
    }
}

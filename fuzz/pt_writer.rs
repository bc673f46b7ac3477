//! A tiny writer of `torch.save`-style archives for tests and fuzz seeds (no
//! torch needed): protocol-2 pickles built opcode by opcode ([`Pickle`]) and a
//! zip of stored entries laid out as torch lays them out ([`torch_zip`]:
//! 64-byte aligned data, zip64 end records). Included with `#[path]` by
//! `fuzz/make_seeds.rs` and `tests/it/torch_pt.rs`.

#![allow(dead_code)]

/// A pickle under construction (starts with `PROTO 2`).
pub struct Pickle(pub Vec<u8>);

impl Default for Pickle {
    fn default() -> Self {
        Pickle(vec![0x80, 2])
    }
}

impl Pickle {
    /// `PROTO 2`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raw bytes (an opcode and its argument).
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }

    /// `GLOBAL module name`.
    pub fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.0.push(b'c');
        self.0
            .extend_from_slice(format!("{module}\n{name}\n").as_bytes());
        self
    }

    /// `BINUNICODE s`.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// The shortest int opcode for `v`.
    pub fn int(&mut self, v: i64) -> &mut Self {
        if (0..256).contains(&v) {
            self.0.extend_from_slice(&[b'K', v as u8]);
        } else if (0..65536).contains(&v) {
            self.0.push(b'M');
            self.0.extend_from_slice(&(v as u16).to_le_bytes());
        } else if i32::try_from(v).is_ok() {
            self.0.push(b'J');
            self.0.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.0.extend_from_slice(&[0x8a, 8]);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        self
    }

    /// `MARK`.
    pub fn mark(&mut self) -> &mut Self {
        self.raw(b"(")
    }

    /// A tuple of ints: `MARK ints... TUPLE`.
    pub fn int_tuple(&mut self, v: &[usize]) -> &mut Self {
        self.mark();
        for &x in v {
            self.int(x as i64);
        }
        self.raw(b"t")
    }

    /// `collections.OrderedDict()`: `GLOBAL`, `EMPTY_TUPLE`, `REDUCE`.
    pub fn ordered_dict(&mut self) -> &mut Self {
        self.global("collections", "OrderedDict").raw(b")R")
    }

    /// A tensor as torch pickles it: `_rebuild_tensor_v2((storage pid),
    /// offset, size, stride, False, OrderedDict())`.
    #[allow(clippy::too_many_arguments)]
    pub fn tensor(
        &mut self,
        storage_type: &str,
        key: &str,
        numel: usize,
        offset: usize,
        shape: &[usize],
        stride: &[usize],
    ) -> &mut Self {
        self.global("torch._utils", "_rebuild_tensor_v2");
        self.mark();
        self.mark()
            .str("storage")
            .global("torch", storage_type)
            .str(key)
            .str("cpu")
            .int(numel as i64)
            .raw(b"t")
            .raw(b"Q");
        self.int(offset as i64)
            .int_tuple(shape)
            .int_tuple(stride)
            .raw(&[0x89]);
        self.ordered_dict().raw(b"t").raw(b"R")
    }

    /// `STOP`; the bytes.
    pub fn finish(&mut self) -> Vec<u8> {
        self.0.push(b'.');
        std::mem::take(&mut self.0)
    }
}

/// One tensor of [`state_dict`]: `(name, storage type, storage key, storage
/// numel, offset, shape, stride)`.
pub type Spec<'a> = (
    &'a str,
    &'a str,
    &'a str,
    usize,
    usize,
    &'a [usize],
    &'a [usize],
);

/// The pickle of `OrderedDict` of the tensors, as `model.state_dict()` saves.
pub fn state_dict(tensors: &[Spec<'_>]) -> Vec<u8> {
    let mut p = Pickle::new();
    p.ordered_dict().mark();
    for &(name, ty, key, numel, offset, shape, stride) in tensors {
        p.str(name).tensor(ty, key, numel, offset, shape, stride);
    }
    p.raw(b"u").finish()
}

/// CRC32 (IEEE), bitwise (no dependency).
pub fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A zip of stored entries `(name, bytes)` as torch writes it: each entry's
/// data 64-byte aligned (padding in a `FB` extra field), CRCs, then the
/// central directory and zip64 end records.
pub fn zip(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let at = out.len() as u32;
        let crc = crc32(data);
        let header = 30 + name.len() + 4;
        let pad = (64 - (out.len() + header) % 64) % 64;
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // version, flags, method, time, date
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&((4 + pad) as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"FB");
        out.extend_from_slice(&(pad as u16).to_le_bytes());
        out.extend(std::iter::repeat_n(b'Z', pad));
        out.extend_from_slice(data);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&[0; 12]); // made, needed, flags, method, time, date
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 12]); // extra, comment, disk, iattr, eattr
        central.extend_from_slice(&at.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u64;
    let n = entries.len() as u64;
    out.extend_from_slice(&central);
    let eocd64 = out.len() as u64;
    out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
    out.extend_from_slice(&44u64.to_le_bytes());
    out.extend_from_slice(&[0x1e, 3, 0x2d, 0]);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u64).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&eocd64.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&(cd_offset as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// A `torch.save` archive named `archive`: `data.pkl` = `pickle`, then the
/// storages `data/<key>`, `byteorder` = `little` and `version` = `3`.
pub fn torch_zip(archive: &str, pickle: &[u8], storages: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut e = vec![(format!("{archive}/data.pkl"), pickle.to_vec())];
    e.push((format!("{archive}/byteorder"), b"little".to_vec()));
    for (k, b) in storages {
        e.push((format!("{archive}/data/{k}"), b.clone()));
    }
    e.push((format!("{archive}/version"), b"3\n".to_vec()));
    zip(&e)
}

/// f32 values as little-endian bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

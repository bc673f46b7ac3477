//! Weights stored in the kernels' run layout, so that opening maps them in
//! place instead of converting and packing them (`embd convert --dtype
//! bf16|int8`, and `--dtype f32 --packed`; issue "big models": a 0.6B
//! model's bf16 weights are 1.2 GB, its f32 ones 2.4 GB, which an f32 file
//! stored row by row copies into the SGEMM panels at every open).
//!
//! A `Linear` layer whose segments are `X.weight`, `Y.weight`, ... (stacked
//! along the output dimension, `[n x k]` together) is stored as
//!
//! | tensor | dtype, shape | what |
//! |---|---|---|
//! | `X.weight_packed` | UINT32 `[words]` (bf16) / INT8 `[bytes]` (int8) / FLOAT32 `[floats]` (f32) | [`PackedBf16::words`] / [`PackedI8::packed_bytes`] / [`PackedB::floats`] |
//! | `X.weight_packed_rows` | INT32 `[segments]` | the segments' widths, in order |
//! | `X.weight_packed_exp` | INT16 `[panels]` (bf16) | [`PackedBf16::panel_exps`] |
//! | `X.weight_packed_scale` | FLOAT32 `[n]` (int8) | [`PackedI8::scales`] |
//! | `X.weight_packed_sum` | INT32 `[n]` (int8) | [`PackedI8::weight_sums`] |
//!
//! in place of the segments' `.weight` (and int8 `_scale`) tensors; int8
//! smoothing factors stay `X.weight_smooth`. Metadata `packed_layout` names
//! the byte order ([`PackedBf16::layout`], [`PackedI8::layout`],
//! [`PackedB::layout`]: it depends
//! on the kernels' panel width). Where the running kernels read that layout
//! the bytes are used in place (shared by every handle and process mapping
//! the file); elsewhere (another ISA, another precision asked for) they are
//! unpacked to the values they hold and packed again, which gives the same
//! products bit for bit as a file stored unpacked.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::{DType, ModelFile, TensorEntry};
use crate::kernels::bgemm::PackedBf16;
use crate::kernels::packbuf::PackBuf;
use crate::kernels::qgemm::PackedI8;
use crate::kernels::sgemm::{self, PackedB};
use crate::model::precision::Precision;

/// Metadata key naming the layout of the packed tensors.
pub const LAYOUT_KEY: &str = "packed_layout";

/// The packed tensor of a layer whose first segment is `first`.
fn packed_name(first: &str) -> String {
    format!("{first}_packed")
}

/// A layer's packed weight as a file stores it.
pub(crate) enum Stored<'a> {
    /// bf16 words and panel exponents.
    Bf16 {
        layout: &'a str,
        words: &'a TensorEntry,
        exp: Vec<i16>,
    },
    /// f32 panels.
    F32 {
        layout: &'a str,
        floats: &'a TensorEntry,
    },
    /// int8 bytes, scales and sums.
    Int8 {
        layout: &'a str,
        bytes: &'a TensorEntry,
        scale: Vec<f32>,
        wsum: Vec<i32>,
    },
}

impl Stored<'_> {
    /// The tensor holding the packed values (the companions are small).
    fn values(&self) -> &TensorEntry {
        match self {
            Stored::Bf16 { words, .. } => words,
            Stored::F32 { floats, .. } => floats,
            Stored::Int8 { bytes, .. } => bytes,
        }
    }
}

/// Drops the mapped pages of a stored layer's values from resident memory
/// once they have been read into owned memory ([`unpack_f32`],
/// [`unpack_int8`]): a layer converted at open never reads them again (a
/// page read again comes back from the file).
pub(crate) fn release_values(file: &ModelFile, stored: &Stored<'_>) {
    if let Some(r) = file.tensor_file_range(stored.values()) {
        file.release_pages(r);
    }
}

/// The precision a file's packed weights run in by default, if it has any.
pub(crate) fn file_precision(file: &ModelFile) -> Option<Precision> {
    let layout = file.metadata.get(LAYOUT_KEY)?;
    if layout.starts_with("bf16-") {
        Some(Precision::Bf16)
    } else if layout.starts_with("int8-") {
        Some(Precision::Int8)
    } else if layout.starts_with("f32-") {
        Some(Precision::F32)
    } else {
        None
    }
}

/// Whether any tensor of `file` is stored packed.
pub(crate) fn is_packed(file: &ModelFile) -> bool {
    file.metadata.contains_key(LAYOUT_KEY)
}

/// The companion tensor `{packed}{suffix}` of a packed layer: `len` values
/// of `dtype`, checked, its errors naming the layout the sizes are for.
fn companion<const N: usize, T>(
    file: &ModelFile,
    packed: &str,
    suffix: &str,
    dtype: DType,
    len: usize,
    layout: &str,
    from: fn([u8; N]) -> T,
) -> Result<Vec<T>> {
    let name = format!("{packed}{suffix}");
    let t = file.tensor(&name).ok_or_else(|| {
        Error::model(format!(
            "required tensor '{name}' is missing in layout '{layout}'"
        ))
    })?;
    if t.dtype != dtype || t.shape != [len] || t.byte_len() != len * N {
        return Err(Error::model(format!(
            "tensor '{name}' has {} {:?}, expected {dtype} [{len}] in layout '{layout}'",
            t.dtype, t.shape
        )));
    }
    Ok(file
        .tensor_bytes(t)
        .chunks_exact(N)
        .map(|c| from(c.try_into().unwrap_or([0; N])))
        .collect())
}

/// The packed form of the layer with segments `names` (`[widths[s] x k]`
/// each), checked against those sizes; `None` when the file stores the
/// segments unpacked.
///
/// # Errors
/// A packed tensor without its companions or the metadata key, of the wrong
/// type or size, for other segments, or in a layout this build does not know:
/// each named.
pub(crate) fn find<'a>(
    file: &'a ModelFile,
    names: &[String],
    widths: &[usize],
    k: usize,
) -> Result<Option<Stored<'a>>> {
    let Some(first) = names.first() else {
        return Ok(None);
    };
    let name = packed_name(first);
    let Some(t) = file.tensor(&name) else {
        return Ok(None);
    };
    let layout = file.metadata.get(LAYOUT_KEY).ok_or_else(|| {
        Error::model(format!(
            "tensor '{name}' is packed but metadata '{LAYOUT_KEY}' is missing"
        ))
    })?;
    let rows: Vec<i32> = companion(
        file,
        &name,
        "_rows",
        DType::I32,
        widths.len(),
        layout,
        i32::from_le_bytes,
    )?;
    if rows.iter().zip(widths).any(|(&r, &w)| r as i64 != w as i64) {
        return Err(Error::model(format!(
            "tensor '{name}' packs segments of {rows:?} rows, the model has {widths:?}"
        )));
    }
    let n: usize = widths.iter().sum();
    let wrong = |dtype: DType, len: usize| {
        Error::model(format!(
            "tensor '{name}' has {} {:?}, expected {dtype} [{len}] for [{n}, {k}] in layout '{layout}'",
            t.dtype, t.shape
        ))
    };
    if let Some((words, panels)) = PackedBf16::stored_lens(layout, n, k) {
        if t.dtype != DType::U32 || t.shape != [words] || t.byte_len() != 4 * words {
            return Err(wrong(DType::U32, words));
        }
        let exp = companion(
            file,
            &name,
            "_exp",
            DType::I16,
            panels,
            layout,
            i16::from_le_bytes,
        )?;
        return Ok(Some(Stored::Bf16 {
            layout,
            words: t,
            exp,
        }));
    }
    if let Some(len) = PackedI8::stored_len(layout, n, k) {
        if t.dtype != DType::I8 || t.shape != [len] || t.byte_len() != len {
            return Err(wrong(DType::I8, len));
        }
        let scale = companion(
            file,
            &name,
            "_scale",
            DType::F32,
            n,
            layout,
            f32::from_le_bytes,
        )?;
        let wsum = companion(
            file,
            &name,
            "_sum",
            DType::I32,
            n,
            layout,
            i32::from_le_bytes,
        )?;
        return Ok(Some(Stored::Int8 {
            layout,
            bytes: t,
            scale,
            wsum,
        }));
    }
    if let Some(len) = PackedB::stored_len(layout, n, k) {
        if t.dtype != DType::F32 || t.shape != [len] || Some(t.byte_len()) != len.checked_mul(4) {
            return Err(wrong(DType::F32, len));
        }
        return Ok(Some(Stored::F32 { layout, floats: t }));
    }
    Err(Error::unsupported(format!(
        "metadata '{LAYOUT_KEY}' = '{layout}' is not a layout this build reads (bf16-nrN-kcK, int8-nrN-k4, f32-nrN-kcK)"
    )))
}

/// A tensor's bytes as a read-only pack buffer: in place when the file keeps
/// them aligned (a mapped EMBD file), else a copy.
fn buffer(file: &Arc<ModelFile>, t: &TensorEntry) -> PackBuf {
    let bytes = file.tensor_bytes(t);
    let owner: Arc<dyn Send + Sync> = Arc::clone(file) as Arc<dyn Send + Sync>;
    PackBuf::shared(owner, bytes).unwrap_or_else(|| {
        let mut b = PackBuf::zeroed(bytes.len().div_ceil(4));
        for (d, c) in b.as_mut_slice().iter_mut().zip(bytes.chunks(4)) {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            *d = f32::from_ne_bytes(w);
        }
        b
    })
}

/// The stored bf16 weight as `isa`'s kernels read it, when `stored` is in
/// their layout (`None` otherwise).
pub(crate) fn bf16_in_place(
    file: &Arc<ModelFile>,
    stored: &Stored<'_>,
    isa: crate::kernels::bgemm::Isa,
    n: usize,
    k: usize,
) -> Result<Option<PackedBf16>> {
    match stored {
        Stored::Bf16 { layout, words, exp } if *layout == PackedBf16::layout(isa) => {
            PackedBf16::from_stored(isa, n, k, buffer(file, words), exp.clone())
                .map(Some)
                .map_err(|e| Error::model(format!("tensor '{}': {e}", words.name)))
        }
        _ => Ok(None),
    }
}

/// The stored f32 weight as `isa`'s kernels read it, when `stored` is in
/// their layout (`None` otherwise).
pub(crate) fn f32_in_place(
    file: &Arc<ModelFile>,
    stored: &Stored<'_>,
    isa: sgemm::Isa,
    n: usize,
    k: usize,
) -> Result<Option<PackedB>> {
    match stored {
        Stored::F32 { layout, floats } if *layout == PackedB::layout(isa) => {
            PackedB::from_stored(isa, k, n, buffer(file, floats))
                .map(Some)
                .map_err(|e| Error::model(format!("tensor '{}': {e}", floats.name)))
        }
        _ => Ok(None),
    }
}

/// The stored int8 weight as `isa`'s kernels read it, when `stored` is in
/// their layout (`None` otherwise).
pub(crate) fn int8_in_place(
    file: &Arc<ModelFile>,
    stored: &Stored<'_>,
    isa: crate::kernels::qgemm::Isa,
    n: usize,
    k: usize,
) -> Result<Option<PackedI8>> {
    match stored {
        Stored::Int8 {
            layout,
            bytes,
            scale,
            wsum,
        } if *layout == PackedI8::layout(isa) => {
            PackedI8::from_stored(isa, n, k, buffer(file, bytes), scale.clone(), wsum.clone())
                .map(Some)
                .map_err(|e| Error::model(format!("tensor '{}': {e}", bytes.name)))
        }
        _ => Ok(None),
    }
}

/// The int8 values and scales of a stored int8 weight (`[n x k]`), `None`
/// for a stored bf16 or f32 one.
pub(crate) fn unpack_int8(
    file: &ModelFile,
    stored: &Stored<'_>,
    n: usize,
    k: usize,
) -> Result<Option<(Vec<i8>, Vec<f32>)>> {
    match stored {
        Stored::Int8 {
            layout,
            bytes,
            scale,
            ..
        } => {
            let q = PackedI8::unpack(layout, file.tensor_bytes(bytes), n, k).ok_or_else(|| {
                Error::model(format!("tensor '{}' cannot be unpacked", bytes.name))
            })?;
            Ok(Some((q, scale.clone())))
        }
        Stored::Bf16 { .. } | Stored::F32 { .. } => Ok(None),
    }
}

/// The values of a stored weight as f32 `[n x k]`: the f32 or bf16 values, or the
/// int8 ones times their row's scale (and the column's smoothing factor, as
/// an unpacked int8 tensor is read).
pub(crate) fn unpack_f32(
    file: &ModelFile,
    stored: &Stored<'_>,
    n: usize,
    k: usize,
    smooth: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let words = |t: &TensorEntry| -> Vec<u32> {
        file.tensor_bytes(t)
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let unpacked = |t: &TensorEntry, w: Option<Vec<f32>>| {
        w.ok_or_else(|| Error::model(format!("tensor '{}' cannot be unpacked", t.name)))
    };
    match stored {
        Stored::Bf16 {
            layout, words: t, ..
        } => unpacked(t, PackedBf16::unpack(layout, &words(t), n, k)),
        Stored::F32 { layout, floats: t } => {
            let v: Vec<f32> = words(t).into_iter().map(f32::from_bits).collect();
            unpacked(t, PackedB::unpack(layout, &v, n, k))
        }
        Stored::Int8 { .. } => {
            let Some((q, scales)) = unpack_int8(file, stored, n, k)? else {
                return Ok(Vec::new());
            };
            let mut v: Vec<f32> = q.iter().map(|&x| f32::from(x)).collect();
            if k > 0 {
                for (row, s) in v.chunks_exact_mut(k).zip(&scales) {
                    for x in row.iter_mut() {
                        *x *= *s;
                    }
                    if let Some(f) = smooth {
                        for (x, f) in row.iter_mut().zip(f) {
                            *x *= *f;
                        }
                    }
                }
            }
            Ok(v)
        }
    }
}

/// The tensors storing a packed bf16 layer with segments `names`.
pub(crate) fn bf16_tensors(names: &[String], widths: &[usize], p: &PackedBf16) -> Vec<TensorEntry> {
    let name = packed_name(&names[0]);
    let words: Vec<u8> = p.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    let exp: Vec<u8> = p
        .panel_exps()
        .iter()
        .flat_map(|e| e.to_le_bytes())
        .collect();
    vec![
        TensorEntry::owned_bytes(&name, DType::U32, vec![words.len() / 4], &words),
        rows_tensor(&name, widths),
        TensorEntry::owned_bytes(
            format!("{name}_exp"),
            DType::I16,
            vec![p.panel_exps().len()],
            &exp,
        ),
    ]
}

/// The tensors storing a packed f32 layer with segments `names`.
pub(crate) fn f32_tensors(names: &[String], widths: &[usize], p: &PackedB) -> Vec<TensorEntry> {
    let name = packed_name(&names[0]);
    vec![
        TensorEntry::owned_f32(&name, vec![p.floats().len()], p.floats()),
        rows_tensor(&name, widths),
    ]
}

/// The tensors storing a packed int8 layer with segments `names`.
pub(crate) fn int8_tensors(names: &[String], widths: &[usize], p: &PackedI8) -> Vec<TensorEntry> {
    let name = packed_name(&names[0]);
    let sums: Vec<u8> = p
        .weight_sums()
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    vec![
        TensorEntry::owned_bytes(
            &name,
            DType::I8,
            vec![p.packed_bytes().len()],
            p.packed_bytes(),
        ),
        rows_tensor(&name, widths),
        TensorEntry::owned_f32(format!("{name}_scale"), vec![p.n()], p.scales()),
        TensorEntry::owned_bytes(format!("{name}_sum"), DType::I32, vec![p.n()], &sums),
    ]
}

fn rows_tensor(name: &str, widths: &[usize]) -> TensorEntry {
    let rows: Vec<u8> = widths
        .iter()
        .flat_map(|&w| (w as i32).to_le_bytes())
        .collect();
    TensorEntry::owned_bytes(
        format!("{name}_rows"),
        DType::I32,
        vec![widths.len()],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use crate::kernels::bgemm::{self, round_bf16_operand, PackedBf16};
    use crate::kernels::packbuf::PackBuf;
    use crate::kernels::qgemm::{self, PackedI8};
    use std::sync::Arc;

    fn values(len: usize) -> Vec<f32> {
        crate::testutil::pseudo_random(len, 4.0)
    }

    /// Every ISA's bf16 layout unpacks to the values it packed (each rounded
    /// as the kernels round it), and those pack back to the same words,
    /// through a shared view as through the owned buffer; sizes spanning
    /// several `kc` blocks, odd `k` and a partial panel.
    #[test]
    fn bf16_layouts_round_trip() {
        for isa in bgemm::Isa::all().filter(|i| i.supported()) {
            for (n, k) in [(37, 601), (16, 2), (5, 1), (64, 512)] {
                let w = values(n * k);
                let p = PackedBf16::from_linear(isa, &w, n, k);
                let layout = PackedBf16::layout(isa);
                let back = PackedBf16::unpack(&layout, p.words(), n, k).unwrap();
                for (i, (&a, &b)) in w.iter().zip(&back).enumerate() {
                    assert_eq!(
                        (u32::from(round_bf16_operand(a)) << 16),
                        b.to_bits(),
                        "{isa:?} [{n}, {k}] element {i}"
                    );
                }
                let again = PackedBf16::from_linear(isa, &back, n, k);
                assert_eq!(again.words(), p.words(), "{isa:?} [{n}, {k}]");
                assert_eq!(again.panel_exps(), p.panel_exps(), "{isa:?} [{n}, {k}]");
                let (words, panels) = PackedBf16::stored_lens(&layout, n, k).unwrap();
                assert_eq!((words, panels), (p.words().len(), p.panel_exps().len()));
                // The words seen through a shared (read-only) view.
                let mut owned = PackBuf::zeroed(words);
                for (d, &s) in owned.as_mut_slice().iter_mut().zip(p.words()) {
                    *d = f32::from_bits(s);
                }
                let owner = Arc::new(owned);
                // SAFETY: the owner's initialised floats, read as bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts(owner.as_slice().as_ptr().cast::<u8>(), 4 * words)
                };
                let view = PackBuf::shared(owner.clone(), bytes).unwrap();
                let s = PackedBf16::from_stored(isa, n, k, view, p.panel_exps().to_vec()).unwrap();
                assert!(s.is_shared());
                assert_eq!(s.words(), p.words());
                let short = PackBuf::zeroed(words.saturating_sub(16));
                assert!(
                    PackedBf16::from_stored(isa, n, k, short, p.panel_exps().to_vec()).is_err()
                );
            }
        }
        assert!(PackedBf16::unpack("bf16-nr16-kc256", &[0; 3], 2, 2).is_none());
        assert!(PackedBf16::unpack("int8-nr16-k4", &[0; 16], 2, 2).is_none());
        assert!(PackedBf16::stored_lens("bf16-nr0-kc256", 2, 2).is_none());
    }

    /// Every ISA's int8 layout unpacks to the values it packed, and its sums
    /// and scales are the ones it was given.
    #[test]
    fn int8_layouts_round_trip() {
        for isa in qgemm::Isa::all().filter(|i| i.supported()) {
            for (n, k) in [(37, 601), (16, 4), (5, 1), (64, 384)] {
                let w = values(n * k);
                let (q, scales) = qgemm::quantize_weights(&w, n, k);
                let p = PackedI8::from_quantized(isa, &q, &scales, n, k);
                let layout = PackedI8::layout(isa);
                assert_eq!(
                    PackedI8::stored_len(&layout, n, k),
                    Some(p.packed_bytes().len())
                );
                let back = PackedI8::unpack(&layout, p.packed_bytes(), n, k).unwrap();
                assert_eq!(back, q, "{isa:?} [{n}, {k}]");
                assert_eq!(p.scales(), &scales[..]);
                for (j, row) in q.chunks_exact(k).enumerate() {
                    let s: i32 = row.iter().map(|&v| i32::from(v)).sum();
                    assert_eq!(p.weight_sums()[j], s);
                }
            }
        }
        assert!(PackedI8::unpack("int8-nr16-k4", &[0; 5], 2, 2).is_none());
        assert!(PackedI8::stored_len("int8-nr16", 2, 2).is_none());
    }
}

//! Model parameters read from a model file: checked for presence, dtype and
//! exact shape, viewed in place when they are aligned FLOAT32, converted to
//! owned f32 otherwise.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::{DType, ModelFile};

/// One weight tensor as f32: borrowed in place from the shared model file, or
/// owned after a conversion (f16/bf16, dequantized int8, misaligned f32).
pub enum Param {
    /// A FLOAT32 tensor of `file`, viewed zero-copy.
    Mapped {
        /// Keeps the mapping alive.
        file: Arc<ModelFile>,
        /// Index into `file.tensors`.
        index: usize,
    },
    /// Converted values.
    Owned(Vec<f32>),
}

impl Param {
    /// The values. For a mapped tensor this is a view of the file's bytes.
    pub fn as_slice(&self) -> &[f32] {
        match self {
            Param::Owned(v) => v,
            // Presence, dtype and alignment were checked at load, so the view
            // exists; the empty fallback is unreachable and would only make the
            // bounds-checked kernels refuse the call.
            Param::Mapped { file, index } => file
                .tensors
                .get(*index)
                .and_then(|t| file.tensor_f32(t))
                .unwrap_or(&[]),
        }
    }

    /// True when the values are read in place from the file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Param::Mapped { .. })
    }

    /// Drops the mapped file pages holding only this tensor from the process's
    /// resident memory (they are read back from the page cache if touched
    /// again, with the same bytes); a no-op for owned values.
    pub(crate) fn release_pages(&self) {
        if let Some((file, r)) = self.file_range() {
            file.release_pages(r);
        }
    }

    /// The file and byte range of a mapped tensor.
    pub(crate) fn file_range(&self) -> Option<(Arc<ModelFile>, std::ops::Range<usize>)> {
        match self {
            Param::Mapped { file, index } => {
                let r = file.tensor_file_range(file.tensors.get(*index)?)?;
                Some((Arc::clone(file), r))
            }
            Param::Owned(_) => None,
        }
    }
}

/// Whether the file's metadata allows `int8_per_row` tensors (`quantization`).
///
/// # Errors
/// A `quantization` value other than none or `int8_per_row`.
pub(crate) fn stores_int8(file: &ModelFile) -> Result<bool> {
    match file.metadata.get("quantization").map(|s| s.trim()) {
        None | Some("") | Some("none") => Ok(false),
        Some("int8_per_row") => Ok(true),
        Some(q) => Err(Error::unsupported(format!(
            "metadata 'quantization' = '{q}' is not supported (only int8_per_row)"
        ))),
    }
}

pub(crate) fn shape_str(s: &[usize]) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// Finds `name` and checks its exact shape and data length; returns its index.
fn find_checked(file: &ModelFile, name: &str, shape: &[usize]) -> Result<usize> {
    let index = file
        .tensors
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| Error::model(format!("required tensor '{name}' is missing")))?;
    let t = &file.tensors[index];
    if t.shape != shape {
        return Err(Error::model(format!(
            "tensor '{name}' has shape {}, expected {}",
            shape_str(&t.shape),
            shape_str(shape)
        )));
    }
    let numel: usize = shape.iter().product();
    if t.byte_len() != numel * t.dtype.size() {
        return Err(Error::model(format!(
            "tensor '{name}' has {} data bytes, expected {} for {} {}",
            t.byte_len(),
            numel * t.dtype.size(),
            shape_str(shape),
            t.dtype
        )));
    }
    Ok(index)
}

/// An `int8_per_row` matrix as stored: `W ≈ (q[r][c] · scale[r]) · smooth[c]`.
pub(crate) struct StoredInt8 {
    /// `[rows x cols]` values.
    pub q: Vec<i8>,
    /// One scale per row (`{name}_scale`).
    pub scales: Vec<f32>,
    /// One factor per column (`{name}_smooth`), when the converter smoothed
    /// the layer: activations are multiplied by it before quantization.
    pub smooth: Option<Vec<f32>>,
}

/// The int8 values, per-row scales and optional per-column smoothing factors
/// of an `int8_per_row` matrix `name` (`[rows, cols]`), checked like
/// [`load_param`]; `None` when the tensor is stored in another dtype.
pub(crate) fn load_int8(
    file: &ModelFile,
    name: &str,
    shape: [usize; 2],
    int8: bool,
) -> Result<Option<StoredInt8>> {
    let t = &file.tensors[find_checked(file, name, &shape)?];
    if t.dtype != DType::I8 {
        return Ok(None);
    }
    let scales = int8_scales(file, name, shape[0], int8)?;
    let smooth = int8_smooth(file, name, shape[1])?;
    let q = file.tensor_bytes(t).iter().map(|&b| b as i8).collect();
    Ok(Some(StoredInt8 { q, scales, smooth }))
}

/// The optional `{name}_smooth` tensor of an int8 matrix with `cols` columns:
/// f32 `[cols]`, every factor finite and positive.
pub(crate) fn int8_smooth(file: &ModelFile, name: &str, cols: usize) -> Result<Option<Vec<f32>>> {
    let smooth_name = format!("{name}_smooth");
    let Some(st) = file.tensor(&smooth_name) else {
        return Ok(None);
    };
    if st.dtype != DType::F32 || st.shape != [cols] || st.byte_len() != cols * 4 {
        return Err(Error::model(format!(
            "tensor '{smooth_name}' has {} {}, expected f32 [{cols}]",
            st.dtype,
            shape_str(&st.shape),
        )));
    }
    let v = file.tensor_to_f32(st);
    if let Some((c, x)) = v
        .iter()
        .enumerate()
        .find(|(_, x)| !(x.is_finite() && **x > 0.0))
    {
        return Err(Error::model(format!(
            "tensor '{smooth_name}' has factor {x} at column {c}; factors must be finite and positive"
        )));
    }
    Ok(Some(v))
}

/// The `{name}_scale` tensor of an int8 matrix with `rows` rows.
fn int8_scales(file: &ModelFile, name: &str, rows: usize, int8: bool) -> Result<Vec<f32>> {
    let scale_name = format!("{name}_scale");
    let Some(st) = file.tensor(&scale_name) else {
        return Err(Error::model(format!(
            "tensor '{name}' is int8 but '{scale_name}' is missing"
        )));
    };
    if !int8 {
        return Err(Error::model(format!(
            "tensor '{name}' is int8 but metadata 'quantization' is not int8_per_row"
        )));
    }
    if st.dtype != DType::F32 || st.shape != [rows] || st.byte_len() != rows * 4 {
        return Err(Error::model(format!(
            "tensor '{scale_name}' has {} {}, expected f32 [{rows}]",
            st.dtype,
            shape_str(&st.shape),
        )));
    }
    Ok(file.tensor_to_f32(st))
}

/// Loads one tensor, checking presence, dtype and exact shape.
pub(crate) fn load_param(
    file: &Arc<ModelFile>,
    name: &str,
    shape: &[usize],
    int8: bool,
) -> Result<Param> {
    let index = find_checked(file, name, shape)?;
    let t = &file.tensors[index];
    match t.dtype {
        DType::F32 => Ok(if file.tensor_f32(t).is_some() {
            Param::Mapped {
                file: Arc::clone(file),
                index,
            }
        } else {
            Param::Owned(file.tensor_to_f32(t))
        }),
        DType::F16 | DType::BF16 => Ok(Param::Owned(file.tensor_to_f32(t))),
        DType::I8 if shape.len() == 2 => {
            let scales = int8_scales(file, name, shape[0], int8)?;
            let smooth = int8_smooth(file, name, shape[1])?;
            let mut v = file.tensor_to_f32(t);
            let cols = shape[1];
            if cols > 0 {
                for (row, s) in v.chunks_exact_mut(cols).zip(&scales) {
                    for x in row.iter_mut() {
                        *x *= *s;
                    }
                    if let Some(f) = &smooth {
                        for (x, f) in row.iter_mut().zip(f) {
                            *x *= *f;
                        }
                    }
                }
            }
            Ok(Param::Owned(v))
        }
        d => Err(Error::model(format!(
            "tensor '{name}' has dtype {d}, expected f32, f16, bf16 (or int8 with a scale)"
        ))),
    }
}

/// An embedding table `[rows x cols]`: f32 (mapped or converted), or int8 per
/// row as an `int8_per_row` file stores it, read in place and dequantized one
/// looked-up row at a time (`x = q · scale`), so it never takes more memory
/// than the rows in use.
pub enum Table {
    /// Float rows.
    F32(Param),
    /// f16 or bf16 rows read in place, converted one looked-up row at a time.
    Half {
        /// Keeps the mapping alive.
        file: Arc<ModelFile>,
        /// Index into `file.tensors`.
        index: usize,
    },
    /// int8 rows with one scale each.
    Int8 {
        /// Keeps the mapping alive.
        file: Arc<ModelFile>,
        /// Index into `file.tensors`.
        index: usize,
        /// One scale per row.
        scales: Vec<f32>,
    },
}

impl Table {
    /// Loads table `name` of `shape` (`[rows, cols]`), checked like
    /// [`load_param`].
    pub(crate) fn load(
        file: &Arc<ModelFile>,
        name: &str,
        shape: [usize; 2],
        int8: bool,
    ) -> Result<Table> {
        let index = find_checked(file, name, &shape)?;
        if file.tensors[index].dtype == DType::I8 {
            let scales = int8_scales(file, name, shape[0], int8)?;
            return Ok(Table::Int8 {
                file: Arc::clone(file),
                index,
                scales,
            });
        }
        if matches!(file.tensors[index].dtype, DType::BF16 | DType::F16) {
            return Ok(Table::Half {
                file: Arc::clone(file),
                index,
            });
        }
        load_param(file, name, &shape, int8).map(Table::F32)
    }

    /// Writes row `r` (of `dst.len()` columns) into `dst`; false when the row
    /// is out of range.
    pub fn row_into(&self, r: usize, dst: &mut [f32]) -> bool {
        let cols = dst.len();
        match self {
            Table::F32(p) => match p.as_slice().get(r * cols..(r + 1) * cols) {
                Some(src) => {
                    dst.copy_from_slice(src);
                    true
                }
                None => false,
            },
            Table::Half { file, index } => {
                let Some(t) = file.tensors.get(*index) else {
                    return false;
                };
                let Some(b) = file.tensor_bytes(t).get(2 * r * cols..2 * (r + 1) * cols) else {
                    return false;
                };
                let bf16 = t.dtype == DType::BF16;
                for (d, c) in dst.iter_mut().zip(b.chunks_exact(2)) {
                    let bits = u16::from_le_bytes([c[0], c[1]]);
                    *d = if bf16 {
                        half::bf16::from_bits(bits).to_f32()
                    } else {
                        half::f16::from_bits(bits).to_f32()
                    };
                }
                true
            }
            Table::Int8 {
                file,
                index,
                scales,
            } => {
                let (Some(t), Some(&s)) = (file.tensors.get(*index), scales.get(r)) else {
                    return false;
                };
                let Some(q) = file.tensor_bytes(t).get(r * cols..(r + 1) * cols) else {
                    return false;
                };
                for (d, &v) in dst.iter_mut().zip(q) {
                    *d = f32::from(v as i8) * s;
                }
                true
            }
        }
    }

    /// Whether the values are read in place from the file.
    pub fn is_mapped(&self) -> bool {
        match self {
            Table::F32(p) => p.is_mapped(),
            Table::Half { file, index } | Table::Int8 { file, index, .. } => file
                .tensors
                .get(*index)
                .is_some_and(|t| file.tensor_file_range(t).is_some()),
        }
    }

    /// The file and byte range of a mapped table.
    pub(crate) fn file_range(&self) -> Option<(Arc<ModelFile>, std::ops::Range<usize>)> {
        match self {
            Table::F32(p) => p.file_range(),
            Table::Half { file, index } | Table::Int8 { file, index, .. } => {
                let r = file.tensor_file_range(file.tensors.get(*index)?)?;
                Some((Arc::clone(file), r))
            }
        }
    }
}

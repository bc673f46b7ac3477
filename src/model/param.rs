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

/// The int8 values and per-row scales of an `int8_per_row` matrix `name`
/// (`[rows, cols]`), checked like [`load_param`]; `None` when the tensor is
/// stored in another dtype.
pub(crate) fn load_int8(
    file: &ModelFile,
    name: &str,
    shape: [usize; 2],
    int8: bool,
) -> Result<Option<(Vec<i8>, Vec<f32>)>> {
    let t = &file.tensors[find_checked(file, name, &shape)?];
    if t.dtype != DType::I8 {
        return Ok(None);
    }
    let scales = int8_scales(file, name, shape[0], int8)?;
    let q = file.tensor_bytes(t).iter().map(|&b| b as i8).collect();
    Ok(Some((q, scales)))
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
            let mut v = file.tensor_to_f32(t);
            let cols = shape[1];
            if cols > 0 {
                for (row, s) in v.chunks_exact_mut(cols).zip(&scales) {
                    for x in row {
                        *x *= *s;
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

//! cpp_embedder's vector maths on caller-owned vectors (`crate::vector`
//! does the arithmetic).

use super::boundary;

/// # Safety
/// NULL or readable for `dim` floats.
unsafe fn vec_or_none<'a>(p: *const f32, dim: u32) -> Option<&'a [f32]> {
    if p.is_null() || dim == 0 {
        return None;
    }
    // SAFETY: readable for `dim` floats per the contract; dim <= u32::MAX.
    Some(unsafe { std::slice::from_raw_parts(p, dim as usize) })
}

/// `f(a, b)`, or 0 when either is NULL or `dim` is 0.
///
/// # Safety
/// `a`, `b` NULL or readable for `dim` floats.
unsafe fn pair(a: *const f32, b: *const f32, dim: u32, f: fn(&[f32], &[f32]) -> f32) -> f32 {
    boundary(0.0, || {
        // SAFETY: forwarded contract.
        let (a, b) = unsafe { (vec_or_none(a, dim), vec_or_none(b, dim)) };
        Ok(a.zip(b).map_or(0.0, |(a, b)| f(a, b)))
    })
}

/// cpp_embedder: cosine similarity; 0 for NULL, dim 0, or a near-zero norm.
///
/// # Safety
/// `a`, `b` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_cosine_similarity(a: *const f32, b: *const f32, dim: u32) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { pair(a, b, dim, crate::vector::cosine) }
}

/// cpp_embedder: L2-normalizes in place ([`crate::vector::l2_normalize`]:
/// a zero vector stays zero).
///
/// # Safety
/// `embedding` NULL or writable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_normalize(embedding: *mut f32, dim: u32) {
    boundary((), || {
        if embedding.is_null() || dim == 0 {
            return Ok(());
        }
        // SAFETY: writable for `dim` floats per the contract.
        let v = unsafe { std::slice::from_raw_parts_mut(embedding, dim as usize) };
        crate::vector::l2_normalize(v);
        Ok(())
    })
}

/// cpp_embedder: the L2 norm; 0 for NULL or dim 0.
///
/// # Safety
/// `embedding` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_norm(embedding: *const f32, dim: u32) -> f32 {
    boundary(0.0, || {
        // SAFETY: forwarded contract.
        Ok(unsafe { vec_or_none(embedding, dim) }.map_or(0.0, crate::vector::norm))
    })
}

/// cpp_embedder: the dot product; 0 for NULL or dim 0.
///
/// # Safety
/// `a`, `b` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_dot_product(a: *const f32, b: *const f32, dim: u32) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { pair(a, b, dim, crate::vector::dot) }
}

//! The row operations' vector code, written once for every target.
//!
//! `simd_kernels!` holds GELU, tanh GELU, softmax and `exp` over a 16-lane
//! vector `V` and a small set of helpers (`add`, `fma`, `load_part`, ...)
//! that each ISA module defines: one `__m512` in `x86_64::avx512::ops`, a
//! pair of `__m256` in `x86_64::avx2::ops`, four `float32x4_t` in
//! `aarch64::neon::ops`, and sixteen scalars in
//! [`generic::ops`](super::generic::ops). All run the same IEEE operations
//! (the same fused multiply-adds, the x86 `min`/`max` semantics) lane by
//! lane and reduce sums and maxima in the same tree, so they give the same
//! bits. `simd_attention!` is one attention head over the same `V`, and
//! `portable_loops!` compiles the portable row loops with a module's target
//! features. Each macro takes the attributes (the `target_feature`) that
//! every function it defines gets.

/// The vector kernels, expanded inside an ISA module that defines `V`, `M`
/// (a lane mask) and the helpers, each function with the given attributes.
macro_rules! simd_kernels {
    ($(#[$attr:meta])*) => {
        /// Stores lanes `0..k` of `v`, through a stack copy: a masked store
        /// would make later loads that overlap its 64 bytes wait until it
        /// retires (which serialises consecutive short rows).
        ///
        /// # Safety
        /// `k <= 16` and `p..p+k` is writable.
        $(#[$attr])*
        #[inline]
        unsafe fn store_part(p: *mut f32, k: usize, v: V) {
            let mut buf = [0.0f32; 16];
            // SAFETY: `buf` holds 16 floats; `p..p+k` is writable (contract).
            unsafe {
                store(buf.as_mut_ptr(), v);
                std::ptr::copy_nonoverlapping(buf.as_ptr(), p, k);
            }
        }

        /// `exp` of every lane for arguments up to 88.3 (as the scalar
        /// [`ops::exp`](crate::kernels::ops::exp), with FMAs): 0 below `EXP_MIN` (those lanes are
        /// masked, so no clamp is needed), NaN stays NaN.
        $(#[$attr])*
        #[inline]
        fn exp_low(x: V) -> V {
            exp_low_n([x])[0]
        }

        /// [`exp_low`] of `N` vectors, step by step across them (the same
        /// operations per lane, so the same bits; the instruction stream
        /// interleaves `N` independent chains).
        $(#[$attr])*
        #[inline]
        fn exp_low_n<const N: usize>(x: [V; N]) -> [V; N] {
            let under = x.map(|t| lt(t, splat(EXP_MIN)));
            let k = x.map(|t| fma(t, splat(LOG2E), splat(ROUND)));
            let mut r = [splat(0.0); N];
            for i in 0..N {
                let n = sub(k[i], splat(ROUND));
                r[i] = fnma(n, splat(EXP_C2), fnma(n, splat(EXP_C1), x[i]));
            }
            let mut p = [splat(EXP_P[0]); N];
            for &c in &EXP_P[1..] {
                for i in 0..N {
                    p[i] = fma(p[i], r[i], splat(c));
                }
            }
            let mut out = [splat(0.0); N];
            for i in 0..N {
                let y = add(fma(p[i], mul(r[i], r[i]), r[i]), splat(1.0));
                out[i] = select(under[i], splat(0.0), mul(y, pow2_of_rounded(k[i])));
            }
            out
        }

        /// `exp` of every lane: [`exp_low`] of the argument clamped to
        /// `EXP_MAX` (`min` returns its second operand, so NaN stays NaN).
        $(#[$attr])*
        #[inline]
        fn exp(x: V) -> V {
            exp_low(min(splat(EXP_MAX), x))
        }

        /// [`ops::gelu`](crate::kernels::ops::gelu) of every lane, with FMAs
        /// and a division-free reciprocal (see [`gelu_n`]).
        $(#[$attr])*
        #[inline]
        fn gelu(v: V) -> V {
            gelu_n([v])[0]
        }

        /// [`gelu`] of `N` vectors, step by step across them: the same
        /// operations per lane (the same bits), but written so that the
        /// instruction stream interleaves `N` independent chains (GELU is
        /// one ~35-deep chain per vector; alone, its latency bounds it).
        $(#[$attr])*
        #[inline]
        fn gelu_n<const N: usize>(v: [V; N]) -> [V; N] {
            let one = splat(1.0);
            let x = v.map(|v| max(splat(-f32::MAX), v));
            let a = x.map(|v| abs(v));
            let u = a.map(|a| fma(min(splat(GELU_A_MAX), a), splat(ERFC_HALF_Z), one));
            // `1/u` without a division (which costs as much as the rest):
            // three Newton steps `y += y·(1 - u·y)` from `recip_seed`'s 12%
            // square the error to 2e-4, then 4e-8; the last step in FMA form
            // lands within an ulp of `1/u` (u is in [1, 2^100]).
            let mut y = u.map(|v| recip_seed(v));
            for _ in 0..3 {
                for k in 0..N {
                    y[k] = fma(y[k], fnma(u[k], y[k], one), y[k]);
                }
            }
            let h = y.map(|y| mul(splat(0.5), y));
            let mut p = [splat(ERFC_H[0]); N];
            for &c in &ERFC_H[1..] {
                for k in 0..N {
                    p[k] = fma(p[k], h[k], splat(c));
                }
            }
            // The argument of `exp` is at most 0 (`erfc(z) <= t`).
            let mut arg = [splat(0.0); N];
            for k in 0..N {
                arg[k] = fma(mul(splat(-0.5), a[k]), a[k], p[k]);
            }
            let ex = exp_low_n(arg);
            let mut out = [splat(0.0); N];
            for k in 0..N {
                let q = mul(h[k], ex[k]);
                let phi = select(lt(x[k], splat(0.0)), q, sub(one, q));
                out[k] = mul(x[k], phi);
            }
            out
        }

        /// [`ops::gelu_tanh`](crate::kernels::ops::gelu_tanh) of every lane, with FMAs.
        $(#[$attr])*
        #[inline]
        fn gelu_tanh(v: V) -> V {
            let x = max(splat(-f32::MAX), v);
            let w = fma(mul(x, x), splat(TANH_C), splat(1.0));
            let e = exp(mul(mul(x, w), splat(TANH_M2K)));
            div(x, add(splat(1.0), e))
        }

        /// `x = act(x + bias)` over `n = min(x.len(), bias.len())` elements,
        /// 16 at a time. A partial last group is handled by one more full
        /// vector over the last 16 elements, computed before anything is
        /// stored and stored last (its overlap with the body gets the same
        /// bits again); below 16 elements, masked loads and stores. (Masked
        /// stores in a loop stall the loads that follow them.)
        $(#[$attr])*
        #[inline]
        fn bias_act<const TANH: bool>(x: &mut [f32], bias: &[f32]) {
            let n = x.len().min(bias.len());
            let xp = x.as_mut_ptr();
            let bp = bias.as_ptr();
            let act = |v: V| if TANH { gelu_tanh(v) } else { gelu(v) };
            if n < 16 {
                if n > 0 {
                    // SAFETY: elements 0..n < 16 of both slices exist.
                    unsafe {
                        let v = add(load_part(xp, n, 0.0), load_part(bp, n, 0.0));
                        store_part(xp, n, act(v));
                    }
                }
                return;
            }
            let last = n - 16;
            let tail = (n % 16 != 0).then(|| {
                // SAFETY: elements last..n of both slices exist (n >= 16).
                unsafe { act(add(load(xp.add(last)), load(bp.add(last)))) }
            });
            let mut i = 0;
            // ACT_VECTORS vectors at a time, interleaved (see `gelu_n`).
            const W: usize = 16 * ACT_VECTORS;
            while i + W <= n {
                // SAFETY: elements i..i+W <= n of both slices exist.
                unsafe {
                    let mut v = [splat(0.0); ACT_VECTORS];
                    for (u, vu) in v.iter_mut().enumerate() {
                        *vu = add(load(xp.add(i + 16 * u)), load(bp.add(i + 16 * u)));
                    }
                    let y = if TANH {
                        v.map(|v| gelu_tanh(v))
                    } else {
                        gelu_n(v)
                    };
                    for (u, yu) in y.iter().enumerate() {
                        store(xp.add(i + 16 * u), *yu);
                    }
                }
                i += W;
            }
            while i + 16 <= n {
                // SAFETY: elements i..i+16 <= n of both slices exist.
                unsafe {
                    let v = add(load(xp.add(i)), load(bp.add(i)));
                    store(xp.add(i), act(v));
                }
                i += 16;
            }
            if let Some(t) = tail {
                // SAFETY: elements last..n of `x` exist.
                unsafe { store(xp.add(last), t) };
            }
        }

        /// `x = gelu(x + bias)` element-wise.
        $(#[$attr])*
        pub(crate) fn bias_gelu(x: &mut [f32], bias: &[f32]) {
            bias_act::<false>(x, bias)
        }

        /// `x = gelu_tanh(x + bias)` element-wise.
        $(#[$attr])*
        pub(crate) fn bias_gelu_tanh(x: &mut [f32], bias: &[f32]) {
            bias_act::<true>(x, bias)
        }

        /// Softmax of one row in place: max, then `exp(x - max)` stored and
        /// summed in 16 lanes (reduced in a fixed tree), then scaled by the
        /// reciprocal of the sum. Rows of 16 or more: elements `i < 16·⌊n/16⌋`
        /// go to lane `i mod 16`, the rest to the lanes of one more vector
        /// over the last 16 elements (kept in registers, its lanes that
        /// repeat body elements left out of the sum). Shorter rows: one
        /// masked vector.
        $(#[$attr])*
        pub(crate) fn softmax(x: &mut [f32]) {
            let n = x.len();
            let p = x.as_mut_ptr();
            if n < 16 {
                if n > 0 {
                    // SAFETY: elements 0..n < 16 exist. The fill lanes give
                    // exp(-inf) = 0 and leave the sum unchanged.
                    unsafe {
                        let v = load_part(p, n, f32::NEG_INFINITY);
                        let e = exp_low(sub(v, splat(hmax(v))));
                        store_part(p, n, mul(e, splat(1.0 / hsum(e))));
                    }
                }
                return;
            }
            let tail = n % 16;
            let body = n - tail;
            // SAFETY: elements n-16..n exist (n >= 16).
            let last = unsafe { load(p.add(n - 16)) };
            let mut m = last;
            for i in (0..body).step_by(16) {
                // SAFETY: elements i..i+16 <= n exist.
                m = max(m, unsafe { load(p.add(i)) });
            }
            let m = splat(hmax(m));
            let mut s = splat(0.0);
            for i in (0..body).step_by(16) {
                // SAFETY: elements i..i+16 <= n exist.
                unsafe {
                    let e = exp_low(sub(load(p.add(i)), m));
                    store(p.add(i), e);
                    s = add(s, e);
                }
            }
            let e_last = exp_low(sub(last, m));
            if tail > 0 {
                s = add(s, select(last_lanes(tail), e_last, splat(0.0)));
            }
            let inv = splat(1.0 / hsum(s));
            for i in (0..body).step_by(16) {
                // SAFETY: elements i..i+16 <= n exist.
                unsafe { store(p.add(i), mul(load(p.add(i)), inv)) };
            }
            if tail > 0 {
                // SAFETY: elements n-16..n exist.
                unsafe { store(p.add(n - 16), mul(e_last, inv)) };
            }
        }

        /// `x = exp(x)` element-wise (tests).
        #[cfg(test)]
        $(#[$attr])*
        pub(crate) fn exp_slice(x: &mut [f32]) {
            for c in x.chunks_mut(16) {
                // SAFETY: the chunk has c.len() <= 16 elements.
                unsafe {
                    if c.len() == 16 {
                        store(c.as_mut_ptr(), exp(load(c.as_ptr())));
                    } else {
                        let v = exp(load_part(c.as_ptr(), c.len(), 0.0));
                        store_part(c.as_mut_ptr(), c.len(), v);
                    }
                }
            }
        }
    };
}

/// One attention head ([`kernels::attention`](crate::kernels::attention)) over
/// the 16-lane `V` of an ISA module: blocks of `$rows` rows by two vectors,
/// each lane one FMA chain in the scalar definition's order.
macro_rules! simd_attention {
    ($rows:literal $(, #[$attr:meta])*) => {
        /// `acc[r][v] = Σ_c a(r, c) · b(c)[16v..16v+16]` over `c < n` in order
        /// from 0, for `R` rows and `NV` vectors: `a(r, c)` is `*ap[r].add(c *
        /// sa)`, `b(c)` starts at `bp.add(c * sb)`.
        ///
        /// # Safety
        /// Every `a(r, c)` and `b(c)[..16 * NV]` read is in bounds.
        $(#[$attr])*
        #[inline]
        unsafe fn chains<const R: usize, const NV: usize>(
            ap: [*const f32; R],
            sa: usize,
            bp: *const f32,
            sb: usize,
            n: usize,
        ) -> [[V; NV]; R] {
            let mut acc = [[splat(0.0); NV]; R];
            for c in 0..n {
                // SAFETY: in bounds by the contract.
                unsafe {
                    let mut b = [splat(0.0); NV];
                    for (v, bv) in b.iter_mut().enumerate() {
                        *bv = load(bp.add(c * sb + 16 * v));
                    }
                    for r in 0..R {
                        let a = splat(*ap[r].add(c * sa));
                        for v in 0..NV {
                            acc[r][v] = fma(a, b[v], acc[r][v]);
                        }
                    }
                }
            }
            acc
        }

        /// One block of the head: rows `i0..i0 + rows` (`rows <= R`; the
        /// missing rows repeat the last one and are not stored) by `NV`
        /// vectors at lane offset `j0`, for the scores (`PV = false`: `a` =
        /// queries, `b` = `Kᵀ`, columns `j0..` of the block's score rows) or
        /// the context (`PV = true`: `a` = the scores of keys `ka..ka + kn`,
        /// `b` = those keys' values, lanes = values `j0..`). Score row `r`
        /// of the block is `sc[r·lp..]`, indexed by key.
        ///
        /// # Safety
        /// As [`attend`]'s: the sizes `attention::attend` checks.
        $(#[$attr])*
        #[inline]
        #[allow(clippy::too_many_arguments)]
        unsafe fn head_block<const PV: bool, const NV: usize>(
            x: &crate::kernels::attention::HeadInput<'_>,
            i0: usize,
            rows: usize,
            j0: usize,
            (ka, kn): (usize, usize),
            scale: f32,
            kt: *const f32,
            sc: *mut f32,
            dst: *mut f32,
            ldd: usize,
        ) {
            const R: usize = $rows;
            let lp = x.len.next_multiple_of(16);
            let base = x.qkv.as_ptr();
            let mut ap = [std::ptr::null::<f32>(); R];
            for (r, a) in ap.iter_mut().enumerate() {
                let r = r.min(rows - 1);
                // SAFETY: row i0 + r < len of the queries, row r < R of the
                // block's scores.
                *a = unsafe {
                    if PV {
                        sc.add(r * lp + ka)
                    } else {
                        base.add((i0 + r) * x.ld + x.q)
                    }
                };
            }
            // SAFETY: the reads stay in the rows checked by the caller: the
            // scores of keys ka..ka+kn <= len of a row (the context), all `d`
            // values of a query and the padded `Kᵀ` rows (the scores), `V`
            // values j0..j0+16·NV <= d of each key row.
            unsafe {
                let acc = if PV {
                    chains::<R, NV>(ap, 1, base.add(ka * x.ld + x.v + j0), x.ld, kn)
                } else {
                    chains::<R, NV>(ap, 1, kt.add(j0), lp, x.d)
                };
                for (r, row) in acc.iter().enumerate().take(rows) {
                    for (v, &a) in row.iter().enumerate() {
                        if PV {
                            store(dst.add((i0 + r) * ldd + j0 + 16 * v), a);
                        } else {
                            store(sc.add(r * lp + j0 + 16 * v), mul(a, splat(scale)));
                        }
                    }
                }
            }
        }

        /// [`attention::attend`](crate::kernels::attention::attend) with this
        /// ISA: the same FMA chains as `attend_scalar`, 16 lanes at a time,
        /// each row over its span ([`HeadInput::span`]).
        ///
        /// [`HeadInput::span`]: crate::kernels::attention::HeadInput
        ///
        /// # Safety
        /// The CPU has this module's features; `x.d % 16 == 0` and the sizes
        /// `attention::attend` checks hold.
        $(#[$attr])*
        pub(crate) unsafe fn attend(
            x: crate::kernels::attention::HeadInput<'_>,
            scale: f32,
            scratch: &mut [f32],
            dst: &mut [f32],
            ldd: usize,
        ) {
            const R: usize = $rows;
            const _: () = assert!(R <= crate::kernels::attention::MAX_BLOCK_ROWS);
            let (len, d) = (x.len, x.d);
            let lp = len.next_multiple_of(16);
            let (kt, sc) = scratch.split_at_mut(d * lp);
            crate::kernels::attention::transpose_keys(&x, kt);
            let (ktp, dp) = (kt.as_ptr(), dst.as_mut_ptr());
            for i0 in (0..len).step_by(R) {
                let rows = R.min(len - i0);
                // The block's keys: from its first row's span start to its
                // last row's span end (spans are monotonic).
                let ka = x.span(i0).0;
                let kb = x.span(i0 + rows - 1).1;
                let scp = sc.as_mut_ptr();
                let end = kb.next_multiple_of(16);
                let mut j0 = ka;
                // SAFETY: j0 + 32 <= end <= lp (or j0 + 16) columns of the
                // padded rows; sizes as checked by the caller.
                unsafe {
                    while j0 + 32 <= end {
                        head_block::<false, 2>(&x, i0, rows, j0, (0, 0), scale, ktp, scp, dp, ldd);
                        j0 += 32;
                    }
                    if j0 < end {
                        head_block::<false, 1>(&x, i0, rows, j0, (0, 0), scale, ktp, scp, dp, ldd);
                    }
                }
                for r in 0..rows {
                    let i = i0 + r;
                    let (a, b) = x.span(i);
                    let row = &mut sc[r * lp..(r + 1) * lp];
                    let span = &mut row[a..b];
                    x.add_bias(i, a, span, |r, b| add_assign(r, b));
                    softmax(span);
                    // Keys of the block outside this row's span add 0.
                    row[ka..a].fill(0.0);
                    row[b..kb].fill(0.0);
                }
                let scp = sc.as_mut_ptr();
                let keys = (ka, kb - ka);
                let mut e0 = 0;
                // SAFETY: e0 + 32 <= d (or e0 + 16 = d) values per row.
                unsafe {
                    while e0 + 32 <= d {
                        head_block::<true, 2>(&x, i0, rows, e0, keys, scale, ktp, scp, dp, ldd);
                        e0 += 32;
                    }
                    if e0 < d {
                        head_block::<true, 1>(&x, i0, rows, e0, keys, scale, ktp, scp, dp, ldd);
                    }
                }
            }
        }
    };
}

/// The portable row loops of [`generic::ops`](crate::kernels::arch::generic::ops)
/// (add, scale, LayerNorm) compiled again with an ISA module's target
/// features: LLVM vectorises them wider, and since Rust never contracts
/// `a * b + c` into an FMA, they give the same bits as the portable build.
macro_rules! portable_loops {
    ($(#[$attr:meta])*) => {
        /// [`generic::ops::add_assign`](crate::kernels::arch::generic::ops::add_assign)
        /// compiled for this ISA.
        $(#[$attr])*
        pub(crate) fn add_assign(dst: &mut [f32], src: &[f32]) {
            crate::kernels::arch::generic::ops::add_assign(dst, src)
        }

        /// [`generic::ops::scale`](crate::kernels::arch::generic::ops::scale)
        /// compiled for this ISA.
        $(#[$attr])*
        pub(crate) fn scale(x: &mut [f32], s: f32) {
            crate::kernels::arch::generic::ops::scale(x, s)
        }

        /// [`generic::ops::layer_norm`](crate::kernels::arch::generic::ops::layer_norm)
        /// compiled for this ISA.
        $(#[$attr])*
        pub(crate) fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
            crate::kernels::arch::generic::ops::layer_norm(x, gamma, beta, eps)
        }

        /// [`generic::ops::bias_layer_norm`](crate::kernels::arch::generic::ops::bias_layer_norm)
        /// compiled for this ISA.
        $(#[$attr])*
        pub(crate) fn bias_layer_norm(
            x: &mut [f32],
            bias: &[f32],
            gamma: &[f32],
            beta: &[f32],
            eps: f32,
        ) {
            crate::kernels::arch::generic::ops::bias_layer_norm(x, bias, gamma, beta, eps)
        }
    };
}

//! The AVX2 int8 tile's bound, measured: GMAC/s of register tiles
//! with A and B in L1, so that only the instruction mix counts.
//!
//! - `exact`: our 4 x 16 tile (`src/kernels/arch/x86_64/avx2/qgemm.rs`):
//!   `vpsignb` + `vpmaddubsw` + `vpmaddwd` + `vpaddd` per 32 products, exact.
//! - `saturating`: the same tile without the sign step, u8 x s8 straight into
//!   `vpmaddubsw` (CTranslate2's / ONNX Runtime's form): its i16 pair sums
//!   saturate, so it is the bound of any tile that needs no sign step.
//! - `i16`: a 6 x 8 tile of `vpmaddwd` on i16 activations x i16 weights
//!   (exact, one multiply per 16 products), B widened with `vpmovsxbw` on
//!   the fly or stored widened.
//! - `f32`: the 6 x 16 FMA tile of the f32 GEMM, for scale.
//!
//! Build and run (any x86-64 CPU with AVX2 + FMA; nothing else from the
//! project): `rustc --edition 2021 -O bench/tiles/avx2_tiles.rs -o /tmp/avx2_tiles && /tmp/avx2_tiles`
//! Run it on a quiet machine: it reports the best of 7 rounds per tile.

use std::arch::x86_64::*;
use std::time::Instant;

/// k / 4: groups of 4 bytes along k (k = 384, MiniLM's hidden size).
const KQ: usize = 96;

/// Our tile (`SIGN = true`: `|w|` times `a · sign(w)`, exact) or the same
/// tile without the sign step (`SIGN = false`: `a` as u8 times `w`, whose
/// i16 pair sums saturate).
///
/// # Safety
/// AVX2 is available; `a` holds 4 rows of `lda` >= 4·KQ bytes, `b` 64·KQ bytes.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_4x16<const SIGN: bool>(
    a: *const i8,
    lda: usize,
    b: *const i8,
    out: &mut [__m256i; 8],
) {
    // SAFETY: the reads stay inside A's 4 rows and B's 64·KQ bytes (contract).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_si256(); 2]; 4];
        let mut bp = b;
        for q in 0..KQ {
            let b0 = _mm256_loadu_si256(bp.cast());
            let b1 = _mm256_loadu_si256(bp.add(32).cast());
            let (u0, u1) = if SIGN {
                (_mm256_abs_epi8(b0), _mm256_abs_epi8(b1))
            } else {
                (b0, b1)
            };
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_set1_epi32(a.add(i * lda + 4 * q).cast::<i32>().read_unaligned());
                let (p0, p1) = if SIGN {
                    (
                        _mm256_maddubs_epi16(u0, _mm256_sign_epi8(ai, b0)),
                        _mm256_maddubs_epi16(u1, _mm256_sign_epi8(ai, b1)),
                    )
                } else {
                    (_mm256_maddubs_epi16(ai, u0), _mm256_maddubs_epi16(ai, u1))
                };
                row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(p0, ones));
                row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(p1, ones));
            }
            bp = bp.add(64);
        }
        for (i, row) in acc.iter().enumerate() {
            out[2 * i] = _mm256_add_epi32(out[2 * i], row[0]);
            out[2 * i + 1] = _mm256_add_epi32(out[2 * i + 1], row[1]);
        }
    }
}

/// `vpmaddwd` on i16 x i16, 6 rows x 8 columns; B is i8 widened on the fly
/// (`WIDE = false`, 32 bytes a group) or stored as i16 (`WIDE = true`).
///
/// # Safety
/// AVX2 is available; `a` holds 6 rows of `lda` >= 4·KQ i16; `b` 32·KQ
/// elements of its type.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_i16<const WIDE: bool>(
    a: *const i16,
    lda: usize,
    b: *const u8,
    out: &mut [__m256i; 12],
) {
    // SAFETY: the reads stay inside A's 6 rows and B (contract).
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); 2]; 6];
        let mut bp = b;
        for q in 0..KQ {
            let (b0, b1) = if WIDE {
                (
                    _mm256_loadu_si256(bp.cast()),
                    _mm256_loadu_si256(bp.add(32).cast()),
                )
            } else {
                (
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.cast())),
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(16).cast())),
                )
            };
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_set1_epi64x(a.add(i * lda + 4 * q).cast::<i64>().read_unaligned());
                row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(ai, b0));
                row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(ai, b1));
            }
            bp = bp.add(if WIDE { 64 } else { 32 });
        }
        for (i, row) in acc.iter().enumerate() {
            out[2 * i] = _mm256_add_epi32(out[2 * i], row[0]);
            out[2 * i + 1] = _mm256_add_epi32(out[2 * i + 1], row[1]);
        }
    }
}

/// # Safety
/// AVX2 + FMA are available; `a` holds 6 rows of `lda` >= 4·KQ floats, `b`
/// 64·KQ floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_f32(a: *const f32, lda: usize, b: *const f32, out: &mut [__m256; 12]) {
    // SAFETY: the reads stay inside A's 6 rows and B (contract).
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; 6];
        let mut bp = b;
        for p in 0..KQ * 4 {
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_set1_ps(*a.add(i * lda + p));
                row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
            }
            bp = bp.add(16);
        }
        for (i, row) in acc.iter().enumerate() {
            out[2 * i] = _mm256_add_ps(out[2 * i], row[0]);
            out[2 * i + 1] = _mm256_add_ps(out[2 * i + 1], row[1]);
        }
    }
}

/// Best GMAC/s of `rounds` timings of `calls` calls of `f`, `macs` each.
fn best(rounds: usize, calls: usize, macs: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            (calls * macs) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

fn main() {
    assert!(
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
        "needs AVX2 and FMA"
    );
    let k = KQ * 4;
    let a8 = vec![3i8; 6 * k + 64];
    let a16 = vec![3i16; 6 * k + 64];
    let af = vec![0.5f32; 6 * k + 64];
    let b8 = vec![5u8; 64 * KQ + 64];
    let b16 = vec![5u8; 128 * KQ + 64];
    let bf = vec![0.25f32; 64 * KQ + 64];
    let calls = 200_000;
    // SAFETY: AVX was checked above (AVX2 implies it).
    let (mut o8, mut o12, mut of) = unsafe {
        (
            [_mm256_setzero_si256(); 8],
            [_mm256_setzero_si256(); 12],
            [_mm256_setzero_ps(); 12],
        )
    };
    let (bp, b16p) = (b8.as_ptr(), b16.as_ptr());
    // SAFETY (every call below): AVX2 and FMA were checked above; the buffers
    // hold the rows and panels each tile reads.
    let rows = [
        (
            "exact 4x16 (ours: vpsignb + vpmaddubsw + vpmaddwd)",
            best(7, calls, 64 * k, || unsafe {
                tile_4x16::<true>(a8.as_ptr(), k, bp.cast(), &mut o8)
            }),
        ),
        (
            "saturating 4x16 (vpmaddubsw + vpmaddwd, inexact)",
            best(7, calls, 64 * k, || unsafe {
                tile_4x16::<false>(a8.as_ptr(), k, bp.cast(), &mut o8)
            }),
        ),
        (
            "i16 6x8, B widened on the fly (vpmovsxbw + vpmaddwd)",
            best(7, calls, 48 * k, || unsafe {
                tile_i16::<false>(a16.as_ptr(), k, bp, &mut o12)
            }),
        ),
        (
            "i16 6x8, B stored as i16 (2x the weight bytes)",
            best(7, calls, 48 * k, || unsafe {
                tile_i16::<true>(a16.as_ptr(), k, b16p, &mut o12)
            }),
        ),
        (
            "f32 6x16 FMA",
            best(7, calls / 2, 96 * k, || unsafe {
                tile_f32(af.as_ptr(), k, bf.as_ptr(), &mut of)
            }),
        ),
    ];
    std::hint::black_box((&o8, &o12, &of));
    let exact = rows[0].1;
    for (name, g) in rows {
        println!("{name:<56} {g:7.1} GMAC/s  {:.2}x exact", g / exact);
    }
}

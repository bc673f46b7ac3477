//! Numeric kernels: GEMM, element-wise and row operations, and their scalar
//! reference versions. Nothing here knows about BERT.
//!
//! Every optimised kernel has a plain oracle in [`reference`](mod@reference) and unit tests that
//! compare the two on awkward shapes.

pub mod bgemm;
pub mod gemm;
pub mod isa;
pub mod ops;
pub mod packbuf;
pub mod qgemm;
pub mod reference;
pub mod sgemm;

/// How a kernel may use threads.
///
/// `Threads(n)` splits the work of one call into about `n` parallel tasks on the
/// current rayon pool (call it inside `ThreadPool::install`). Results never
/// depend on the choice: every output element is computed with the same
/// arithmetic in the same order either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Par {
    /// Run on the calling thread.
    Serial,
    /// Split the work into about this many rayon tasks.
    Threads(usize),
}

impl Par {
    /// Number of tasks to split into (1 for serial).
    pub fn tasks(self) -> usize {
        match self {
            Par::Serial => 1,
            Par::Threads(n) => n.max(1),
        }
    }
}

/// CPU time of the calling thread in seconds, for the kernels' speed tests.
#[cfg(test)]
pub(crate) fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

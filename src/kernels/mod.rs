//! Numeric kernels: GEMM, element-wise and row operations, and their scalar
//! reference versions. Nothing here knows about BERT.
//!
//! Every optimised kernel has a plain oracle in [`reference`](mod@reference) and unit tests that
//! compare the two on awkward shapes.

pub mod gemm;
pub mod ops;
pub mod packbuf;
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

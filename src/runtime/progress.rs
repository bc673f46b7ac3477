//! Progress reporting and cancellation of one call.

use crate::error::{Error, ErrorKind, Result};
use crate::options::ProgressFn;

/// Progress reporting of one call to [`crate::Options::progress`].
pub(crate) struct Track<'a> {
    /// The callback; `None`: nothing to report.
    pub(crate) cb: Option<&'a ProgressFn>,
    /// Index in the call of the first input of the sequences being run.
    pub(crate) base: usize,
    /// Inputs in the call.
    total: usize,
    /// Inputs of the call complete at the last report.
    pub(crate) done: usize,
}

impl<'a> Track<'a> {
    pub(crate) fn new(cb: Option<&'a ProgressFn>, total: usize) -> Self {
        Track {
            cb,
            base: 0,
            total,
            done: 0,
        }
    }

    /// Inputs `0..done` are complete: tells the callback; its `Break` becomes
    /// [`ErrorKind::Cancelled`].
    pub(crate) fn report(&mut self, done: usize) -> Result<()> {
        self.done = done;
        match self.cb {
            Some(cb) if cb.call(done, self.total).is_break() => Err(Error::new(
                ErrorKind::Cancelled,
                format!(
                    "cancelled by the progress callback after {done} of {} texts",
                    self.total
                ),
            )),
            _ => Ok(()),
        }
    }
}

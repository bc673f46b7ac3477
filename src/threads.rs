//! Background threads owned by a value: joined when the value is dropped.

use std::sync::Mutex;
use std::thread::JoinHandle;

/// A slot for one background thread, joined when the slot is dropped, so that
/// no thread outlives its owner (and the code it runs, e.g. across `dlclose`).
#[derive(Default)]
pub(crate) struct JoinOnDrop(Mutex<Option<JoinHandle<()>>>);

impl JoinOnDrop {
    /// Starts `f` on a thread named `name`, unless the thread started here
    /// before is still running. Best effort: when no thread can be started,
    /// `f` does not run.
    pub(crate) fn spawn_if_idle(&self, name: &str, f: impl FnOnce() + Send + 'static) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        *slot = std::thread::Builder::new().name(name.into()).spawn(f).ok();
    }
}

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        let handle = self.0.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            // A panic in the thread has no result to pass on.
            let _ = handle.join();
        }
    }
}

//! A progress line on stderr, shown only when stderr is a terminal and the work
//! takes more than a moment.

use std::io::Write;
use std::time::{Duration, Instant};

/// Redraws at most every 100 ms, and only after the first 300 ms.
pub struct Progress {
    label: &'static str,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
    drawn: bool,
}

fn stderr_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor number; no memory is passed.
    unsafe { libc::isatty(libc::STDERR_FILENO) == 1 }
}

impl Progress {
    pub fn new(label: &'static str) -> Self {
        Progress {
            label,
            start: Instant::now(),
            last: None,
            enabled: stderr_is_tty(),
            drawn: false,
        }
    }

    pub fn update(&mut self, done: u64, total: u64) {
        if !self.enabled || total == 0 {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.start) < Duration::from_millis(300) {
            return;
        }
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < Duration::from_millis(100))
            && done < total
        {
            return;
        }
        self.last = Some(now);
        let pct = done.saturating_mul(100) / total;
        let width = 30u64;
        let filled = (pct * width / 100) as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(width as usize - filled);
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r{} [{bar}] {pct:>3}% ({done}/{total})", self.label);
        let _ = e.flush();
        self.drawn = true;
    }

    pub fn finish(&mut self) {
        if self.drawn {
            let mut e = std::io::stderr().lock();
            let _ = writeln!(e);
        }
    }
}

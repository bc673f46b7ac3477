//! Counters and histograms for `GET /metrics`, in Prometheus' text format
//! (version 0.0.4). Written by hand: a few atomics, no registry.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::ErrorType;

/// A cumulative histogram over fixed upper bounds.
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative), plus one for +Inf.
    counts: Vec<AtomicU64>,
    /// Sum in millionths of the unit.
    sum_micro: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micro: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn observe(&self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| v <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micro
            .fetch_add((v.max(0.0) * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cum = 0u64;
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, c) in self.counts.iter().enumerate() {
            cum += c.load(Ordering::Relaxed);
            let le = match self.bounds.get(i) {
                Some(b) => format!("{b}"),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cum}");
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cum}");
    }
}

const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const SIZES: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];
const TOKENS: &[f64] = &[
    16.0, 64.0, 256.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0,
];

/// Everything `/metrics` reports.
pub struct Metrics {
    /// (route, status) -> count.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// (route) -> latency.
    latency: Mutex<BTreeMap<String, Histogram>>,
    errors: Vec<AtomicU64>,
    tokens: AtomicU64,
    inputs: AtomicU64,
    batch_sizes: Histogram,
    batch_tokens: Histogram,
    inference: Histogram,
    queue: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::default(),
            latency: Mutex::default(),
            errors: ErrorType::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            tokens: AtomicU64::new(0),
            inputs: AtomicU64::new(0),
            batch_sizes: Histogram::new(SIZES),
            batch_tokens: Histogram::new(TOKENS),
            inference: Histogram::new(SECONDS),
            queue: Histogram::new(SECONDS),
        }
    }
}

impl Metrics {
    /// One answered request.
    pub fn observe_request(&self, route: &str, status: u16, took: Duration) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((route.to_string(), status))
            .or_default() += 1;
        self.latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(route.to_string())
            .or_insert_with(|| Histogram::new(SECONDS))
            .observe(took.as_secs_f64());
    }

    /// One error answer.
    pub fn observe_error(&self, kind: ErrorType) {
        if let Some(i) = ErrorType::ALL.iter().position(|&k| k == kind) {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Inputs and tokens accepted for embedding.
    pub fn observe_inputs(&self, inputs: usize, tokens: usize) {
        self.inputs.fetch_add(inputs as u64, Ordering::Relaxed);
        self.tokens.fetch_add(tokens as u64, Ordering::Relaxed);
    }

    /// One engine call of `seqs` sequences, `tokens` tokens.
    pub fn observe_batch(&self, seqs: usize, tokens: usize, took: Duration) {
        self.batch_sizes.observe(seqs as f64);
        self.batch_tokens.observe(tokens as f64);
        self.inference.observe(took.as_secs_f64());
    }

    /// A request's time in the queue.
    pub fn observe_queue(&self, took: Duration) {
        self.queue.observe(took.as_secs_f64());
    }

    /// The Prometheus text, with the current queue depth and requests in flight.
    pub fn render(&self, queue_depth: usize, in_flight: usize) -> String {
        let mut o = String::new();
        o.push_str("# HELP embd_requests_total HTTP requests answered, by route and status.\n");
        o.push_str("# TYPE embd_requests_total counter\n");
        for ((route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                o,
                "embd_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        o.push_str("# HELP embd_errors_total Error answers, by TEI error type.\n");
        o.push_str("# TYPE embd_errors_total counter\n");
        for (k, n) in ErrorType::ALL.iter().zip(&self.errors) {
            let _ = writeln!(
                o,
                "embd_errors_total{{type=\"{}\"}} {}",
                k.name(),
                n.load(Ordering::Relaxed)
            );
        }
        o.push_str("# HELP embd_request_duration_seconds Time from request to answer, by route.\n");
        o.push_str("# TYPE embd_request_duration_seconds histogram\n");
        for (route, h) in self
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            h.render(
                &mut o,
                "embd_request_duration_seconds",
                &format!("route=\"{route}\""),
            );
        }
        let gauges = [
            (
                "embd_queue_depth",
                "Requests waiting for the engine.",
                queue_depth,
            ),
            (
                "embd_requests_in_flight",
                "Inference requests being served.",
                in_flight,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [
            ("embd_inputs_total", "Inputs embedded.", &self.inputs),
            (
                "embd_tokens_total",
                "Tokens embedded ([CLS] and [SEP] included).",
                &self.tokens,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                o,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        let hists = [
            (
                "embd_batch_size",
                "Sequences per engine call.",
                &self.batch_sizes,
            ),
            (
                "embd_batch_tokens",
                "Tokens per engine call.",
                &self.batch_tokens,
            ),
            (
                "embd_inference_duration_seconds",
                "Time of one engine call.",
                &self.inference,
            ),
            (
                "embd_queue_duration_seconds",
                "Time a request waits for the engine.",
                &self.queue,
            ),
        ];
        for (name, help, h) in hists {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} histogram");
            h.render(&mut o, name, "");
        }
        o
    }
}

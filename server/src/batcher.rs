//! Batching across requests: requests arrive tokenized, wait in one queue per
//! model, and a dedicated engine thread packs them into calls of at most
//! `max_batch_tokens` tokens. The engine is batch-invariant, so each request
//! gets the vectors it would get alone.
//!
//! The thread runs what is queued as soon as the engine is free (no wait when
//! idle: a lone request pays nothing); while a call runs, new arrivals queue up
//! and form the next call. `max_wait` optionally holds a call back that long
//! for more requests while it is below the budget.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use embedder::{CallPlan, Embedder};
use tokio::sync::oneshot;

use crate::metrics::Metrics;

/// What one engine call returns to one request.
pub struct Done {
    /// `plan.rows(seqs) x plan.dim()` floats (a vector per sequence, or per
    /// token under a token plan), or the engine's error.
    pub vectors: Result<Vec<f32>, embedder::Error>,
    /// Time spent queued.
    pub queue_time: Duration,
    /// Time of the engine call the request was part of.
    pub inference_time: Duration,
}

/// One request's sequences, tokenized, with where to send the result.
pub struct Job {
    /// `[CLS] ... [SEP]` sequences.
    pub seqs: Vec<Vec<u32>>,
    /// Pooling and output shape; jobs run together only with the same pass.
    pub plan: CallPlan,
    /// Where the vectors go; a closed channel (the client left) skips the job.
    pub reply: oneshot::Sender<Done>,
    enqueued: Instant,
}

impl Job {
    /// A job made now.
    pub fn new(seqs: Vec<Vec<u32>>, plan: CallPlan, reply: oneshot::Sender<Done>) -> Self {
        Job {
            seqs,
            plan,
            reply,
            enqueued: Instant::now(),
        }
    }

    fn tokens(&self) -> usize {
        self.seqs.iter().map(Vec::len).sum()
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

/// The queue and engine thread of one model.
pub struct Batcher {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Batcher {
    /// Starts the engine thread of `model`.
    pub fn start(
        model: Arc<Embedder>,
        max_batch_tokens: usize,
        max_wait: Duration,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Batcher> {
        let shared: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("embd-serve-batcher".into())
            .spawn(move || run(&model, &s, max_batch_tokens, max_wait, &metrics))?;
        Ok(Batcher {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues a job. Returns it back when the batcher is closed.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        let (lock, cv) = &*self.shared;
        let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
        if q.closed {
            return Err(job);
        }
        q.jobs.push_back(job);
        cv.notify_one();
        Ok(())
    }

    /// Jobs waiting.
    pub fn depth(&self) -> usize {
        let (lock, _) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).jobs.len()
    }
}

impl Drop for Batcher {
    /// Runs what is queued, then stops the thread.
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Takes the next call's jobs: the first queued job, then every later job
/// with the same pass while the tokens stay within `budget` (a job larger
/// than the budget runs alone). Jobs whose client has left are dropped.
fn take_batch(q: &mut Queue, budget: usize) -> Vec<Job> {
    q.jobs.retain(|j| !j.reply.is_closed());
    let Some(first) = q.jobs.pop_front() else {
        return Vec::new();
    };
    let mut tokens = first.tokens();
    let mut seqs = first.seqs.len();
    let mut batch = vec![first];
    let mut i = 0;
    while i < q.jobs.len() {
        let t = q.jobs[i].tokens();
        if tokens + t > budget {
            break;
        }
        let n = q.jobs[i].seqs.len();
        if q.jobs[i].plan.same_pass(&batch[0].plan) && seqs + n <= embedder::MAX_BATCH {
            tokens += t;
            seqs += n;
            if let Some(j) = q.jobs.remove(i) {
                batch.push(j);
            }
        } else {
            i += 1;
        }
    }
    batch
}

fn run(
    model: &Embedder,
    shared: &(Mutex<Queue>, Condvar),
    budget: usize,
    max_wait: Duration,
    metrics: &Metrics,
) {
    let (lock, cv) = shared;
    loop {
        let batch = {
            let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
            while q.jobs.is_empty() && !q.closed {
                q = cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if q.jobs.is_empty() {
                return;
            }
            if !max_wait.is_zero() && !q.closed {
                // Hold the call back for more requests, up to max_wait after
                // the oldest one arrived, while below the budget.
                let until = q.jobs[0].enqueued + max_wait;
                loop {
                    let queued: usize = q.jobs.iter().map(Job::tokens).sum();
                    let now = Instant::now();
                    if queued >= budget || now >= until || q.closed {
                        break;
                    }
                    q = cv
                        .wait_timeout(q, until - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            take_batch(&mut q, budget)
        };
        if batch.is_empty() {
            continue;
        }
        run_batch(model, batch, metrics);
    }
}

fn run_batch(model: &Embedder, batch: Vec<Job>, metrics: &Metrics) {
    let plan = batch[0].plan.clone();
    let dim = plan.dim();
    let refs: Vec<&[u32]> = batch
        .iter()
        .flat_map(|j| j.seqs.iter().map(Vec::as_slice))
        .collect();
    let tokens: usize = refs.iter().map(|s| s.len()).sum();
    let start = Instant::now();
    let mut out = vec![0.0f32; plan.rows(&refs) * dim];
    // The engine catches nothing itself: a panic here must not take the
    // thread (and every later request) down.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.embed_planned(&refs, &plan, &mut out)
    }))
    .unwrap_or_else(|_| {
        Err(embedder::Error::new(
            embedder::ErrorKind::Internal,
            "the engine panicked on this batch",
        ))
    });
    let inference_time = start.elapsed();
    metrics.observe_batch(refs.len(), tokens, inference_time);
    let mut at = 0;
    for job in batch {
        let rows: Vec<&[u32]> = job.seqs.iter().map(Vec::as_slice).collect();
        let n = plan.rows(&rows) * dim;
        let vectors = match &r {
            Ok(()) => Ok(out[at..at + n].to_vec()),
            Err(e) => Err(e.clone()),
        };
        at += n;
        let _ = job.reply.send(Done {
            vectors,
            queue_time: start.saturating_duration_since(job.enqueued),
            inference_time,
        });
    }
}

//! Batching across requests: requests arrive tokenized, wait in one queue per
//! model, and a dedicated engine thread packs them into calls of at most
//! `max_batch_tokens` tokens. The engine is batch-invariant, so each request
//! gets the vectors it would get alone.
//!
//! The thread runs what is queued as soon as the engine is free (no wait when
//! idle: a lone request pays nothing); while a call runs, new arrivals queue up
//! and form the next call. `max_wait` optionally holds a call back that long
//! for more requests while it is below the budget.
//!
//! The same thread runs the output-stage requests ([`EncodeJob`]: sparse
//! vectors, multi-vectors, BGE-M3's outputs at once through
//! [`Embedder::encode`]), in arrival order with the pooled ones: one engine
//! call at a time per model, each on the engine's own workers, so that no
//! route runs a second pool beside the batcher's and oversubscribes the
//! cores. Encode jobs with the same [`EncodeRequest`] share a call
//! (`encode` is batch-invariant too); they never share one with pooled jobs.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use embedder::{CallPlan, Embedder, EncodeRequest, Encoded};
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

/// What one [`Embedder::encode`] call returns to one request.
pub struct EncodeDone {
    /// The request's outputs, or the engine's error.
    pub encoded: Result<Encoded, embedder::Error>,
    /// Time spent queued.
    pub queue_time: Duration,
    /// Time of the engine call the request was part of (tokenization
    /// included: `encode` tokenizes).
    pub inference_time: Duration,
}

/// One request for the output stage: texts (`encode` tokenizes them itself,
/// on the engine's workers) and what to compute.
pub struct EncodeJob {
    /// The texts, or token ids framed with the model's special tokens.
    pub inputs: EncodeInputs,
    /// Outputs, task and options; jobs run together only with equal ones.
    pub req: EncodeRequest,
    /// Where the outputs go; a closed channel (the client left) skips the job.
    pub reply: oneshot::Sender<EncodeDone>,
    /// Tokens the texts come to at most, estimated before tokenization (for
    /// the token budget only).
    estimate: usize,
    enqueued: Instant,
}

/// The inputs of an [`EncodeJob`].
pub enum EncodeInputs {
    /// Texts ([`Embedder::encode`]).
    Texts(Vec<String>),
    /// Token ids framed with the model's special tokens
    /// ([`Embedder::encode_ids`]).
    Ids(Vec<Vec<u32>>),
}

impl EncodeInputs {
    /// Inputs.
    pub fn len(&self) -> usize {
        match self {
            EncodeInputs::Texts(t) => t.len(),
            EncodeInputs::Ids(i) => i.len(),
        }
    }

    /// No inputs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The texts, when these are texts.
    fn texts(&self) -> Option<&[String]> {
        match self {
            EncodeInputs::Texts(t) => Some(t),
            EncodeInputs::Ids(_) => None,
        }
    }

    /// The token ids, when these are ids.
    fn ids(&self) -> Option<&[Vec<u32>]> {
        match self {
            EncodeInputs::Ids(i) => Some(i),
            EncodeInputs::Texts(_) => None,
        }
    }

    /// Jobs run together only with inputs of the same kind.
    fn same_kind(&self, other: &EncodeInputs) -> bool {
        matches!(
            (self, other),
            (EncodeInputs::Texts(_), EncodeInputs::Texts(_))
                | (EncodeInputs::Ids(_), EncodeInputs::Ids(_))
        )
    }
}

impl EncodeJob {
    /// A job made now. `max_tokens`: the most tokens one text can take
    /// (the model's `max_seq_length`).
    pub fn new(
        inputs: EncodeInputs,
        req: EncodeRequest,
        max_tokens: usize,
        reply: oneshot::Sender<EncodeDone>,
    ) -> Self {
        // A token covers at least one byte of the text, plus the special
        // tokens; ColBERT's query expansion stays within max_seq_length.
        let estimate = match &inputs {
            EncodeInputs::Texts(texts) => texts
                .iter()
                .map(|t| (t.len() + 4).min(max_tokens.max(1)))
                .sum(),
            EncodeInputs::Ids(ids) => ids.iter().map(Vec::len).sum(),
        };
        EncodeJob {
            inputs,
            req,
            reply,
            estimate,
            enqueued: Instant::now(),
        }
    }
}

/// A queued request: pooled vectors / token states of tokenized sequences,
/// or the output stage.
enum Work {
    Embed(Job),
    Encode(EncodeJob),
}

impl Work {
    fn tokens(&self) -> usize {
        match self {
            Work::Embed(j) => j.tokens(),
            Work::Encode(j) => j.estimate,
        }
    }

    fn enqueued(&self) -> Instant {
        match self {
            Work::Embed(j) => j.enqueued,
            Work::Encode(j) => j.enqueued,
        }
    }

    fn left(&self) -> bool {
        match self {
            Work::Embed(j) => j.reply.is_closed(),
            Work::Encode(j) => j.reply.is_closed(),
        }
    }
}

/// The jobs of one engine call.
enum Batch {
    Embed(Vec<Job>),
    Encode(Vec<EncodeJob>),
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Work>,
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
        match self.push(Work::Embed(job)) {
            None => Ok(()),
            Some(Work::Embed(j)) => Err(j),
            Some(Work::Encode(_)) => unreachable!("an embed job came back as another"),
        }
    }

    /// Queues an output-stage job. Returns it back when the batcher is
    /// closed.
    pub fn submit_encode(&self, job: EncodeJob) -> Result<(), Box<EncodeJob>> {
        match self.push(Work::Encode(job)) {
            None => Ok(()),
            Some(Work::Encode(j)) => Err(Box::new(j)),
            Some(Work::Embed(_)) => unreachable!("an encode job came back as another"),
        }
    }

    /// Queues `work`; gives it back when the batcher is closed.
    fn push(&self, work: Work) -> Option<Work> {
        let (lock, cv) = &*self.shared;
        let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
        if q.closed {
            return Some(work);
        }
        q.jobs.push_back(work);
        cv.notify_one();
        None
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
/// of the same kind with the same pass (or the same encode request) while
/// the tokens stay within `budget` (a job larger than the budget runs
/// alone). Jobs whose client has left are dropped.
fn take_batch(q: &mut Queue, budget: usize) -> Option<Batch> {
    q.jobs.retain(|j| !j.left());
    let first = q.jobs.pop_front()?;
    let mut tokens = first.tokens();
    let mut batch = match first {
        Work::Embed(j) => Batch::Embed(vec![j]),
        Work::Encode(j) => Batch::Encode(vec![j]),
    };
    let mut seqs = match &batch {
        Batch::Embed(b) => b[0].seqs.len(),
        Batch::Encode(b) => b[0].inputs.len(),
    };
    let mut i = 0;
    while i < q.jobs.len() {
        let t = q.jobs[i].tokens();
        if tokens + t > budget {
            break;
        }
        let fits = match (&batch, &q.jobs[i]) {
            (Batch::Embed(b), Work::Embed(j)) => {
                j.plan.same_pass(&b[0].plan) && seqs + j.seqs.len() <= embedder::MAX_BATCH
            }
            (Batch::Encode(b), Work::Encode(j)) => {
                j.req == b[0].req
                    && j.inputs.same_kind(&b[0].inputs)
                    && seqs + j.inputs.len() <= embedder::MAX_BATCH
            }
            _ => false,
        };
        if !fits {
            i += 1;
            continue;
        }
        tokens += t;
        match (&mut batch, q.jobs.remove(i)) {
            (Batch::Embed(b), Some(Work::Embed(j))) => {
                seqs += j.seqs.len();
                b.push(j);
            }
            (Batch::Encode(b), Some(Work::Encode(j))) => {
                seqs += j.inputs.len();
                b.push(j);
            }
            _ => unreachable!("the job checked is the job taken"),
        }
    }
    Some(batch)
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
                let until = q.jobs[0].enqueued() + max_wait;
                loop {
                    let queued: usize = q.jobs.iter().map(Work::tokens).sum();
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
        match batch {
            None => continue,
            Some(Batch::Embed(b)) => run_batch(model, b, metrics),
            Some(Batch::Encode(b)) => run_encode(model, b, metrics),
        }
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

/// One `encode` call, the engine's panics caught.
fn encode_caught(
    model: &Embedder,
    jobs: &[&EncodeInputs],
    req: &EncodeRequest,
) -> embedder::Result<Encoded> {
    // The jobs of one call have inputs of one kind.
    let run = || match jobs.first() {
        Some(EncodeInputs::Ids(_)) => {
            let ids: Vec<&[u32]> = jobs
                .iter()
                .filter_map(|j| j.ids())
                .flatten()
                .map(Vec::as_slice)
                .collect();
            model.encode_ids(&ids, req)
        }
        _ => {
            let texts: Vec<&str> = jobs
                .iter()
                .filter_map(|j| j.texts())
                .flatten()
                .map(String::as_str)
                .collect();
            model.encode(&texts, req)
        }
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|_| {
        Err(embedder::Error::new(
            embedder::ErrorKind::Internal,
            "the engine panicked on this batch",
        ))
    })
}

/// Runs encode jobs with one request as one call and hands each its texts'
/// outputs. When a shared call fails (a text too long with truncation off,
/// say), each job runs again alone, so that the error names the text by its
/// index in its own request and the other jobs get their outputs.
fn run_encode(model: &Embedder, batch: Vec<EncodeJob>, metrics: &Metrics) {
    let start = Instant::now();
    let jobs: Vec<&EncodeInputs> = batch.iter().map(|j| &j.inputs).collect();
    let r = encode_caught(model, &jobs, &batch[0].req);
    let took = start.elapsed();
    let n: usize = jobs.iter().map(|i| i.len()).sum();
    let tokens = |e: &Encoded| e.info.iter().map(|i| i.tokens).sum::<usize>();
    match r {
        Ok(mut all) => {
            metrics.observe_batch(n, tokens(&all), took);
            for job in batch {
                let mine = all.split_front(job.inputs.len());
                let _ = job.reply.send(EncodeDone {
                    encoded: Ok(mine),
                    queue_time: start.saturating_duration_since(job.enqueued),
                    inference_time: took,
                });
            }
        }
        Err(e) if batch.len() == 1 => {
            metrics.observe_batch(n, 0, took);
            for job in batch {
                let _ = job.reply.send(EncodeDone {
                    encoded: Err(e.clone()),
                    queue_time: start.saturating_duration_since(job.enqueued),
                    inference_time: took,
                });
            }
        }
        Err(_) => {
            for job in batch {
                let alone = Instant::now();
                let r = encode_caught(model, &[&job.inputs], &job.req);
                let took = alone.elapsed();
                metrics.observe_batch(job.inputs.len(), r.as_ref().map_or(0, tokens), took);
                let _ = job.reply.send(EncodeDone {
                    encoded: r,
                    queue_time: start.saturating_duration_since(job.enqueued),
                    inference_time: took,
                });
            }
        }
    }
}

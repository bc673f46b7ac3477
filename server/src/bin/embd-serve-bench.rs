//! `embd-serve-bench`: a load generator for `bench/serve.sh`. N clients, each
//! on its own keep-alive connection (a thread with a blocking socket, so the
//! client costs little next to the server), send corpus texts to `POST /embed`
//! `batch` at a time until the corpus (times `rounds`) is done; every answer
//! is checked (status 200, one vector per text). Prints one JSON line:
//! texts/s, requests, p50/p99/max latency in ms.
//!
//! `--rate R` is the open-loop mode: requests are due at a fixed rate (evenly
//! spaced, or Poisson arrivals with `--poisson`) whatever the server does, and
//! each one's latency is measured from the time it was due, not from when a
//! connection was free to send it, so queueing is not hidden (no coordinated
//! omission). `--clients` connections carry them; a request due while all are
//! busy waits for one, and that wait counts.
//!
//! `--lone` measures what HTTP adds to one request: the same text (a corpus
//! text of about `--lone-tokens` tokens) embedded in this process by the
//! engine with the same `--threads`, and sent alone to the server, in
//! alternating blocks; prints both medians and their difference.
//!
//! `--first` instead polls `GET /health` until it answers, then sends one
//! `/embed` and prints the time from the server's start (`--since-ns`, a
//! `CLOCK_REALTIME` time in ns taken before starting it) to that answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

#[derive(Parser)]
#[command(about = "Load generator for embd serve (bench/serve.sh)")]
struct Args {
    /// host:port of the server.
    #[arg(long)]
    addr: SocketAddr,
    /// Corpus: one text per line.
    #[arg(long)]
    corpus: Option<std::path::PathBuf>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Texts per request.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Passes over the corpus.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Use only the first N texts (0: all).
    #[arg(long, default_value_t = 0)]
    limit: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Start-up mode (see above).
    #[arg(long)]
    first: bool,
    /// With --first: when the server was started (ns since the epoch).
    #[arg(long, default_value_t = 0)]
    since_ns: u128,
    /// Open loop: requests per second (0: closed loop, each client sends its
    /// next request when the last is answered).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Open loop: exponential gaps between requests (Poisson arrivals)
    /// instead of even spacing.
    #[arg(long)]
    poisson: bool,
    /// Open loop: seed of the Poisson gaps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Lone-request mode (see above).
    #[arg(long)]
    lone: bool,
    /// With --lone: the model the server serves.
    #[arg(long)]
    model: Option<std::path::PathBuf>,
    /// With --lone: engine threads (the server's --threads).
    #[arg(long)]
    threads: Option<usize>,
    /// With --lone: tokens of the text ([CLS]/[SEP] included).
    #[arg(long, default_value_t = 20)]
    lone_tokens: usize,
    /// With --lone: timed calls of each kind.
    #[arg(long, default_value_t = 300)]
    lone_runs: usize,
}

fn request(s: &mut BufReader<TcpStream>, body: &str) -> Result<Vec<u8>, String> {
    let head = format!(
        "POST /embed HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let w = s.get_mut();
    w.write_all(head.as_bytes())
        .and_then(|()| w.write_all(body.as_bytes()))
        .map_err(|e| format!("write: {e}"))?;
    read_answer(s)
}

fn read_answer(s: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut line = String::new();
    s.read_line(&mut line).map_err(|e| format!("read: {e}"))?;
    let status = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut len = 0usize;
    loop {
        line.clear();
        s.read_line(&mut line).map_err(|e| format!("read: {e}"))?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v
                    .trim()
                    .parse()
                    .map_err(|e| format!("content-length: {e}"))?;
            }
        }
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| format!("body: {e}"))?;
    if status != "200" {
        return Err(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(body)
}

fn connect(addr: SocketAddr) -> Result<BufReader<TcpStream>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    Ok(BufReader::new(s))
}

fn first(args: &Args) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    loop {
        if let Ok(mut s) = TcpStream::connect(args.addr) {
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n");
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            if buf.starts_with(b"HTTP/1.1 200") {
                break;
            }
        }
        if Instant::now() > deadline {
            return Err("the server did not answer /health in time".into());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let mut s = connect(args.addr)?;
    let body = request(&mut s, r#"{"inputs": "The cat sits outside"}"#)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_nanos();
    if !body.starts_with(b"[[") {
        return Err("the first answer is not a vector".into());
    }
    println!(
        "{{\"startup_to_first_answer_ms\": {:.1}}}",
        (now.saturating_sub(args.since_ns)) as f64 / 1e6
    );
    Ok(())
}

fn main() {
    let args = Args::parse();
    let r = if args.first {
        first(&args)
    } else if args.lone {
        lone(&args)
    } else {
        load(&args)
    };
    if let Err(e) = r {
        eprintln!("embd-serve-bench: {e}");
        std::process::exit(1);
    }
}

fn read_corpus(args: &Args) -> Result<Vec<String>, String> {
    let path = args.corpus.as_ref().ok_or("--corpus is required")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut texts: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if args.limit > 0 {
        texts.truncate(args.limit);
    }
    if texts.is_empty() {
        return Err(format!("{}: no texts", path.display()));
    }
    Ok(texts)
}

/// The value at quantile `p` of sorted `l` (nearest rank).
fn pct(l: &[f64], p: f64) -> f64 {
    l[((l.len() as f64 - 1.0) * p).round() as usize]
}

/// Checks an answer: one non-empty vector per text.
fn check(answer: &[u8], n: usize) -> Result<Vec<Vec<f32>>, String> {
    let v: Vec<Vec<f32>> = serde_json::from_slice(answer).map_err(|e| format!("answer: {e}"))?;
    if v.len() != n || v.iter().any(Vec::is_empty) {
        return Err(format!("{} vectors for {n} texts", v.len()));
    }
    Ok(v)
}

/// When each request is due, in seconds from the start: `n` at `rate` per
/// second, evenly spaced or with exponential gaps (xorshift64*, inverse CDF).
fn schedule(n: usize, rate: f64, poisson: bool, seed: u64) -> Vec<f64> {
    let mut x = seed.max(1);
    let mut t = 0.0;
    (0..n)
        .map(|i| {
            if !poisson {
                return i as f64 / rate;
            }
            let due = t;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u =
                ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            t += -u.ln() / rate;
            due
        })
        .collect()
}

fn load(args: &Args) -> Result<(), String> {
    let texts = read_corpus(args)?;
    let batch = args.batch.max(1);
    // Requests: the corpus in batches, `rounds` times.
    let mut bodies: Vec<(String, usize)> = Vec::new();
    for _ in 0..args.rounds.max(1) {
        for chunk in texts.chunks(batch) {
            let body = serde_json::json!({ "inputs": chunk }).to_string();
            bodies.push((body, chunk.len()));
        }
    }
    let open = args.rate > 0.0;
    let due: Arc<Vec<f64>> = Arc::new(if open {
        schedule(bodies.len(), args.rate, args.poisson, args.seed)
    } else {
        Vec::new()
    });
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    // (latency ms, ms the send started after it was due)
    let lat: Arc<Mutex<Vec<(f64, f64)>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    // Connections first, then the clock (the open loop starts a little later,
    // so that every client thread is waiting for its first request).
    let conns: Vec<BufReader<TcpStream>> = (0..args.clients.max(1))
        .map(|_| connect(args.addr))
        .collect::<Result<_, _>>()?;
    let start = Instant::now()
        + if open {
            Duration::from_millis(20)
        } else {
            Duration::ZERO
        };
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut s| {
            let (bodies, next, lat, due) = (
                Arc::clone(&bodies),
                Arc::clone(&next),
                Arc::clone(&lat),
                Arc::clone(&due),
            );
            std::thread::spawn(move || -> Result<usize, String> {
                let mut mine = Vec::new();
                let mut done = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((body, n)) = bodies.get(i) else {
                        break;
                    };
                    let now = Instant::now();
                    if now > deadline {
                        return Err("over the time limit".into());
                    }
                    // Closed loop: due now. Open loop: due on the schedule,
                    // and the latency counts from then.
                    let t = match due.get(i) {
                        Some(&d) => {
                            let t = start + Duration::from_secs_f64(d);
                            if t > now {
                                std::thread::sleep(t - now);
                            }
                            t
                        }
                        None => now,
                    };
                    let late = Instant::now().saturating_duration_since(t);
                    let answer = request(&mut s, body)?;
                    mine.push((t.elapsed().as_secs_f64() * 1e3, late.as_secs_f64() * 1e3));
                    check(&answer, *n)?;
                    done += n;
                }
                lat.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
                Ok(done)
            })
        })
        .collect();
    let mut done = 0;
    for h in handles {
        done += h.join().map_err(|_| "a client panicked")??;
    }
    let secs = start.elapsed().as_secs_f64();
    let all = lat.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut l: Vec<f64> = all.iter().map(|p| p.0).collect();
    l.sort_by(f64::total_cmp);
    let mut late: Vec<f64> = all.iter().map(|p| p.1).collect();
    late.sort_by(f64::total_cmp);
    let mut out = serde_json::json!({
        "mode": if open { "open" } else { "closed" },
        "clients": args.clients,
        "batch": batch,
        "texts": done,
        "requests": l.len(),
        "seconds": secs,
        "texts_per_s": done as f64 / secs,
        "p50_ms": pct(&l, 0.5),
        "p90_ms": pct(&l, 0.9),
        "p99_ms": pct(&l, 0.99),
        "max_ms": pct(&l, 1.0),
    });
    if open {
        out["rate"] = args.rate.into();
        out["arrivals"] = (if args.poisson { "poisson" } else { "even" }).into();
        // Sends that left later than due: client threads oversleeping, or
        // every connection busy (both count in the latencies above).
        out["send_late_p99_ms"] = pct(&late, 0.99).into();
        out["send_late_max_ms"] = pct(&late, 1.0).into();
    }
    println!("{out}");
    Ok(())
}

/// `--lone`: the same text in this process and over HTTP, alternating
/// blocks of calls so that a change in the machine's load hits both.
fn lone(args: &Args) -> Result<(), String> {
    let texts = read_corpus(args)?;
    let path = args.model.as_ref().ok_or("--lone needs --model")?;
    let mut opts = embedder::Options::new();
    if let Some(t) = args.threads {
        opts = opts.threads(t);
    }
    let model =
        embedder::Embedder::open(path, &opts).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = texts
        .iter()
        .min_by_key(|t| model.count_tokens(t).abs_diff(args.lone_tokens))
        .ok_or("no texts")?
        .clone();
    let tokens = model.count_tokens(&text);
    let body = serde_json::json!({ "inputs": text }).to_string();
    let mut s = connect(args.addr)?;
    // The server's answer is the in-process vector, bit for bit.
    let mine = model.embed(&[&text]).map_err(|e| e.to_string())?;
    let theirs = check(&request(&mut s, &body)?, 1)?;
    if theirs[0].len() != mine.len()
        || theirs[0]
            .iter()
            .zip(&mine)
            .any(|(a, b)| a.to_bits() != b.to_bits())
    {
        return Err("the server's vector differs from the in-process one".into());
    }
    let runs = args.lone_runs.max(1);
    let block = 25;
    let (mut inproc, mut http) = (Vec::new(), Vec::new());
    // Warm-up: one block of each, untimed.
    for timed in [false, true] {
        let n = if timed { runs } else { block };
        let mut k = 0;
        while k < n {
            let m = block.min(n - k);
            for _ in 0..m {
                let t = Instant::now();
                std::hint::black_box(model.embed(&[&text]).map_err(|e| e.to_string())?);
                if timed {
                    inproc.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            for _ in 0..m {
                let t = Instant::now();
                let a = request(&mut s, &body)?;
                if timed {
                    http.push(t.elapsed().as_secs_f64() * 1e3);
                }
                check(&a, 1)?;
            }
            k += m;
        }
    }
    inproc.sort_by(f64::total_cmp);
    http.sort_by(f64::total_cmp);
    println!(
        "{}",
        serde_json::json!({
            "text_tokens": tokens,
            "runs": runs,
            "threads": model.threads(),
            "inprocess_p50_ms": pct(&inproc, 0.5),
            "inprocess_p99_ms": pct(&inproc, 0.99),
            "http_p50_ms": pct(&http, 0.5),
            "http_p99_ms": pct(&http, 0.99),
            "added_p50_ms": pct(&http, 0.5) - pct(&inproc, 0.5),
        })
    );
    Ok(())
}

//! `embd-serve-bench`: a load generator for `bench/serve.sh`. N clients, each
//! on its own keep-alive connection (a thread with a blocking socket, so the
//! client costs little next to the server), send corpus texts to `POST /embed`
//! `batch` at a time until the corpus (times `rounds`) is done; every answer
//! is checked (status 200, one vector per text). Prints one JSON line:
//! texts/s, requests, p50/p99/max latency in ms.
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
    } else {
        load(&args)
    };
    if let Err(e) = r {
        eprintln!("embd-serve-bench: {e}");
        std::process::exit(1);
    }
}

fn load(args: &Args) -> Result<(), String> {
    let path = args.corpus.as_ref().ok_or("--corpus is required")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut texts: Vec<String> = text.lines().map(str::to_string).collect();
    if args.limit > 0 {
        texts.truncate(args.limit);
    }
    let batch = args.batch.max(1);
    // Requests: the corpus in batches, `rounds` times.
    let mut bodies: Vec<(String, usize)> = Vec::new();
    for _ in 0..args.rounds.max(1) {
        for chunk in texts.chunks(batch) {
            let body = serde_json::json!({ "inputs": chunk }).to_string();
            bodies.push((body, chunk.len()));
        }
    }
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    let lat: Arc<Mutex<Vec<f64>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    // Connections first, then the clock.
    let conns: Vec<BufReader<TcpStream>> = (0..args.clients.max(1))
        .map(|_| connect(args.addr))
        .collect::<Result<_, _>>()?;
    let start = Instant::now();
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut s| {
            let (bodies, next, lat) = (Arc::clone(&bodies), Arc::clone(&next), Arc::clone(&lat));
            std::thread::spawn(move || -> Result<usize, String> {
                let mut mine = Vec::new();
                let mut done = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((body, n)) = bodies.get(i) else {
                        break;
                    };
                    if Instant::now() > deadline {
                        return Err("over the time limit".into());
                    }
                    let t = Instant::now();
                    let answer = request(&mut s, body)?;
                    mine.push(t.elapsed().as_secs_f64() * 1e3);
                    let v: Vec<Vec<f32>> =
                        serde_json::from_slice(&answer).map_err(|e| format!("answer: {e}"))?;
                    if v.len() != *n || v.iter().any(|r| r.is_empty()) {
                        return Err(format!("{} vectors for {n} texts", v.len()));
                    }
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
    let mut l = lat.lock().unwrap_or_else(|e| e.into_inner()).clone();
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| l[((l.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{}",
        serde_json::json!({
            "clients": args.clients,
            "batch": batch,
            "texts": done,
            "requests": l.len(),
            "seconds": secs,
            "texts_per_s": done as f64 / secs,
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "max_ms": pct(1.0),
        })
    );
    Ok(())
}

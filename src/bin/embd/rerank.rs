//! `embd rerank`: query-passage pairs scored by a cross-encoder, or
//! documents ranked for a query.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use embedder::{Error, Options, Reranker};

use crate::io_util::{read_pairs, read_texts};
use crate::{resolve_model, stdout_err, ModelArgs, PrecisionArg};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub precision: PrecisionArg,
    /// The query to rank the documents for.
    #[arg(long, required_unless_present = "jsonl")]
    pub query: Option<String>,
    /// Documents, one per line (with --query; {"text": ...} lines with
    /// --query --jsonl); pairs as JSONL (with --jsonl alone); - for standard
    /// input.
    #[arg(long, default_value = "-")]
    pub input: String,
    /// Input lines are JSON: {"query", "passage"} objects to score each pair,
    /// or with --query {"text"} documents to rank.
    #[arg(long)]
    pub jsonl: bool,
    /// Print only the best K documents (1..=the number of documents).
    #[arg(long, value_name = "K", requires = "query")]
    pub top_k: Option<usize>,
    /// Rank by logit and print the logit as "score" (the identity activation).
    #[arg(long, requires = "query")]
    pub raw: bool,
    /// Tokens of a pair, special tokens included (CrossEncoder's max_length;
    /// default: the model's).
    #[arg(long, value_name = "N")]
    pub max_length: Option<usize>,
    /// The instruction pairs are scored under (an LLM reranker's
    /// CrossEncoder prompt, Qwen3-Reranker's `<Instruct>`; default: the
    /// model's). Refused by a cross-encoder without a prompt template.
    #[arg(long, value_name = "TEXT")]
    pub prompt: Option<String>,
    /// Pairs per call (--jsonl).
    #[arg(long, default_value_t = 256)]
    pub batch_size: usize,
}

/// Runs `embd rerank`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        model,
        precision,
        query,
        input,
        jsonl,
        top_k,
        raw,
        max_length,
        prompt,
        batch_size,
    } = args;
    let path = resolve_model(&model.model)?;
    let mut opts = Options::new();
    if let Some(t) = model.threads {
        opts = opts.threads(t);
    }
    opts.precision = precision.precision;
    opts.max_seq_length = max_length;
    let r = Reranker::open(&path, &opts)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let num = |v: &[f32]| -> serde_json::Value {
        if v.len() == 1 {
            serde_json::json!(v[0])
        } else {
            serde_json::json!(v)
        }
    };
    if let Some(q) = query {
        let docs = read_texts(&input, jsonl)?;
        for x in r.rank_prompted(&q, &docs, top_k, raw, prompt.as_deref(), None)? {
            let s = if raw { x.logit } else { x.score };
            let v = serde_json::json!({ "index": x.index, "score": s });
            writeln!(out, "{v}").map_err(stdout_err)?;
        }
    } else {
        let pairs = read_pairs(&input)?;
        let labels = r.num_labels();
        for chunk in pairs.chunks(batch_size.max(1)) {
            let mut scores = vec![0.0f32; chunk.len() * labels];
            let mut logits = vec![0.0f32; chunk.len() * labels];
            r.predict_prompted(
                chunk,
                prompt.as_deref(),
                Some(&mut scores),
                Some(&mut logits),
                None,
            )?;
            for (s, l) in scores.chunks(labels).zip(logits.chunks(labels)) {
                let v = serde_json::json!({ "score": num(s), "logit": num(l) });
                writeln!(out, "{v}").map_err(stdout_err)?;
            }
        }
    }
    out.flush().map_err(stdout_err)?;
    Ok(ExitCode::SUCCESS)
}

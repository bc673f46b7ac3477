//! `embd precision-report`: how much error each reduced-precision product
//! adds, layer by layer and product by product (see
//! `embedder::model::report`).

use std::path::PathBuf;
use std::process::ExitCode;

use embedder::model::report::{precision_report, Agreement, PrecisionReport};
use embedder::{Error, Precision};

use crate::{parse_precision, resolve_model};

/// What the subcommand was given.
pub struct ReportArgs {
    pub model: PathBuf,
    pub input: String,
    pub precision: Precision,
    pub calibration: Option<String>,
    pub json: bool,
}

/// Reads texts, and reference vectors when the input is JSONL with an
/// `"embedding"` field on every line (as in the shared reference files).
/// Texts and, when every line has one, their reference vectors.
type Input = (Vec<String>, Option<Vec<Vec<f32>>>);

fn read_input(path: &str) -> Result<Input, Error> {
    let raw = crate::io_util::read_texts(path, false)?;
    if !raw.first().is_some_and(|l| l.trim_start().starts_with('{')) {
        return Ok((raw, None));
    }
    let mut texts = Vec::with_capacity(raw.len());
    let mut refs = Vec::with_capacity(raw.len());
    for (i, line) in raw.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::invalid_argument(format!("{path}: line {}: {e}", i + 1)))?;
        let text = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| {
            Error::invalid_argument(format!("{path}: line {}: no \"text\" string", i + 1))
        })?;
        texts.push(text.to_string());
        let emb = v.get("embedding").and_then(|e| e.as_array()).map(|a| {
            a.iter()
                .map(|x| x.as_f64().unwrap_or(f64::NAN) as f32)
                .collect::<Vec<f32>>()
        });
        refs.push(emb);
    }
    let refs = refs.into_iter().collect::<Option<Vec<_>>>();
    Ok((texts, refs))
}

fn agreement_json(a: &Agreement) -> serde_json::Value {
    serde_json::json!({
        "worst_cosine_vs_f32": a.worst_vs_f32,
        "mean_cosine_vs_f32": a.mean_vs_f32,
        "worst_cosine_vs_reference": a.vs_reference.map(|r| r.0),
        "mean_cosine_vs_reference": a.vs_reference.map(|r| r.1),
    })
}

fn agreement_text(a: &Agreement) -> String {
    let mut s = format!(
        "vs f32: worst {:.6} mean {:.6}",
        a.worst_vs_f32, a.mean_vs_f32
    );
    if let Some((w, m)) = a.vs_reference {
        s += &format!("   vs reference: worst {w:.6} mean {m:.6}");
    }
    s
}

fn print(r: &PrecisionReport, json: bool) {
    if json {
        let v = serde_json::json!({
            "precision": r.precision.name(),
            "plan": {
                "qkv": r.plan.qkv.name(),
                "attn_out": r.plan.attn_out.name(),
                "ffn_up": r.plan.ffn_up.name(),
                "ffn_down": r.plan.ffn_down.name(),
            },
            "layers": r.layers.iter().map(|l| serde_json::json!({
                "layer": l.layer,
                "stage": format!("{:?}", l.stage),
                "relative_l2": l.relative_l2,
                "worst_token_cosine": l.worst_token_cosine,
            })).collect::<Vec<_>>(),
            "engine": agreement_json(&r.engine),
            "per_product": r.per_product.iter().map(|(n, a)| {
                let mut v = agreement_json(a);
                v["product"] = serde_json::json!(n);
                v
            }).collect::<Vec<_>>(),
            "uniform": agreement_json(&r.uniform),
        });
        println!("{v}");
        return;
    }
    println!(
        "precision {}: plan qkv={} attn_out={} ffn_up={} ffn_down={}",
        r.precision, r.plan.qkv, r.plan.attn_out, r.plan.ffn_up, r.plan.ffn_down
    );
    println!("\nhidden states vs f32, after each sub-layer (all tokens):");
    println!("  layer  stage        rel. L2   worst token cosine");
    for l in &r.layers {
        println!(
            "  {:>5}  {:<11} {:>8.5}   {:.6}",
            l.layer,
            format!("{:?}", l.stage),
            l.relative_l2,
            l.worst_token_cosine
        );
    }
    println!(
        "\nembeddings, one kind of product in {} (the rest f32):",
        r.precision
    );
    for (name, a) in &r.per_product {
        println!("  {name:<9} {}", agreement_text(a));
    }
    println!(
        "\nembeddings, every product in {}:  {}",
        r.precision,
        agreement_text(&r.uniform)
    );
    println!(
        "embeddings, the engine's plan:      {}",
        agreement_text(&r.engine)
    );
}

/// Runs the report and prints it.
pub fn run_report(a: &ReportArgs) -> Result<(), Error> {
    let (texts, refs) = read_input(&a.input)?;
    let calib = match &a.calibration {
        Some(p) => Some(crate::io_util::read_texts(p, false)?),
        None => None,
    };
    let r = precision_report(
        &a.model,
        &texts,
        refs.as_deref(),
        a.precision,
        calib.as_deref(),
    )?;
    print(&r, a.json);
    Ok(())
}

#[derive(clap::Args)]
pub struct Args {
    /// Model file (default: $EMBD_MODEL, then models/all-MiniLM-L6-v2.weights).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// Texts, one per line; or JSONL with "text" and "embedding" (reference
    /// vectors, e.g. sentence-transformers') on every line.
    #[arg(long)]
    pub input: String,
    /// The precision to examine.
    #[arg(long, default_value = "int8", value_name = "bf16|int8", value_parser = parse_precision)]
    pub precision: Precision,
    /// Calibration texts for int8 smoothing, one per line (default: the
    /// engine's built-in set).
    #[arg(long)]
    pub calibration: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `embd precision-report`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        model,
        input,
        precision,
        calibration,
        json,
    } = args;
    run_report(&ReportArgs {
        model: resolve_model(&model)?,
        input,
        precision,
        calibration,
        json,
    })?;
    Ok(ExitCode::SUCCESS)
}

//! `embd similarity`: cosine similarity of texts (dot products of sparse
//! vectors, ColBERT's MaxSim of multi-vectors).

use std::process::ExitCode;

use embedder::{EncodeRequest, EncodeTask, Error, OutputKind};

use crate::{open_model, EmbedArgs, ModelArgs, PrecisionArg};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub precision: PrecisionArg,
    #[command(flatten)]
    pub embed: EmbedArgs,
    /// Texts to compare.
    #[arg(required = true, num_args = 2..)]
    pub texts: Vec<String>,
    /// The output compared: dense (cosine), sparse (dot product) or
    /// multi-vector (ColBERT's MaxSim of the first text, encoded as a
    /// query, against each other text, encoded as a document). Default:
    /// dense, or the model's output when it has no dense one.
    #[arg(long, value_name = "OUTPUT")]
    pub emit: Option<String>,
}

/// Runs `embd similarity`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        model,
        precision,
        embed,
        texts,
        emit,
    } = args;
    let emb = open_model(&model, precision.precision, &embed)?;
    let kind = match (&emit, emb.as_embedder()) {
        (Some(e), _) => match OutputKind::parse_list(e)?.as_slice() {
            [k] => *k,
            _ => {
                return Err(Error::invalid_argument(
                    "--emit names one output for a similarity",
                ))
            }
        },
        (None, Some(e)) if !e.outputs().contains(&OutputKind::Dense) => e.outputs()[0],
        _ => OutputKind::Dense,
    };
    if kind != OutputKind::Dense {
        let e = emb.as_embedder().ok_or_else(|| {
            Error::unsupported("sparse and multi-vector outputs need an encoder model")
        })?;
        return similarity_outputs(e, kind, &texts);
    }
    let v = emb.embed(&texts)?;
    let dim = emb.dim();
    let row = |i: usize| &v[i * dim..(i + 1) * dim];
    if texts.len() == 2 {
        println!("{:.6}", embedder::cosine_similarity(row(0), row(1)));
    } else {
        for (i, t) in texts.iter().enumerate() {
            println!("[{i}] {t}");
        }
        print!("     ");
        for j in 0..texts.len() {
            print!(" {:>7}", format!("[{j}]"));
        }
        println!();
        for i in 0..texts.len() {
            print!("{:>5}", format!("[{i}]"));
            for j in 0..texts.len() {
                print!(" {:>7.4}", embedder::cosine_similarity(row(i), row(j)));
            }
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `embd similarity` over sparse vectors (dot products, a matrix for more
/// than two texts) or multi-vectors (MaxSim of text 0 as a query against
/// each other text as a document).
fn similarity_outputs(
    e: &embedder::Embedder,
    kind: OutputKind,
    texts: &[String],
) -> Result<ExitCode, Error> {
    if kind == OutputKind::MultiVector {
        let q = e.encode(
            &texts[..1],
            &EncodeRequest::new(&[kind]).task(EncodeTask::Query),
        )?;
        let d = e.encode(
            &texts[1..],
            &EncodeRequest::new(&[kind]).task(EncodeTask::Document),
        )?;
        let (q, d) = (q.into_multi_vector(), d.into_multi_vector());
        for (j, doc) in d.iter().enumerate() {
            let score = q[0].max_sim(doc);
            if texts.len() == 2 {
                println!("{score:.6}");
            } else {
                println!("[{}] {score:.6} {}", j + 1, texts[j + 1]);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let v = e.encode(texts, &EncodeRequest::new(&[kind]))?.into_sparse();
    if texts.len() == 2 {
        println!("{:.6}", v[0].dot(&v[1]));
        return Ok(ExitCode::SUCCESS);
    }
    for (i, t) in texts.iter().enumerate() {
        println!("[{i}] {t}");
    }
    for a in &v {
        let row: Vec<String> = v.iter().map(|b| format!("{:>9.4}", a.dot(b))).collect();
        println!("{}", row.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

//! `embd convert`: a HuggingFace folder (or any model file) to EMBD
//! `.weights` (or another container the library writes).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::ValueEnum;
use embedder::convert::{convert_dtype, TargetDType};
use embedder::formats::amb::{Quant, ScaleType};
use embedder::formats::{Container, FormatKind, WriteSettings, CONTAINERS};
use embedder::import::hf::{self, HfOptions};
use embedder::model::static_vocab::Behaviour;
use embedder::{Error, ModelFile, ReadOptions};

use crate::io_util::read_texts;
use crate::progress::Progress;

#[derive(clap::Args)]
pub struct Args {
    /// HF / sentence-transformers folder, a model file, or a hub id
    /// `org/name[@revision]` (its snapshot in the HuggingFace cache).
    pub src: PathBuf,
    /// Output file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Tensor precision.
    #[arg(long, default_value = "f32", value_parser = parse_dtype)]
    pub dtype: TargetDType,
    /// `model_name` to record (default: the folder's name).
    #[arg(long)]
    pub name: Option<String>,
    /// `model_version` to record (default 1.0.0).
    #[arg(long)]
    pub model_version: Option<String>,
    /// How a Unigram/BPE `tokenizer.json` is read: `transformers` (as
    /// transformers 5 and sentence-transformers load it: the reference) or
    /// `as-written` (as the `tokenizers` library and
    /// text-embeddings-inference run the file).
    #[arg(long, value_enum, default_value = "transformers")]
    pub tokenizer_layout: TokenizerLayoutArg,
    /// A static (model2vec / StaticEmbedding) folder: whose vectors the
    /// file gives, `sentence-transformers` (the unknown token kept, never truncated;
    /// the default on a folder with a modules.json) or `model2vec` (the unknown
    /// token dropped, cut at max_length; the default without one). `embd inspect`
    /// shows it.
    #[arg(long, value_name = "sentence-transformers|model2vec", value_parser = parse_static)]
    pub static_behaviour: Option<Behaviour>,
    /// Write without data/file CRCs (CHECKSUM_ENABLED clear).
    #[arg(long)]
    pub no_checksums: bool,
    /// Output container.
    #[arg(long = "to", default_value = "embd", value_parser = container_parser())]
    pub to: &'static Container,
    /// Block quantization of the Linear weights when writing AMB.
    #[arg(long, value_enum, default_value = "none")]
    pub amb_quant: AmbQuant,
    /// Calibration corpus (one text per line): embed it with the converted
    /// model and store each dimension's minimum and maximum, the ranges
    /// of `encode --output-precision int8|uint8` (EMBD output only).
    #[arg(long, value_name = "FILE")]
    pub output_ranges_corpus: Option<String>,
    /// With `--dtype bf16|int8`: store the weights row by row (as other
    /// readers and older versions read them) instead of packed in the
    /// kernels' layout of this CPU, which opening maps in place.
    #[arg(long, conflicts_with = "packed")]
    pub unpacked: bool,
    /// With `--dtype f32` (EMBD output): store the layers' weights packed
    /// in the layout of this CPU's f32 kernels, which opening maps in
    /// place instead of packing a copy at every open (for big models;
    /// other readers and older versions read only row-by-row files).
    #[arg(long)]
    pub packed: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum AmbQuant {
    /// Keep tensor types.
    None,
    /// INT4 blocks of 32 with f16 scales for the encoder's Linear weights.
    Int4,
    /// INT5 blocks of 32 with f16 scales for the encoder's Linear weights.
    Int5,
}

/// `embd convert --tokenizer-layout`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum TokenizerLayoutArg {
    /// As transformers 5 / sentence-transformers load the folder.
    Transformers,
    /// As the `tokenizers` library runs `tokenizer.json`.
    AsWritten,
}

impl From<TokenizerLayoutArg> for embedder::tokenizer::spec::Layout {
    fn from(a: TokenizerLayoutArg) -> Self {
        match a {
            TokenizerLayoutArg::Transformers => Self::AsTransformers,
            TokenizerLayoutArg::AsWritten => Self::AsWritten,
        }
    }
}

/// `--to`: the containers the library writes ([`CONTAINERS`]).
fn container_parser() -> impl TypedValueParser<Value = &'static Container> {
    let names = CONTAINERS
        .iter()
        .filter(|c| c.write.is_some())
        .map(|c| PossibleValue::new(c.name).help(c.help));
    PossibleValuesParser::new(names)
        .map(|name| Container::by_name(&name).expect("a name from CONTAINERS"))
}

fn parse_static(s: &str) -> Result<Behaviour, String> {
    Behaviour::from_name(s).map_err(|e| e.to_string())
}

fn parse_dtype(s: &str) -> Result<TargetDType, String> {
    TargetDType::parse(s).ok_or_else(|| format!("unknown dtype '{s}' (f32, f16, bf16, int8)"))
}

/// Runs `embd convert`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        src,
        output,
        dtype,
        name,
        model_version,
        tokenizer_layout,
        static_behaviour,
        no_checksums,
        to,
        amb_quant,
        output_ranges_corpus,
        unpacked,
        packed,
    } = args;
    let (src, name) = match embedder::hub::hub_id_of(&src) {
        Some(id) => (
            embedder::hub::HfCache::from_env()?.find_snapshot(&id)?.dir,
            name.or(Some(id.repo)),
        ),
        None => (src, name),
    };
    let model = if hf::detect(&src).is_some() {
        hf::import_dir(
            &src,
            &HfOptions {
                name,
                version: model_version,
                tokenizer_layout: tokenizer_layout.into(),
                static_behaviour,
            },
        )?
    } else {
        let mut m = ModelFile::open(&src, ReadOptions::default())?;
        if let Some(n) = name {
            m.metadata.insert("model_name".into(), n);
        }
        if let Some(v) = model_version {
            m.metadata.insert("model_version".into(), v);
        }
        m
    };
    let mut converted = convert_dtype(&model, dtype)?;
    if packed && (to.kind != FormatKind::Embd || dtype != TargetDType::F32) {
        return Err(Error::invalid_argument(
            "--packed applies to --dtype f32 EMBD output (bf16 and int8 EMBD files are packed unless --unpacked)",
        ));
    }
    let pack = match dtype {
        TargetDType::F32 => packed,
        _ => !unpacked,
    };
    if to.kind == FormatKind::Embd && pack {
        converted = embedder::convert::pack_for_run(converted, dtype)?;
    }
    if let Some(corpus) = &output_ranges_corpus {
        if to.kind != FormatKind::Embd {
            return Err(Error::invalid_argument(
                "--output-ranges-corpus is stored only in EMBD files (--to embd)",
            ));
        }
        let texts = read_texts(corpus, false)?;
        converted = embedder::convert::with_output_ranges(&converted, &texts, 0)?;
        eprintln!("output ranges: {} calibration texts", texts.len());
    }
    let mut bar = Progress::new("converting");
    let quant = match amb_quant {
        AmbQuant::None => Quant::None,
        AmbQuant::Int4 => Quant::Int4Block {
            block: 32,
            scale: ScaleType::F16,
        },
        AmbQuant::Int5 => Quant::Int5Block {
            block: 32,
            scale: ScaleType::F16,
        },
    };
    let mut settings = WriteSettings {
        checksums: !no_checksums,
        quant,
        progress: &mut |d, t| bar.update(d, t),
    };
    to.write_path(&converted, &output, &mut settings)?;
    bar.finish();
    eprintln!(
        "wrote {} ({} tensors, {dtype})",
        output.display(),
        converted.tensors.len()
    );
    Ok(ExitCode::SUCCESS)
}

//! The tokenizers of ModernBERT, Qwen3 (embedding and reranker) and
//! EmbeddingGemma, built from their `tokenizer.json`, against the ids of HF
//! `tokenizers` 0.23.3 (`shared/reference/architectures/*_cases.jsonl`, every
//! text untruncated, with the post-processor's special tokens): with the
//! template, without it (`encode_raw`), through the stored spec (the settings
//! string a model file keeps) and with byte offsets.

use std::path::PathBuf;

use embedder::tokenizer::pipeline::Pipeline;
use embedder::tokenizer::spec::{Layout, TokenizerKind, TokenizerSpec};

use crate::common::{read_reference, shared_dir};

fn arch_dir(name: &str) -> PathBuf {
    shared_dir().join("reference/architectures").join(name)
}

fn read_json(path: PathBuf) -> serde_json::Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The folder's `tokenizer.json` (+ `tokenizer_config.json`) as a spec.
fn spec(folder: &str, layout: Layout) -> TokenizerSpec {
    let json = read_json(arch_dir(folder).join("tokenizer.json"));
    let cfg = read_json(arch_dir(folder).join("tokenizer_config.json"));
    TokenizerSpec::from_hf_json(&json, Some(&cfg), layout)
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
}

/// The spec through its stored form (what a model file keeps and reads).
fn stored(spec: &TokenizerSpec) -> TokenizerSpec {
    TokenizerSpec::from_parts(
        spec.kind,
        spec.pieces.clone(),
        spec.scores.clone(),
        spec.merges.clone(),
        spec.charsmap.clone(),
        &spec.settings_string(),
    )
    .expect("the stored spec reads back")
}

/// Compares every line of `cases` with `p.encode` (`prefix` and `suffix`:
/// how many of the expected ids the template adds; `strip_suffix`: the
/// pipeline has no template while the cases do). Returns the number of lines.
fn check(p: &Pipeline, cases: &str, prefix: usize, suffix: usize, strip_suffix: bool) -> usize {
    let cases = read_reference(cases);
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let body = &c.input_ids[prefix..c.input_ids.len() - suffix];
        let expect: Vec<u32> = if strip_suffix {
            c.input_ids[..c.input_ids.len() - suffix].to_vec()
        } else {
            c.input_ids.clone()
        };
        let got = p.encode(&c.text, None);
        let mut raw = Vec::new();
        p.encode_raw(&c.text, &mut raw);
        let spans = p.encode_raw_with_offsets(&c.text);
        let span_ids: Vec<u32> = spans.iter().map(|s| s.id).collect();
        let offsets_ok = spans
            .iter()
            .all(|s| s.offsets.is_some_and(|(a, b)| a <= b && b <= c.text.len()));
        if got != expect || raw != body || span_ids != body || !offsets_ok {
            bad.push(format!(
                "line {}: {:?}\n  expected {:?}\n  got      {:?}\n  raw      {:?}\n  spans    {:?}",
                i + 1,
                c.text,
                expect,
                got,
                raw,
                spans
            ));
        }
        assert_eq!(p.count_tokens(&c.text, None), got.len(), "{:?}", c.text);
    }
    assert!(
        bad.is_empty(),
        "{} of {} lines differ; first 5:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(5)].join("\n")
    );
    cases.len()
}

fn both_layouts(folder: &str, cases: &str, prefix: usize, suffix: usize, strip: bool) {
    for layout in [Layout::AsTransformers, Layout::AsWritten] {
        let s = spec(folder, layout);
        assert_eq!(s.kind, TokenizerKind::Bpe);
        let n = check(&s.build().unwrap(), cases, prefix, suffix, strip);
        assert_eq!(n, 346, "{cases}");
        let again = stored(&s);
        assert_eq!(again, s, "{folder}: the stored spec differs");
        check(&again.build().unwrap(), cases, prefix, suffix, strip);
    }
}

#[test]
fn modernbert_cases_match_hf() {
    both_layouts(
        "modernbert-tiny",
        "architectures/modernbert_bpe_cases.jsonl",
        1,
        1,
        false,
    );
}

#[test]
fn qwen3_embedding_cases_match_hf() {
    both_layouts(
        "qwen3-embedding-tiny",
        "architectures/qwen3_bpe_cases.jsonl",
        0,
        1,
        false,
    );
}

#[test]
fn qwen3_reranker_cases_match_hf() {
    // Same vocabulary; its post-processor (ByteLevel alone) appends nothing.
    both_layouts(
        "qwen3-reranker-tiny",
        "architectures/qwen3_bpe_cases.jsonl",
        0,
        1,
        true,
    );
}

#[test]
fn gemma_cases_match_hf() {
    both_layouts(
        "embeddinggemma-tiny",
        "architectures/gemma_spm_bpe_cases.jsonl",
        1,
        1,
        false,
    );
}
/// HF `tokenizers` 0.23.3 (Python: character offsets), `add_special_tokens=False`:
/// `(folder, [(text, JSON [[id, start, end], ...])])`.
const HF_OFFSETS: &[(&str, &[(&str, &str)])] = &[
    ("modernbert-tiny", &[
        ("Hello world's  test\n\n  x 123", "[[41,0,1],[285,1,3],[470,3,5],[403,5,7],[278,7,9],[971,9,11],[4404,11,13],[5022,13,15],[85,15,16],[402,16,19],[200,19,20],[200,20,21],[5022,21,23],[89,23,24],[719,24,26],[19,26,27],[20,27,28]]"),
        ("café ｶﾀ 中文 |||IP_ADDRESS|||   [MASK] end", "[[1220,0,2],[71,2,3],[331,3,4],[222,4,5],[173,5,6],[123,5,6],[116,5,6],[173,6,7],[124,6,7],[224,6,7],[222,7,8],[1540,8,9],[1101,9,10],[222,10,11],[5025,11,27],[5030,27,36],[3543,36,40]]"),
        ("a bc  abc é中<bos>x \t", "[[66,0,1],[310,1,3],[68,3,4],[5022,4,6],[421,6,8],[68,8,9],[706,9,11],[1540,11,12],[29,12,13],[67,13,14],[350,14,16],[31,16,17],[89,17,18],[222,18,19],[199,19,20]]"),
        (" leading  <|im_start|>user hi<think>", "[[660,0,3],[327,3,5],[399,5,8],[5022,8,10],[29,10,11],[93,11,12],[388,12,14],[64,14,15],[4936,15,20],[93,20,21],[31,21,22],[3926,22,26],[364,26,28],[74,28,29],[29,29,30],[1479,30,32],[3056,32,35],[31,35,36]]"),
    ]),
    ("qwen3-embedding-tiny", &[
        ("Hello world's  test\n\n  x 123", "[[39,0,1],[283,1,3],[468,3,5],[405,5,7],[276,7,9],[973,9,11],[4551,11,13],[220,13,14],[3395,14,19],[198,19,20],[198,20,21],[220,21,22],[1521,22,24],[220,24,25],[16,25,26],[17,26,27],[18,27,28]]"),
        ("café ｶﾀ 中文 |||IP_ADDRESS|||   [MASK] end", "[[1213,0,2],[69,2,3],[330,3,4],[220,4,5],[171,5,6],[121,5,6],[114,5,6],[171,6,7],[122,6,7],[222,6,7],[5192,7,9],[1101,9,10],[2130,10,12],[91,12,13],[91,13,14],[5358,14,16],[62,16,17],[2106,17,19],[35,19,20],[1223,20,22],[4727,22,24],[91,24,25],[91,25,26],[91,26,27],[220,27,28],[220,28,29],[427,29,31],[44,31,32],[2036,32,34],[42,34,35],[60,35,36],[3645,36,40]]"),
        ("a bc  abc é中<bos>x \t", "[[64,0,1],[308,1,3],[66,3,4],[220,4,5],[1533,5,8],[66,8,9],[710,9,11],[1537,11,12],[27,12,13],[65,13,14],[349,14,16],[29,16,17],[87,17,18],[220,18,19],[197,19,20]]"),
        (" leading  <|im_start|>user hi<think>", "[[666,0,3],[326,3,5],[401,5,8],[220,8,9],[220,9,10],[6001,10,22],[4129,22,26],[364,26,28],[72,28,29],[6024,29,36]]"),
    ]),
    ("embeddinggemma-tiny", &[
        ("Hello world's  test\n\n  x 123", "[[960,0,1],[280,1,3],[391,3,5],[346,5,7],[275,7,9],[680,9,11],[898,11,12],[865,12,13],[860,13,14],[276,14,16],[345,16,19],[18,19,20],[18,20,21],[860,21,22],[860,22,23],[919,23,24],[860,24,25],[951,25,26],[945,26,27],[1105,27,28]]"),
        ("café ｶﾀ 中文 |||IP_ADDRESS|||   [MASK] end", "[[822,0,2],[883,2,3],[920,3,4],[860,4,5],[247,5,6],[197,5,6],[190,5,6],[247,6,7],[198,6,7],[136,6,7],[860,7,8],[1388,8,9],[1231,9,10],[860,10,11],[1096,11,12],[1096,12,13],[1096,13,14],[904,14,15],[913,15,16],[926,16,17],[901,17,18],[922,18,19],[922,19,20],[828,20,22],[907,22,23],[907,23,24],[1096,24,25],[1096,25,26],[1096,26,27],[860,27,28],[860,28,29],[359,29,31],[924,31,32],[901,32,33],[907,33,34],[937,34,35],[940,35,36],[383,36,39],[870,39,40]]"),
        ("a bc  abc é中<bos>x \t", "[[862,0,1],[293,1,3],[873,3,4],[860,4,5],[277,5,7],[882,7,8],[873,8,9],[520,9,11],[1388,11,12],[2,12,17],[919,17,18],[860,18,19],[17,19,20]]"),
        (" leading  <|im_start|>user hi<think>", "[[497,0,3],[301,3,5],[342,5,8],[860,8,9],[438,9,11],[1096,11,12],[337,12,14],[926,14,15],[284,15,17],[779,17,20],[1096,20,21],[973,21,22],[328,22,24],[264,24,26],[324,26,28],[863,28,29],[977,29,30],[866,30,31],[879,31,32],[267,32,34],[875,34,35],[973,35,36]]"),
    ]),
];

/// Byte offsets (`encode_raw_with_offsets`) through NFC, `Replace`, `Split`
/// (regex and string), ByteLevel and byte fallback, and added tokens
/// (normalized and not, `lstrip`), against HF's (converted to characters as
/// its Python binding gives them).
#[test]
fn offsets_match_hf() {
    for (folder, rows) in HF_OFFSETS {
        let p = spec(folder, Layout::AsTransformers).build().unwrap();
        for (text, expect) in *rows {
            let expect: Vec<(u32, usize, usize)> = serde_json::from_str::<Vec<[u64; 3]>>(expect)
                .unwrap()
                .iter()
                .map(|r| (r[0] as u32, r[1] as usize, r[2] as usize))
                .collect();
            // Byte offset -> character index.
            let char_at = |b: usize| text[..b].chars().count();
            let got: Vec<(u32, usize, usize)> = p
                .encode_raw_with_offsets(text)
                .iter()
                .map(|s| {
                    let (a, b) = s.offsets.expect("every token has offsets");
                    (s.id, char_at(a), char_at(b))
                })
                .collect();
            assert_eq!(got, expect, "{folder}: {text:?}");
        }
    }
}

/// `Tokenizer::from_hf_dir`: the same ids as the pipeline, the template as the
/// frame, and the special tokens the folder declares (stand-ins where it
/// declares none).
#[test]
fn tokenizers_from_hf_folders() {
    use embedder::tokenizer::Tokenizer;
    for (folder, frame, pad, cls, sep) in [
        (
            "modernbert-tiny",
            (vec![5027], vec![5028]),
            5029,
            5027,
            5028,
        ),
        (
            "qwen3-embedding-tiny",
            (vec![], vec![6000]),
            6000,
            6000,
            6000,
        ),
        ("qwen3-reranker-tiny", (vec![], vec![]), 6000, 6000, 6002),
        ("embeddinggemma-tiny", (vec![2], vec![1]), 0, 2, 1),
    ] {
        let t = Tokenizer::from_hf_dir(arch_dir(folder), Layout::AsTransformers)
            .unwrap_or_else(|e| panic!("{folder}: {e}"));
        assert_eq!(t.single_frame(), frame, "{folder}");
        let sp = t.vocab().specials();
        assert_eq!((sp.pad, sp.cls, sp.sep), (pad, cls, sep), "{folder}");
        let text = "Hello world's  test <|im_start|> [MASK] <bos>";
        let p = spec(folder, Layout::AsTransformers).build().unwrap();
        assert_eq!(t.encode(text, None), p.encode(text, None), "{folder}");
        assert_eq!(t.encode(text, Some(5)), p.encode(text, Some(5)), "{folder}");
        assert_eq!(t.encode(text, Some(5)).len(), 5, "{folder}");
        // The file's decoder (ByteLevel; Gemma's Replace + ByteFallback + Fuse).
        let plain = "Hello  world's\n\t caf\u{e9} \u{4e2d}\u{6587} \u{1F600}";
        assert_eq!(t.decode(&t.encode(plain, None), true), plain, "{folder}");
    }
    let e = Tokenizer::from_hf_dir(arch_dir("no-such-folder"), Layout::AsTransformers).unwrap_err();
    assert!(e.message().contains("no tokenizer.json"), "{e}");
}

/// Tokenization speed on one thread (run by hand: `cargo test --release --test
/// it arch_tokenizers::speed -- --ignored --nocapture`): every text of the
/// cases file, 20 times over, `encode_raw` through the built pipeline (the
/// BPE word cache warm after the first pass, as in HF). Compare with
/// `bench/tokenizer_speed_hf.py` (HF `tokenizers`, `encode_batch` on one
/// thread, same texts).
#[test]
#[ignore]
fn speed() {
    for (folder, cases) in [
        (
            "modernbert-tiny",
            "architectures/modernbert_bpe_cases.jsonl",
        ),
        (
            "qwen3-embedding-tiny",
            "architectures/qwen3_bpe_cases.jsonl",
        ),
        (
            "embeddinggemma-tiny",
            "architectures/gemma_spm_bpe_cases.jsonl",
        ),
    ] {
        let p = spec(folder, Layout::AsTransformers).build().unwrap();
        let texts: Vec<String> = read_reference(cases).into_iter().map(|c| c.text).collect();
        let bytes: usize = texts.iter().map(String::len).sum();
        let mut ids = Vec::new();
        let mut best = f64::MAX;
        let mut n_ids = 0;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            n_ids = 0;
            for _ in 0..20 {
                for s in &texts {
                    ids.clear();
                    p.encode_raw(s, &mut ids);
                    n_ids += ids.len();
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        eprintln!(
            "{folder}: {:.1} MB/s, {:.2} M ids/s ({} texts x 20, {bytes} bytes each pass, best of 5)",
            (bytes * 20) as f64 / best / 1e6,
            n_ids as f64 / best / 1e6,
            texts.len()
        );
    }
}

/// A Gemma-size tokenizer (262,144 pieces: Gemma's specials and byte pieces,
/// then 261,880 merged pieces from mixed scripts, `▁` and digits, with a
/// merge each) in Gemma's layout: read from its `tokenizer.json` form, read
/// back from its stored form (what opening a model file does) and built over
/// the vocabulary's piece buffer. The pieces are held once; the BPE model
/// beyond them (token table, merges map, merge results) stays within 48
/// bytes a piece (about 43 measured); the
/// stored form opens in well under a second (printed; taken on a shared,
/// loaded machine).
#[test]
fn gemma_size_vocabulary_is_held_once() {
    use embedder::tokenizer::Tokenizer;
    use embedder::{SpecialIds, Vocab};
    use serde_json::{json, Map, Value};
    const N: usize = 262_144;
    let mut pieces: Vec<String> = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let alphabet: Vec<char> = "▁abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,'\
                               éèàüöäßçñ中文日本語한국어абвгдежзийклмнопрстуфхцчшщыэюяαβγδεζηθικλμνξοπρστυφχψω\
                               ابتثجحخدذرزسشصضطظعغفقكلمنهوي"
        .chars()
        .collect();
    let base = pieces.len();
    pieces.extend(alphabet.iter().map(|c| c.to_string()));
    let mut seen: std::collections::HashSet<String> = pieces.iter().cloned().collect();
    let mut merges: Vec<(usize, usize)> = Vec::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    while pieces.len() < N {
        // Mostly short pieces on the left, so words grow as in a real vocabulary.
        let a = base + rnd(pieces.len() - base);
        let b = base + rnd((pieces.len() - base).min(4096));
        let joined = format!("{}{}", pieces[a], pieces[b]);
        if joined.chars().count() > 16 || !seen.insert(joined.clone()) {
            continue;
        }
        merges.push((a, b));
        pieces.push(joined);
    }
    let vocab: Map<String, Value> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), json!(i)))
        .collect();
    let mut j = read_json(arch_dir("embeddinggemma-tiny").join("tokenizer.json"));
    j["model"]["vocab"] = Value::Object(vocab);
    j["model"]["merges"] = Value::Array(
        merges
            .iter()
            .map(|&(a, b)| json!([pieces[a], pieces[b]]))
            .collect(),
    );
    j["added_tokens"] = Value::Array(
        j["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["id"].as_u64().unwrap() < 6)
            .cloned()
            .collect(),
    );
    let cfg = read_json(arch_dir("embeddinggemma-tiny").join("tokenizer_config.json"));
    let spec = TokenizerSpec::from_hf_json(&j, Some(&cfg), Layout::AsTransformers).unwrap();
    assert_eq!(spec.pieces.len(), N);
    let specials = SpecialIds {
        pad: 0,
        unk: 3,
        cls: 2,
        sep: 1,
        mask: 4,
    };
    let settings = spec.settings_string();
    let mut best = f64::MAX;
    let mut tok = None;
    for _ in 0..3 {
        // What opening a model file does: the vocabulary's buffer, the stored
        // settings and merges.
        let vocab = Vocab::with_pieces(spec.pieces.clone(), specials).unwrap();
        let t0 = std::time::Instant::now();
        let stored = TokenizerSpec::from_parts(
            spec.kind,
            vocab.pieces().clone(),
            spec.scores.clone(),
            spec.merges.clone(),
            Vec::new(),
            &settings,
        )
        .unwrap();
        let t = Tokenizer::from_spec(&stored, vocab).unwrap();
        best = best.min(t0.elapsed().as_secs_f64());
        tok = Some(t);
    }
    let t = tok.unwrap();
    let piece_bytes = spec.pieces.heap_bytes();
    let total = t.heap_bytes();
    eprintln!(
        "gemma-size vocabulary: {N} pieces, {} merges; open from the stored form {:.0} ms \
         (best of 3, loaded machine); heap {:.1} MB = {:.1} MB of pieces + {:.1} MB beyond \
         ({:.1} bytes a piece)",
        merges.len(),
        best * 1e3,
        total as f64 / 1e6,
        piece_bytes as f64 / 1e6,
        (total - piece_bytes) as f64 / 1e6,
        (total - piece_bytes) as f64 / N as f64
    );
    assert!(total >= piece_bytes);
    assert!(
        total - piece_bytes < 48 * N,
        "{} bytes beyond the pieces",
        total - piece_bytes
    );
    assert!(best < 5.0, "open took {best} s");
    // It tokenizes: known pieces merge, unknown characters fall back to bytes.
    let ids = t.encode(&format!("{} ☃", pieces[N - 1].replace('▁', " ")), None);
    assert_eq!(ids.first(), Some(&2));
    assert_eq!(ids.last(), Some(&1));
    assert!(ids.contains(&(6 + 0xE2)), "{ids:?}");
}

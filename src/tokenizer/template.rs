//! Post-processing (special tokens around one or two sequences) and truncation,
//! as HF `tokenizers`: `TemplateProcessing`, `RobertaProcessing`,
//! `BertProcessing` (a `Sequence` with `ByteLevel`, which only moves offsets, is
//! accepted too), reduced to fixed ids before, between and after the sequences.

use serde_json::Value;

use super::normalizers::get_str;
use crate::error::{Error, Result};

/// Special ids with their type ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    /// Ids.
    pub ids: Vec<u32>,
    /// Type id of each.
    pub types: Vec<u32>,
}

impl Part {
    fn push(&mut self, ids: &[u32], ty: u32) {
        self.ids.extend_from_slice(ids);
        self.types.extend(std::iter::repeat_n(ty, ids.len()));
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// The reduced post-processor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Template {
    /// Single sequence: before `A`.
    pub single_prefix: Part,
    /// Type id of `A` alone.
    pub single_type: u32,
    /// Single sequence: after `A`.
    pub single_suffix: Part,
    /// Pair: before `A`.
    pub pair_prefix: Part,
    /// Type id of `A` in a pair.
    pub pair_type_a: u32,
    /// Pair: between `A` and `B`.
    pub pair_middle: Part,
    /// Type id of `B` in a pair.
    pub pair_type_b: u32,
    /// Pair: after `B`.
    pub pair_suffix: Part,
    /// HF's `trim_offsets` passes over a sequence's token offsets, in order
    /// (one per `RobertaProcessing` or `ByteLevel` processor that trims), each
    /// with its `add_prefix_space`.
    pub offset_trims: Vec<bool>,
}

fn id_pair(v: &Value, key: &str, path: &str, n_ids: usize) -> Result<u32> {
    let bad = || Error::model(format!("{path}.{key}: not a [token, id] pair"));
    let a = v.get(key).and_then(Value::as_array).ok_or_else(bad)?;
    let id = a.get(1).and_then(Value::as_u64).ok_or_else(bad)?;
    check_id(id, &format!("{path}.{key}"), n_ids)
}

/// The `trim_offsets` pass of a `RobertaProcessing` or `ByteLevel` processor
/// (both default to trimming, with `add_prefix_space`): `[add_prefix_space]`
/// when it trims, else nothing.
fn trims(v: &Value, path: &str) -> Result<Vec<bool>> {
    let trim = super::normalizers::get_bool(v, "trim_offsets", true, path)?;
    let aps = super::normalizers::get_bool(v, "add_prefix_space", true, path)?;
    Ok(if trim { vec![aps] } else { Vec::new() })
}

fn check_id(id: u64, what: &str, n_ids: usize) -> Result<u32> {
    if id >= n_ids as u64 {
        return Err(Error::model(format!(
            "{what}: id {id} is outside the {n_ids} tokens"
        )));
    }
    Ok(id as u32)
}

impl Template {
    /// No post-processor: no special tokens, `B` has type id 1.
    pub fn none() -> Template {
        Template {
            pair_type_b: 1,
            ..Template::default()
        }
    }

    /// Special tokens added to one sequence (`false`) or a pair (`true`).
    pub fn added(&self, pair: bool) -> usize {
        if pair {
            self.pair_prefix.len() + self.pair_middle.len() + self.pair_suffix.len()
        } else {
            self.single_prefix.len() + self.single_suffix.len()
        }
    }

    /// Builds the template from the HF JSON of a post-processor (`null`: none).
    /// Ids must be below `n_ids`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for a malformed processor or an
    /// id out of range; [`crate::ErrorKind::Unsupported`] for a processor type or
    /// template shape this pipeline does not run.
    pub fn from_json(v: &Value, n_ids: usize, path: &str) -> Result<Template> {
        if v.is_null() {
            return Ok(Template::none());
        }
        match get_str(v, "type", path)? {
            "TemplateProcessing" => Self::from_template(v, n_ids, path),
            "RobertaProcessing" | "BertProcessing" => {
                let roberta = v["type"] == "RobertaProcessing";
                let cls = id_pair(v, "cls", path, n_ids)?;
                let sep = id_pair(v, "sep", path, n_ids)?;
                let mut t = Template::default();
                if roberta {
                    t.offset_trims = trims(v, path)?;
                }
                t.single_prefix.push(&[cls], 0);
                t.single_suffix.push(&[sep], 0);
                t.pair_prefix.push(&[cls], 0);
                if roberta {
                    t.pair_middle.push(&[sep, sep], 0);
                    t.pair_suffix.push(&[sep], 0);
                } else {
                    t.pair_middle.push(&[sep], 0);
                    t.pair_suffix.push(&[sep], 1);
                    t.pair_type_b = 1;
                }
                Ok(t)
            }
            "ByteLevel" => Ok(Template {
                offset_trims: trims(v, path)?,
                ..Template::none()
            }),
            "Sequence" => {
                let list = v
                    .get("processors")
                    .and_then(Value::as_array)
                    .ok_or_else(|| Error::model(format!("{path}.processors: not a list")))?;
                let mut found: Option<Template> = None;
                let mut offset_trims = Vec::new();
                for (i, p) in list.iter().enumerate() {
                    let sub = format!("{path}.processors[{i}]");
                    if p.get("type").and_then(Value::as_str) == Some("ByteLevel") {
                        offset_trims.extend(trims(p, &sub)?);
                        continue;
                    }
                    if found.is_some() {
                        return Err(Error::unsupported(format!(
                            "{sub}: more than one processor that adds tokens"
                        )));
                    }
                    let t = Self::from_json(p, n_ids, &sub)?;
                    offset_trims.extend_from_slice(&t.offset_trims);
                    found = Some(t);
                }
                let mut t = found.unwrap_or_else(Template::none);
                t.offset_trims = offset_trims;
                Ok(t)
            }
            other => Err(Error::unsupported(format!(
                "{path}: post-processor type {other:?} is not supported"
            ))),
        }
    }

    fn from_template(v: &Value, n_ids: usize, path: &str) -> Result<Template> {
        let specials = v.get("special_tokens").and_then(Value::as_object);
        let lookup = |name: &str, at: &str| -> Result<Vec<u32>> {
            let e = specials.and_then(|m| m.get(name)).ok_or_else(|| {
                Error::model(format!(
                    "{at}: special token {name:?} is not in special_tokens"
                ))
            })?;
            let ids = e.get("ids").and_then(Value::as_array).ok_or_else(|| {
                Error::model(format!("{path}.special_tokens.{name}.ids: not a list"))
            })?;
            ids.iter()
                .map(|x| {
                    let id = x.as_u64().ok_or_else(|| {
                        Error::model(format!("{path}.special_tokens.{name}.ids: not an id"))
                    })?;
                    check_id(id, &format!("{path}.special_tokens.{name}"), n_ids)
                })
                .collect()
        };
        // Returns the parts around the sequences and their type ids.
        let parse = |key: &str, want: &[&str]| -> Result<(Vec<Part>, Vec<u32>)> {
            let at = format!("{path}.{key}");
            let items = v
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| Error::model(format!("{at}: not a list")))?;
            let mut parts = vec![Part::default()];
            let mut seqs = Vec::new();
            let mut types = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let ia = format!("{at}[{i}]");
                let ty = |x: &Value| -> Result<u32> {
                    let t = x.get("type_id").and_then(Value::as_u64).unwrap_or(0);
                    u32::try_from(t)
                        .map_err(|_| Error::model(format!("{ia}.type_id: {t} is too large")))
                };
                if let Some(s) = item.get("SpecialToken") {
                    let name = get_str(s, "id", &ia)?;
                    let ids = lookup(name, &ia)?;
                    parts.last_mut().expect("non-empty").push(&ids, ty(s)?);
                } else if let Some(s) = item.get("Sequence") {
                    let id = get_str(s, "id", &ia)?;
                    seqs.push(id.to_string());
                    types.push(ty(s)?);
                    parts.push(Part::default());
                } else {
                    return Err(Error::model(format!(
                        "{ia}: neither a SpecialToken nor a Sequence"
                    )));
                }
            }
            if seqs != want {
                return Err(Error::unsupported(format!(
                    "{at}: sequences {seqs:?}, only {want:?} in this order is supported"
                )));
            }
            Ok((parts, types))
        };
        let (mut single, st) = parse("single", &["A"])?;
        let (mut pair, pt) = parse("pair", &["A", "B"])?;
        Ok(Template {
            single_suffix: single.pop().unwrap_or_default(),
            single_prefix: single.pop().unwrap_or_default(),
            single_type: st[0],
            pair_suffix: pair.pop().unwrap_or_default(),
            pair_middle: pair.pop().unwrap_or_default(),
            pair_prefix: pair.pop().unwrap_or_default(),
            pair_type_a: pt[0],
            pair_type_b: pt[1],
            offset_trims: Vec::new(),
        })
    }

    /// HF `longest_first` truncation of a pair to `max` ids in all: the kept
    /// lengths of `A` and `B`.
    pub fn longest_first(n1: usize, n2: usize, max: usize) -> (usize, usize) {
        if n1 + n2 <= max {
            return (n1, n2);
        }
        if max == 0 {
            return (0, 0);
        }
        let swap = n1 > n2;
        // HF: the shorter length, and the longer one's budget.
        let mut a = n1.min(n2);
        let mut b = if a > max { a } else { a.max(max - a) };
        if a + b > max {
            a = max / 2;
            b = a + max % 2;
        }
        let (a, b) = if swap { (b, a) } else { (a, b) };
        (a.min(n1), b.min(n2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn xlmr() -> Value {
        json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "</s>", "type_id": 1}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]},
                               "<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}})
    }

    #[test]
    fn template_reduces_to_parts() {
        let t = Template::from_json(&xlmr(), 10, "post_processor").unwrap();
        assert_eq!(t.single_prefix.ids, [0]);
        assert_eq!(t.single_suffix.ids, [2]);
        assert_eq!(t.pair_middle.ids, [2, 2]);
        assert_eq!(t.pair_suffix.ids, [2]);
        assert_eq!(t.pair_suffix.types, [1]);
        assert_eq!((t.pair_type_a, t.pair_type_b), (0, 1));
        assert_eq!((t.added(false), t.added(true)), (2, 4));
        let e = Template::from_json(&xlmr(), 2, "post_processor").unwrap_err();
        assert!(
            e.message().contains("post_processor.special_tokens.</s>"),
            "{e}"
        );
    }

    #[test]
    fn roberta_and_bert_processing() {
        let r = json!({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                       "trim_offsets": true, "add_prefix_space": true});
        let t = Template::from_json(&r, 5, "p").unwrap();
        assert_eq!(t.pair_middle.ids, [2, 2]);
        assert_eq!(t.pair_type_b, 0);
        let b = json!({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]});
        let t = Template::from_json(&b, 5, "p").unwrap();
        assert_eq!(
            (t.pair_middle.ids.clone(), t.pair_suffix.types.clone()),
            (vec![3], vec![1])
        );
        let seq = json!({"type": "Sequence", "processors": [{"type": "ByteLevel"}, r]});
        assert_eq!(
            Template::from_json(&seq, 5, "p").unwrap().single_prefix.ids,
            [0]
        );
        assert_eq!(
            Template::from_json(&Value::Null, 5, "p").unwrap(),
            Template::none()
        );
    }

    #[test]
    fn longest_first_like_hf() {
        // Hand-derived from HF's rules (n1 <= n2 after a swap):
        // n1 + n2 <= max: unchanged.
        assert_eq!(Template::longest_first(3, 4, 10), (3, 4));
        // Only the longer one is cut: n2 = max - n1.
        assert_eq!(Template::longest_first(3, 20, 10), (3, 7));
        assert_eq!(Template::longest_first(20, 3, 10), (7, 3));
        // Both cut: max / 2 and max / 2 + max % 2 (the second sequence gets the
        // extra one unless swapped).
        assert_eq!(Template::longest_first(8, 9, 11), (5, 6));
        assert_eq!(Template::longest_first(9, 8, 11), (6, 5));
        assert_eq!(Template::longest_first(6, 6, 10), (5, 5));
        // n1 > max: both halves.
        assert_eq!(Template::longest_first(12, 13, 10), (5, 5));
        assert_eq!(Template::longest_first(5, 5, 0), (0, 0));
    }
}

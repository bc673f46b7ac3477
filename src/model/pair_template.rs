//! The prompt template of an LLM reranker (Qwen3-Reranker as a
//! sentence-transformers 6 `CrossEncoder`): a pair becomes the messages
//! `query` and `document` (and the CrossEncoder prompt a `system` message,
//! the instruction), rendered by the folder's chat template with the
//! generation prompt, tokenized whole; the score is read at the last token.
//!
//! A chat template is a Jinja program. This module reads the one shape
//! such rerankers ship, and refuses every other construct by name:
//!
//! ```jinja
//! {%- set instruction = messages | selectattr("role", "eq", "system") | map(attribute="content") | first | default("...") -%}
//! {%- set query = messages | selectattr("role", "eq", "query") | map(attribute="content") | first -%}
//! {%- set document = messages | selectattr("role", "eq", "document") | map(attribute="content") | first -%}
//! <|im_start|>system ... <Instruct>: {{ instruction }} <Query>: {{ query }} <Document>: {{ document }}<|im_end|> ... {{ "\n\n" }}
//! ```
//!
//! with Jinja's whitespace control (`{%-`, `-%}`, `{{-`, `-}}`), the
//! `trim_blocks` / `lstrip_blocks` transformers renders chat templates with,
//! and the removal of one trailing newline. The result is a list of
//! [`Piece`]s stored in the model file (metadata [`KEY`], JSON).
//!
//! Truncation, as sentence-transformers 6.2 does it for such a model: the
//! rendered text is tokenized; when it has more than `max` ids, it is cut
//! inside (the document's end goes first) and the template's tail (what
//! follows the document) is restored, so that the last ids are always the
//! generation prompt's.

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// Metadata key: the template as JSON ([`PairTemplate::to_json`]).
pub const KEY: &str = "pair_template";

/// What a message slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The instruction (the `system` message: the CrossEncoder prompt, or
    /// the template's default).
    Instruction,
    /// The query (the pair's first text).
    Query,
    /// The document (the pair's second text).
    Document,
}

impl Slot {
    fn name(self) -> &'static str {
        match self {
            Slot::Instruction => "instruction",
            Slot::Query => "query",
            Slot::Document => "document",
        }
    }

    fn from_role(role: &str) -> Option<Slot> {
        match role {
            "system" => Some(Slot::Instruction),
            "query" => Some(Slot::Query),
            "document" => Some(Slot::Document),
            _ => None,
        }
    }

    fn from_name(name: &str) -> Option<Slot> {
        [Slot::Instruction, Slot::Query, Slot::Document]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// A piece of the rendered text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A message's content.
    Slot(Slot),
}

/// A reranker's prompt template: the text before the document (with the
/// instruction and the query), the document, the tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairTemplate {
    pieces: Vec<Piece>,
    /// The instruction when the call gives none.
    pub default_instruction: String,
}

fn bad(why: impl std::fmt::Display) -> Error {
    Error::unsupported(format!("chat template: {why}"))
}

/// Reads a Jinja string literal at the start of `s` (`"..."` or `'...'`
/// with backslash escapes); returns it and the rest.
fn string_literal(s: &str) -> Result<(String, &str)> {
    let mut chars = s.char_indices();
    let quote = match chars.next() {
        Some((_, q @ ('"' | '\''))) => q,
        _ => return Err(bad(format!("expected a string literal at {:?}", head(s)))),
    };
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, c @ ('\\' | '"' | '\''))) => out.push(c),
                other => {
                    return Err(bad(format!(
                        "escape \\{} is not supported",
                        other.map_or(' ', |(_, c)| c)
                    )))
                }
            },
            c if c == quote => return Ok((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    Err(bad("unterminated string literal"))
}

/// The first characters of `s`, for messages.
fn head(s: &str) -> String {
    s.chars().take(40).collect()
}

/// `messages | selectattr("role", "eq", "R") | map(attribute="content") |
/// first [| default("D")]`: the role and the default.
fn parse_select(expr: &str) -> Result<(Slot, Option<String>)> {
    let compact: String = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    let rest = compact
        .strip_prefix("messages | selectattr(")
        .ok_or_else(|| bad(format!("unsupported expression {:?}", head(expr))))?;
    let (a, rest) = string_literal(rest)?;
    let rest = rest.trim_start().strip_prefix(',').map(str::trim_start);
    let rest = rest.ok_or_else(|| bad("selectattr arguments"))?;
    let (op, rest) = string_literal(rest)?;
    let rest = rest.trim_start().strip_prefix(',').map(str::trim_start);
    let rest = rest.ok_or_else(|| bad("selectattr arguments"))?;
    let (role, rest) = string_literal(rest)?;
    if a != "role" || (op != "eq" && op != "equalto") {
        return Err(bad("selectattr must select on role equality"));
    }
    let slot = Slot::from_role(&role)
        .ok_or_else(|| bad(format!("role {role:?} is not system, query or document")))?;
    let rest = rest
        .trim_start()
        .strip_prefix(") | map(attribute=")
        .ok_or_else(|| bad("expected map(attribute=\"content\")"))?;
    let (attr, rest) = string_literal(rest)?;
    if attr != "content" {
        return Err(bad("expected map(attribute=\"content\")"));
    }
    let rest = rest
        .trim_start()
        .strip_prefix(") | first")
        .ok_or_else(|| bad("expected | first"))?
        .trim();
    if rest.is_empty() {
        return Ok((slot, None));
    }
    let rest = rest
        .strip_prefix("| default(")
        .ok_or_else(|| bad(format!("unsupported filter {:?}", head(rest))))?;
    let (d, rest) = string_literal(rest)?;
    if rest.trim() != ")" {
        return Err(bad(format!("unsupported filter {:?}", head(rest))));
    }
    Ok((slot, Some(d)))
}

impl PairTemplate {
    /// Reads a chat template (see the module docs).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] naming the first construct that is
    /// not this shape; a template without a query and a document slot.
    pub fn from_jinja(src: &str) -> Result<PairTemplate> {
        // Jinja drops one trailing newline.
        let src = src.strip_suffix('\n').unwrap_or(src);
        let mut pieces: Vec<Piece> = Vec::new();
        let mut vars: Vec<(String, Slot)> = Vec::new();
        let mut default_instruction = None;
        let mut rest = src;
        // Whitespace control: strip the start of the next text (`-%}`,
        // `-}}`, or trim_blocks' one newline after `%}`).
        let mut strip_next = false;
        let mut trim_newline = false;
        while !rest.is_empty() {
            let next = ["{{", "{%", "{#"]
                .iter()
                .filter_map(|t| rest.find(t))
                .min()
                .unwrap_or(rest.len());
            let mut text = &rest[..next];
            if strip_next {
                text = text.trim_start();
            } else if trim_newline {
                text = text.strip_prefix('\n').unwrap_or(text);
            }
            strip_next = false;
            trim_newline = false;
            rest = &rest[next..];
            let tag = if rest.is_empty() { "" } else { &rest[..2] };
            let lstrip = rest.get(2..3) == Some("-");
            let mut text = text.to_string();
            if lstrip {
                text.truncate(text.trim_end().len());
            } else if tag == "{%" {
                // lstrip_blocks: spaces and tabs before a block tag at the
                // start of a line.
                let kept = text.trim_end_matches([' ', '\t']).len();
                if kept == 0 || text[..kept].ends_with('\n') {
                    text.truncate(kept);
                }
            }
            if !text.is_empty() {
                match pieces.last_mut() {
                    Some(Piece::Text(t)) => t.push_str(&text),
                    _ => pieces.push(Piece::Text(text)),
                }
            }
            if rest.is_empty() {
                break;
            }
            let close = match tag {
                "{{" => "}}",
                "{%" => "%}",
                _ => "#}",
            };
            let end = rest
                .find(close)
                .ok_or_else(|| bad(format!("unterminated {tag}")))?;
            let mut body = &rest[2..end];
            if let Some(b) = body.strip_prefix('-') {
                body = b;
            }
            if let Some(b) = body.strip_suffix('-') {
                body = b;
                strip_next = true;
            }
            rest = &rest[end + 2..];
            let body = body.trim();
            match tag {
                "{#" => trim_newline = true,
                "{%" => {
                    trim_newline = true;
                    let assign = body.strip_prefix("set ").ok_or_else(|| {
                        bad(format!("statement {:?} is not supported", head(body)))
                    })?;
                    let (name, expr) = assign
                        .split_once('=')
                        .ok_or_else(|| bad(format!("statement {:?}", head(body))))?;
                    let (slot, default) = parse_select(expr)?;
                    if let Some(d) = default {
                        if slot != Slot::Instruction {
                            return Err(bad("only the instruction may have a default"));
                        }
                        default_instruction = Some(d);
                    }
                    vars.push((name.trim().to_string(), slot));
                }
                _ => {
                    if body.starts_with('"') || body.starts_with('\'') {
                        let (lit, after) = string_literal(body)?;
                        if !after.trim().is_empty() {
                            return Err(bad(format!("expression {:?}", head(body))));
                        }
                        match pieces.last_mut() {
                            Some(Piece::Text(t)) => t.push_str(&lit),
                            _ => pieces.push(Piece::Text(lit)),
                        }
                    } else {
                        let slot = vars
                            .iter()
                            .find(|(n, _)| n == body)
                            .map(|(_, s)| *s)
                            .ok_or_else(|| bad(format!("expression {:?}", head(body))))?;
                        pieces.push(Piece::Slot(slot));
                    }
                }
            }
        }
        PairTemplate::new(pieces, default_instruction.unwrap_or_default())
    }

    /// A template from its pieces.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] without exactly one query slot and
    /// one document slot, the document after the query.
    pub fn new(pieces: Vec<Piece>, default_instruction: String) -> Result<PairTemplate> {
        let at = |s: Slot| {
            let v: Vec<usize> = (0..pieces.len())
                .filter(|&i| pieces[i] == Piece::Slot(s))
                .collect();
            v
        };
        match (&at(Slot::Query)[..], &at(Slot::Document)[..]) {
            ([q], [d]) if q < d => {}
            _ => {
                return Err(bad(
                    "a reranker template needs one query and then one document",
                ))
            }
        }
        Ok(PairTemplate {
            pieces,
            default_instruction,
        })
    }

    /// The text before the document, with `instruction` (`None`: the
    /// default) and `query` in place, and the text after it.
    pub fn render(&self, instruction: Option<&str>, query: &str) -> (String, String) {
        let (mut head, mut tail) = (String::new(), String::new());
        let mut after = false;
        for p in &self.pieces {
            let out = if after { &mut tail } else { &mut head };
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Slot(Slot::Instruction) => {
                    out.push_str(instruction.unwrap_or(&self.default_instruction))
                }
                Piece::Slot(Slot::Query) => out.push_str(query),
                Piece::Slot(Slot::Document) => after = true,
            }
        }
        (head, tail)
    }

    /// The template as stored in a model file.
    pub fn to_json(&self) -> String {
        let pieces: Vec<Value> = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => json!({ "text": t }),
                Piece::Slot(s) => json!({ "slot": s.name() }),
            })
            .collect();
        json!({ "pieces": pieces, "default_instruction": self.default_instruction }).to_string()
    }

    /// Reads [`PairTemplate::to_json`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] for malformed JSON, named.
    pub fn from_json(s: &str) -> Result<PairTemplate> {
        let err = |why: &str| Error::model(format!("metadata '{KEY}': {why}"));
        let v: Value = serde_json::from_str(s).map_err(|e| err(&format!("not JSON ({e})")))?;
        let list = v
            .get("pieces")
            .and_then(Value::as_array)
            .ok_or_else(|| err("no 'pieces' list"))?;
        let pieces = list
            .iter()
            .map(|p| {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    return Ok(Piece::Text(t.to_string()));
                }
                p.get("slot")
                    .and_then(Value::as_str)
                    .and_then(Slot::from_name)
                    .map(Piece::Slot)
                    .ok_or_else(|| err("a piece is neither text nor a known slot"))
            })
            .collect::<Result<Vec<_>>>()?;
        let default_instruction = v
            .get("default_instruction")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        PairTemplate::new(pieces, default_instruction).map_err(|e| err(&e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN: &str = "{%- set instruction = messages | selectattr(\"role\", \"eq\", \"system\") | map(attribute=\"content\") | first | default(\"Given a query\") -%}\n{%- set query = messages | selectattr(\"role\", \"eq\", \"query\") | map(attribute=\"content\") | first -%}\n{%- set document = messages | selectattr(\"role\", \"eq\", \"document\") | map(attribute=\"content\") | first -%}\n<|im_start|>system\nJudge.<|im_end|>\n<|im_start|>user\n<Instruct>: {{ instruction }}\n<Query>: {{ query }}\n<Document>: {{ document }}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>{{ \"\\n\\n\" }}\n";

    #[test]
    fn reads_the_qwen3_reranker_template() {
        let t = PairTemplate::from_jinja(QWEN).unwrap();
        assert_eq!(t.default_instruction, "Given a query");
        let (h, tail) = t.render(None, "Q?");
        assert_eq!(
            h,
            "<|im_start|>system\nJudge.<|im_end|>\n<|im_start|>user\n<Instruct>: Given a query\n<Query>: Q?\n<Document>: "
        );
        assert_eq!(
            tail,
            "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        let (h2, _) = t.render(Some("Find it"), "Q?");
        assert!(h2.contains("<Instruct>: Find it\n"));
        assert_eq!(PairTemplate::from_json(&t.to_json()).unwrap(), t);
    }

    #[test]
    fn refuses_other_constructs_by_name() {
        for (src, want) in [
            ("{% for m in messages %}{{ m.content }}{% endfor %}", "statement"),
            ("{{ query }}", "expression"),
            ("{%- set query = messages | selectattr(\"role\", \"eq\", \"user\") | map(attribute=\"content\") | first -%}", "role"),
            ("{{ \"abc", "unterminated"),
            ("text only", "one query and then one document"),
        ] {
            let e = PairTemplate::from_jinja(src).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
        assert!(PairTemplate::from_json("{").is_err());
        assert!(PairTemplate::from_json("{\"pieces\": [{\"slot\": \"x\"}]}").is_err());
    }
}

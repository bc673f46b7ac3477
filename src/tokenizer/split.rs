//! HF `tokenizers`' `Split` pre-tokenizer: cut a piece at the matches of a
//! pattern, keeping, dropping or merging the matches as `behavior` says.
//!
//! HF compiles the pattern with Oniguruma (a `String` pattern is escaped into
//! one). The patterns real `tokenizer.json` files carry (Qwen2/Qwen3's,
//! cl100k/Llama-3's, Gemma's `" "`) use look-ahead (`\s+(?!\S)`) and
//! case-insensitive groups (`(?i:'s|'t|...)`), which the `regex` crate does not
//! run; this module has its own matcher for the subset of Oniguruma's syntax
//! they use, with Oniguruma's (backtracking, leftmost-first) semantics:
//!
//! - alternation, groups `(..)` `(?:..)` `(?i:..)` `(?-i:..)`, the flag `(?i)`;
//! - quantifiers `?` `*` `+` `{n}` `{n,}` `{n,m}`, greedy or lazy (`??`, ...);
//! - literal characters and escapes (`\t \n \r \f \v \a \e`, `\xHH`, `\x{H..}`,
//!   an escaped punctuation character), `.` (any character but `\n`);
//! - the classes `\s` `\S` (the White_Space property), `\p{L}` `\P{L}`
//!   (`Letter`), `\p{N}` `\P{N}` (`Number`), over the Unicode 16.0 tables of
//!   HF's Oniguruma build (`byte_level_tables`), and bracket classes of them,
//!   of characters and of ranges, negated or not;
//! - look-ahead `(?=C)` / `(?!C)` of one character class `C`.
//!
//! Anything else (look-behind, anchors, back-references, `\d`, `\w`, other
//! Unicode properties, possessive quantifiers, nested bracket classes, a
//! case-insensitive non-ASCII letter) is refused by name when the tokenizer is
//! built, never run differently. Case-insensitive ASCII letters match their
//! other case and the non-ASCII characters Unicode folds to them (`ſ` for `s`,
//! the Kelvin sign for `k`), as Oniguruma does.
//!
//! The matcher is a Pike VM (a breadth-first simulation of the backtracking
//! order): each search costs at most the text's length times the pattern's
//! size, whatever the pattern (no exponential backtracking on a hostile file).
//! For the real patterns every thread dies at the end of its match, so a
//! whole text costs time linear in its length; a pattern such as `a*b|a` can
//! rescan the rest of the text at each match (quadratic, as in Oniguruma).

use std::cell::RefCell;
use std::ops::Range;

use serde_json::Value;

use super::byte_level::{class_of, LETTER, NUMBER, SPACE};
use crate::error::{Error, Result};

/// What `Split` does with the matches (HF's `SplitDelimiterBehavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// Matches are dropped.
    Removed,
    /// Matches are pieces of their own.
    Isolated,
    /// A match joins the piece before it.
    MergedWithPrevious,
    /// A match joins the piece after it.
    MergedWithNext,
    /// Consecutive matches are one piece.
    Contiguous,
}

impl Behavior {
    /// HF's name.
    pub fn name(self) -> &'static str {
        match self {
            Behavior::Removed => "Removed",
            Behavior::Isolated => "Isolated",
            Behavior::MergedWithPrevious => "MergedWithPrevious",
            Behavior::MergedWithNext => "MergedWithNext",
            Behavior::Contiguous => "Contiguous",
        }
    }

    fn from_name(s: &str) -> Option<Behavior> {
        [
            Behavior::Removed,
            Behavior::Isolated,
            Behavior::MergedWithPrevious,
            Behavior::MergedWithNext,
            Behavior::Contiguous,
        ]
        .into_iter()
        .find(|b| b.name() == s)
    }
}

/// The compiled pattern.
#[derive(Debug, Clone)]
enum Matcher {
    /// A non-empty literal string.
    Literal(Box<str>),
    /// A regular expression (or the empty string).
    Regex(Box<Program>),
}

/// HF's `Split` pre-tokenizer.
#[derive(Debug, Clone)]
pub struct Split {
    /// The pattern as the file gives it: `true` for `Regex`, `false` for `String`.
    is_regex: bool,
    source: Box<str>,
    matcher: Matcher,
    /// What to do with the matches.
    pub behavior: Behavior,
    /// Matches and the text between them trade places.
    pub invert: bool,
}

impl PartialEq for Split {
    fn eq(&self, o: &Split) -> bool {
        self.is_regex == o.is_regex
            && self.source == o.source
            && self.behavior == o.behavior
            && self.invert == o.invert
    }
}

impl Split {
    /// From the HF JSON of a `Split` pre-tokenizer (`path` names it in errors).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for a missing or malformed
    /// field; [`crate::ErrorKind::Unsupported`] for an unknown behavior or a
    /// pattern this matcher does not run (naming the construct).
    pub fn from_json(v: &Value, path: &str) -> Result<Split> {
        let p = v.get("pattern").and_then(Value::as_object).ok_or_else(|| {
            Error::model(format!(
                "{path}.pattern: missing or not an object with a String or Regex field"
            ))
        })?;
        let (is_regex, source) = match (p.get("String"), p.get("Regex")) {
            (Some(s), None) => (false, s),
            (None, Some(s)) => (true, s),
            _ => {
                return Err(Error::model(format!(
                    "{path}.pattern: not exactly one of String and Regex"
                )))
            }
        };
        let source = source
            .as_str()
            .ok_or_else(|| Error::model(format!("{path}.pattern: the pattern is not a string")))?;
        let behavior = match v.get("behavior") {
            Some(Value::String(s)) => Behavior::from_name(s).ok_or_else(|| {
                Error::unsupported(format!(
                    "{path}.behavior: {s:?} is not supported (Removed, Isolated, \
                     MergedWithPrevious, MergedWithNext, Contiguous)"
                ))
            })?,
            _ => {
                return Err(Error::model(format!(
                    "{path}.behavior: missing or not a string"
                )))
            }
        };
        let invert = super::normalizers::get_bool(v, "invert", false, path)?;
        Split::new(source, is_regex, behavior, invert)
            .map_err(|e| e.context(format!("{path}.pattern")))
    }

    /// A `Split` on `source` (a regular expression when `is_regex`, else a
    /// literal string).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] for a pattern this matcher does not
    /// run, naming the construct.
    pub fn new(source: &str, is_regex: bool, behavior: Behavior, invert: bool) -> Result<Split> {
        let matcher = if !is_regex && !source.is_empty() {
            Matcher::Literal(source.into())
        } else {
            Matcher::Regex(Box::new(Program::compile(source)?))
        };
        Ok(Split {
            is_regex,
            source: source.into(),
            matcher,
            behavior,
            invert,
        })
    }

    /// The HF JSON of this pre-tokenizer.
    pub fn to_json(&self) -> Value {
        let key = if self.is_regex { "Regex" } else { "String" };
        serde_json::json!({
            "type": "Split",
            "pattern": {key: &*self.source},
            "behavior": self.behavior.name(),
            "invert": self.invert,
        })
    }

    /// Calls `f` with the byte range of each match of the pattern in `text`,
    /// in order, as Oniguruma's `find_iter` yields them (an empty match right
    /// after the previous match is skipped).
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize)) {
        match &self.matcher {
            Matcher::Literal(lit) => {
                for (i, _) in text.match_indices(&**lit) {
                    f(i, i + lit.len());
                }
            }
            Matcher::Regex(prog) => VM.with(|cell| match cell.try_borrow_mut() {
                Ok(mut vm) => prog.find_iter(text, &mut vm, &mut f),
                Err(_) => prog.find_iter(text, &mut Vm::default(), &mut f),
            }),
        }
    }

    /// Calls `f` with the byte range of each piece of `text` (never empty), as
    /// HF's `NormalizedString::split` cuts it and `PreTokenizedString` keeps
    /// the non-empty pieces.
    pub fn for_each_piece(&self, text: &str, mut f: impl FnMut(Range<usize>)) {
        let mut emit = |r: Range<usize>| {
            if r.start < r.end {
                f(r);
            }
        };
        // The pending piece of the merging behaviors: (range, is_match).
        let mut pending: Option<(Range<usize>, bool)> = None;
        let behavior = self.behavior;
        let invert = self.invert;
        let mut element = |r: Range<usize>, is_match: bool| {
            let is_match = is_match != invert;
            match behavior {
                Behavior::Isolated => emit(r),
                Behavior::Removed => {
                    if !is_match {
                        emit(r)
                    }
                }
                Behavior::MergedWithPrevious => match pending.take() {
                    // A match joins the piece before it unless that piece is a
                    // match too.
                    Some((p, false)) if is_match => pending = Some((p.start..r.end, true)),
                    Some((p, _)) => {
                        emit(p);
                        pending = Some((r, is_match));
                    }
                    None => pending = Some((r, is_match)),
                },
                Behavior::MergedWithNext => match pending.take() {
                    // A pending match joins the piece after it unless that
                    // piece is a match too.
                    Some((p, true)) if !is_match => emit(p.start..r.end),
                    Some((p, _)) => {
                        emit(p);
                        pending = Some((r, is_match));
                    }
                    None if is_match => pending = Some((r, true)),
                    None => emit(r),
                },
                Behavior::Contiguous => match pending.take() {
                    Some((p, m)) if m == is_match => pending = Some((p.start..r.end, m)),
                    Some((p, _)) => {
                        emit(p);
                        pending = Some((r, is_match));
                    }
                    None => pending = Some((r, is_match)),
                },
            }
        };
        let mut prev = 0;
        self.for_each_match(text, |s, e| {
            if prev != s {
                element(prev..s, false);
            }
            element(s..e, true);
            prev = e;
        });
        if prev != text.len() {
            element(prev..text.len(), false);
        }
        if let Some((p, _)) = pending {
            emit(p);
        }
    }
}

// ---------------------------------------------------------------------------
// The pattern: parser

/// A set of characters.
#[derive(Debug, Clone, Default)]
struct Class {
    /// Complemented.
    negated: bool,
    /// Bit `k` set: every character of split class `k` (`LETTER`, ...).
    cats: u8,
    /// Character ranges (inclusive).
    ranges: Vec<(char, char)>,
    /// The answer for each ASCII character, precomputed.
    ascii: u128,
}

impl Class {
    fn finish(mut self) -> Class {
        let mut ascii = 0u128;
        for b in 0u8..128 {
            if self.slow(b as char) {
                ascii |= 1u128 << b;
            }
        }
        self.ascii = ascii;
        self
    }

    fn slow(&self, c: char) -> bool {
        let in_set = self.cats & (1 << class_of(c)) != 0
            || self.ranges.iter().any(|&(a, b)| a <= c && c <= b);
        in_set != self.negated
    }

    #[inline]
    fn matches(&self, c: char) -> bool {
        if (c as u32) < 128 {
            return (self.ascii >> (c as u32)) & 1 != 0;
        }
        self.slow(c)
    }
}

#[derive(Debug)]
enum Node {
    Empty,
    Class(Class),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    /// Look-ahead of one character: `(?=C)` (`negate` false) or `(?!C)`.
    Look {
        class: Class,
        negate: bool,
    },
}

/// Nesting limit of groups (bounds the parser's recursion).
const MAX_DEPTH: usize = 32;
/// Limit of a counted repetition's bounds.
const MAX_COUNT: u32 = 100;
/// Limit of the compiled program's instructions.
const MAX_INSTS: usize = 10_000;

struct Parser<'a> {
    src: &'a str,
    chars: Vec<char>,
    pos: usize,
}

fn unsupported(src: &str, what: impl std::fmt::Display) -> Error {
    Error::unsupported(format!("regex {src:?}: {what} is not supported"))
}

fn bad(src: &str, what: impl std::fmt::Display) -> Error {
    Error::model(format!("regex {src:?}: {what}"))
}

/// The other-case characters Oniguruma's case folding gives an ASCII letter.
fn fold_ascii(c: char, out: &mut Vec<(char, char)>) {
    let l = c.to_ascii_lowercase();
    let u = c.to_ascii_uppercase();
    out.push((l, l));
    out.push((u, u));
    match l {
        's' => out.push(('\u{17F}', '\u{17F}')),
        'k' => out.push(('\u{212A}', '\u{212A}')),
        _ => {}
    }
}

/// Whether `c` has another case (so a case-insensitive match would differ).
fn has_case(c: char) -> bool {
    let mut l = c.to_lowercase();
    let mut u = c.to_uppercase();
    !(l.next() == Some(c) && l.next().is_none() && u.next() == Some(c) && u.next().is_none())
        || matches!(c, '\u{17F}' | '\u{212A}')
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn next(&mut self) -> Result<char> {
        let c = self
            .peek()
            .ok_or_else(|| bad(self.src, "unexpected end of the pattern"))?;
        self.pos += 1;
        Ok(c)
    }

    fn alt(&mut self, ci: bool, depth: usize) -> Result<Node> {
        if depth > MAX_DEPTH {
            return Err(unsupported(self.src, "nesting deeper than 32 groups"));
        }
        let mut branches = vec![self.concat(ci, depth)?];
        while self.eat('|') {
            branches.push(self.concat(ci, depth)?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self, mut ci: bool, depth: usize) -> Result<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            // The inline flags `(?i)` / `(?-i)`: to the end of the group.
            let rest: String = self.chars[self.pos..].iter().take(5).collect();
            if rest.starts_with("(?i)") {
                self.pos += 4;
                ci = true;
                continue;
            }
            if rest.starts_with("(?-i)") {
                self.pos += 5;
                ci = false;
                continue;
            }
            let atom = self.atom(ci, depth)?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().unwrap_or(Node::Empty),
            _ => Node::Concat(items),
        })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        let mut n: u32 = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            n = n.saturating_mul(10).saturating_add(d);
            self.pos += 1;
        }
        (self.pos > start).then_some(n)
    }

    fn quantified(&mut self, atom: Node) -> Result<Node> {
        let (min, max) = match self.peek() {
            Some('?') => (0, Some(1)),
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('{') => {
                let save = self.pos;
                self.pos += 1;
                let min = self.number();
                let (min, max) = match (min, self.peek()) {
                    (Some(m), Some('}')) => (m, Some(m)),
                    (Some(m), Some(',')) => {
                        self.pos += 1;
                        (m, self.number())
                    }
                    _ => {
                        // Oniguruma reads a brace that starts no interval as
                        // a literal; refuse instead of guessing.
                        self.pos = save;
                        return Err(unsupported(self.src, "a '{' that is not an interval {n,m}"));
                    }
                };
                if !self.eat('}') {
                    return Err(unsupported(self.src, "a '{' that is not an interval {n,m}"));
                }
                if min > MAX_COUNT || max.is_some_and(|m| m > MAX_COUNT) {
                    return Err(unsupported(
                        self.src,
                        format!("a repetition count over {MAX_COUNT}"),
                    ));
                }
                if max.is_some_and(|m| m < min) {
                    return Err(bad(self.src, "a repetition {n,m} with m < n"));
                }
                self.pos -= 1;
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.pos += 1;
        if matches!(atom, Node::Look { .. } | Node::Empty) {
            return Err(unsupported(
                self.src,
                "a quantifier on a look-ahead or an empty item",
            ));
        }
        let greedy = !self.eat('?');
        if self.peek() == Some('+') {
            return Err(unsupported(self.src, "a possessive quantifier"));
        }
        if matches!(self.peek(), Some('?' | '*' | '{')) {
            return Err(unsupported(self.src, "a quantifier on a quantifier"));
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    fn atom(&mut self, ci: bool, depth: usize) -> Result<Node> {
        let c = self.next()?;
        match c {
            '(' => self.group(ci, depth),
            '[' => Ok(Node::Class(self.bracket(ci)?)),
            '\\' => match self.escape(ci)? {
                Esc::Class(k) => Ok(Node::Class(k)),
                Esc::Char(c) => Ok(Node::Class(self.literal(c, ci)?)),
            },
            '.' => Ok(Node::Class(
                Class {
                    negated: true,
                    ranges: vec![('\n', '\n')],
                    ..Class::default()
                }
                .finish(),
            )),
            '^' | '$' => Err(unsupported(self.src, format!("the anchor '{c}'"))),
            '*' | '+' | '?' | '{' => Err(unsupported(
                self.src,
                format!("a '{c}' with nothing to repeat"),
            )),
            c => Ok(Node::Class(self.literal(c, ci)?)),
        }
    }

    fn literal(&self, c: char, ci: bool) -> Result<Class> {
        let mut ranges = Vec::new();
        if ci && c.is_ascii_alphabetic() {
            fold_ascii(c, &mut ranges);
        } else if ci && has_case(c) {
            return Err(unsupported(
                self.src,
                format!("the case-insensitive non-ASCII letter {c:?}"),
            ));
        } else {
            ranges.push((c, c));
        }
        Ok(Class {
            ranges,
            ..Class::default()
        }
        .finish())
    }

    fn group(&mut self, ci: bool, depth: usize) -> Result<Node> {
        let node = if self.eat('?') {
            let rest: String = self.chars[self.pos..].iter().take(3).collect();
            if rest.starts_with(':') {
                self.pos += 1;
                self.alt(ci, depth + 1)?
            } else if rest.starts_with("i:") {
                self.pos += 2;
                self.alt(true, depth + 1)?
            } else if rest.starts_with("-i:") {
                self.pos += 3;
                self.alt(false, depth + 1)?
            } else if rest.starts_with('=') || rest.starts_with('!') {
                let negate = rest.starts_with('!');
                self.pos += 1;
                let body = self.alt(ci, depth + 1)?;
                match body {
                    Node::Class(class) => Node::Look { class, negate },
                    _ => {
                        return Err(unsupported(
                            self.src,
                            "a look-ahead other than of one character class",
                        ))
                    }
                }
            } else if rest.starts_with('<') {
                let what = if rest.starts_with("<=") || rest.starts_with("<!") {
                    "look-behind"
                } else {
                    "a named group"
                };
                return Err(unsupported(self.src, what));
            } else {
                return Err(unsupported(self.src, format!("the group '(?{rest}'")));
            }
        } else {
            self.alt(ci, depth + 1)?
        };
        if !self.eat(')') {
            return Err(bad(self.src, "a '(' without its ')'"));
        }
        Ok(node)
    }

    /// A `\p{..}` / `\P{..}` name (after the `p`).
    fn property(&mut self, negated: bool) -> Result<Class> {
        if !self.eat('{') {
            return Err(unsupported(self.src, "a \\p without {name}"));
        }
        let mut name = String::new();
        loop {
            match self.next()? {
                '}' => break,
                c => name.push(c),
            }
        }
        let (name, negated) = match name.strip_prefix('^') {
            Some(n) => (n.to_string(), !negated),
            None => (name, negated),
        };
        let cat = match name.as_str() {
            "L" | "Letter" => LETTER,
            "N" | "Number" => NUMBER,
            _ => return Err(unsupported(self.src, format!("the property \\p{{{name}}}"))),
        };
        Ok(Class {
            negated,
            cats: 1 << cat,
            ..Class::default()
        }
        .finish())
    }

    fn escape(&mut self, ci: bool) -> Result<Esc> {
        let c = self.next()?;
        let ch = |c: char| Ok(Esc::Char(c));
        match c {
            's' | 'S' => Ok(Esc::Class(
                Class {
                    negated: c == 'S',
                    cats: 1 << SPACE,
                    ..Class::default()
                }
                .finish(),
            )),
            'p' | 'P' => Ok(Esc::Class(self.property(c == 'P')?)),
            't' => ch('\t'),
            'n' => ch('\n'),
            'r' => ch('\r'),
            'f' => ch('\x0c'),
            'v' => ch('\x0b'),
            'a' => ch('\x07'),
            'e' => ch('\x1b'),
            'x' => {
                let digits: String = if self.eat('{') {
                    let mut d = String::new();
                    loop {
                        match self.next()? {
                            '}' => break,
                            c => d.push(c),
                        }
                    }
                    d
                } else {
                    let mut d = String::new();
                    for _ in 0..2 {
                        match self.peek() {
                            Some(c) if c.is_ascii_hexdigit() => {
                                d.push(c);
                                self.pos += 1;
                            }
                            _ => break,
                        }
                    }
                    d
                };
                u32::from_str_radix(&digits, 16)
                    .ok()
                    .filter(|_| !digits.is_empty() && digits.len() <= 8)
                    .and_then(char::from_u32)
                    .map(Esc::Char)
                    .ok_or_else(|| bad(self.src, format!("\\x{digits:?} is not a character")))
            }
            c if c.is_ascii_alphanumeric() => {
                Err(unsupported(self.src, format!("the escape \\{c}")))
            }
            c if c.is_ascii() => {
                let _ = ci;
                ch(c)
            }
            c => Err(unsupported(self.src, format!("the escape \\{c}"))),
        }
    }

    fn bracket(&mut self, ci: bool) -> Result<Class> {
        let mut class = Class {
            negated: self.eat('^'),
            ..Class::default()
        };
        let mut first = true;
        loop {
            let c = self.next()?;
            let item = match c {
                ']' if !first => break,
                '[' => return Err(unsupported(self.src, "a nested bracket class")),
                '&' if self.peek() == Some('&') => {
                    return Err(unsupported(self.src, "a class intersection &&"))
                }
                '\\' => self.escape(ci)?,
                c => Esc::Char(c),
            };
            first = false;
            let lo = match item {
                Esc::Class(k) => {
                    // `\s`, `\p{L}`... inside brackets: a union of split
                    // classes (a complement is the other classes).
                    class.cats |= if k.negated { !k.cats & 0xf } else { k.cats };
                    continue;
                }
                Esc::Char(c) => c,
            };
            // A range `lo-hi` (a '-' before ']' is a literal).
            let hi = if self.peek() == Some('-') && self.chars.get(self.pos + 1) != Some(&']') {
                self.pos += 1;
                match self.next()? {
                    '\\' => match self.escape(ci)? {
                        Esc::Char(h) => h,
                        Esc::Class(_) => {
                            return Err(unsupported(self.src, "a range ending in a class"))
                        }
                    },
                    '[' => return Err(unsupported(self.src, "a nested bracket class")),
                    h => h,
                }
            } else {
                lo
            };
            if hi < lo {
                return Err(bad(
                    self.src,
                    format!("the range {lo:?}-{hi:?} is reversed"),
                ));
            }
            if ci {
                if lo == hi && lo.is_ascii_alphabetic() {
                    fold_ascii(lo, &mut class.ranges);
                    continue;
                }
                if lo.is_ascii() && hi.is_ascii() {
                    for b in lo as u8..=hi as u8 {
                        if b.is_ascii_alphabetic() {
                            fold_ascii(b as char, &mut class.ranges);
                        }
                    }
                } else if (lo..=hi).any(has_case) {
                    return Err(unsupported(
                        self.src,
                        format!("the case-insensitive non-ASCII range {lo:?}-{hi:?}"),
                    ));
                }
            }
            class.ranges.push((lo, hi));
        }
        Ok(class.finish())
    }
}

enum Esc {
    Class(Class),
    Char(char),
}

// ---------------------------------------------------------------------------
// The program and the Pike VM

#[derive(Debug, Clone, Copy)]
enum Inst {
    /// Consume one character of class `.0`.
    Class(u32),
    /// Continue at both, the first preferred.
    Split(u32, u32),
    Jmp(u32),
    /// The next character is (`false`) / is not (`true`) of class `.0`.
    Look(u32, bool),
    Match,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
struct Program {
    insts: Vec<Inst>,
    classes: Vec<Class>,
}

impl Program {
    fn compile(src: &str) -> Result<Program> {
        let mut p = Parser {
            src,
            chars: src.chars().collect(),
            pos: 0,
        };
        let node = p.alt(false, 0)?;
        if p.pos != p.chars.len() {
            return Err(bad(src, "a ')' without its '('"));
        }
        let mut prog = Program {
            insts: Vec::new(),
            classes: Vec::new(),
        };
        prog.emit_node(&node, src)?;
        prog.push(Inst::Match, src)?;
        Ok(prog)
    }

    fn push(&mut self, i: Inst, src: &str) -> Result<u32> {
        if self.insts.len() >= MAX_INSTS {
            return Err(unsupported(
                src,
                format!("a pattern of more than {MAX_INSTS} steps"),
            ));
        }
        self.insts.push(i);
        Ok((self.insts.len() - 1) as u32)
    }

    fn class(&mut self, c: &Class) -> u32 {
        self.classes.push(c.clone());
        (self.classes.len() - 1) as u32
    }

    fn pc(&self) -> u32 {
        self.insts.len() as u32
    }

    fn emit_node(&mut self, n: &Node, src: &str) -> Result<()> {
        match n {
            Node::Empty => {}
            Node::Class(c) => {
                let k = self.class(c);
                self.push(Inst::Class(k), src)?;
            }
            Node::Look { class, negate } => {
                let k = self.class(class);
                self.push(Inst::Look(k, *negate), src)?;
            }
            Node::Concat(items) => {
                for i in items {
                    self.emit_node(i, src)?;
                }
            }
            Node::Alt(branches) => {
                let mut jumps = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    if i + 1 < branches.len() {
                        let split = self.push(Inst::Split(0, 0), src)?;
                        self.emit_node(b, src)?;
                        jumps.push(self.push(Inst::Jmp(0), src)?);
                        let next = self.pc();
                        self.insts[split as usize] = Inst::Split(split + 1, next);
                    } else {
                        self.emit_node(b, src)?;
                    }
                }
                let end = self.pc();
                for j in jumps {
                    self.insts[j as usize] = Inst::Jmp(end);
                }
            }
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => {
                for _ in 0..*min {
                    self.emit_node(node, src)?;
                }
                let order = |a: u32, b: u32| {
                    if *greedy {
                        Inst::Split(a, b)
                    } else {
                        Inst::Split(b, a)
                    }
                };
                match max {
                    None => {
                        let split = self.push(Inst::Split(0, 0), src)?;
                        self.emit_node(node, src)?;
                        self.push(Inst::Jmp(split), src)?;
                        let end = self.pc();
                        self.insts[split as usize] = order(split + 1, end);
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.push(Inst::Split(0, 0), src)?);
                            self.emit_node(node, src)?;
                        }
                        let end = self.pc();
                        for s in splits {
                            self.insts[s as usize] = order(s + 1, end);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Oniguruma's `find_iter` over `text`.
    fn find_iter(&self, text: &str, vm: &mut Vm, f: &mut dyn FnMut(usize, usize)) {
        let mut at = 0;
        let mut last_match_end: Option<usize> = None;
        while at <= text.len() {
            let Some((s, e)) = self.find_at(text, at, vm) else {
                return;
            };
            if s == e && last_match_end == Some(e) {
                // No empty match right after the previous one: move on a char.
                at += text[at..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            at = e;
            last_match_end = Some(e);
            f(s, e);
        }
    }

    /// The leftmost-first match starting at or after byte `at`.
    fn find_at(&self, text: &str, at: usize, vm: &mut Vm) -> Option<(usize, usize)> {
        vm.reset(self.insts.len());
        let mut cur = std::mem::take(&mut vm.cur);
        let mut next = std::mem::take(&mut vm.next);
        let mut matched = None;
        let mut pos = at;
        let mut next_char = text[pos..].chars().next();
        vm.gen += 1;
        loop {
            if matched.is_none() {
                // A thread starting here, after (below) every earlier start,
                // in the same list (same generation) as those.
                self.add(&mut cur, vm, 0, pos, next_char);
            }
            if cur.is_empty() {
                break;
            }
            let after = next_char.map(|c| pos + c.len_utf8());
            let char_after = after.and_then(|a| text[a..].chars().next());
            vm.gen += 1;
            next.clear();
            for &(pc, start) in &cur {
                match self.insts[pc as usize] {
                    Inst::Match => {
                        matched = Some((start, pos));
                        // Lower-priority threads are cut off.
                        break;
                    }
                    Inst::Class(k) => {
                        if let Some(c) = next_char {
                            if self.classes[k as usize].matches(c) {
                                self.add(&mut next, vm, pc + 1, start, char_after);
                            }
                        }
                    }
                    _ => {}
                }
            }
            std::mem::swap(&mut cur, &mut next);
            match after {
                Some(a) => {
                    pos = a;
                    next_char = char_after;
                }
                None => break,
            }
        }
        cur.clear();
        vm.cur = cur;
        vm.next = next;
        matched
    }

    /// Adds the thread `(pc, start)` to `list`, following jumps, splits (in
    /// priority order) and look-aheads (`next_char`: the character at the
    /// thread's position, `None` at the end); each `pc` once per list.
    fn add(
        &self,
        list: &mut Vec<(u32, usize)>,
        vm: &mut Vm,
        pc: u32,
        start: usize,
        next_char: Option<char>,
    ) {
        vm.stack.clear();
        vm.stack.push(pc);
        while let Some(pc) = vm.stack.pop() {
            let seen = &mut vm.seen[pc as usize];
            if *seen == vm.gen {
                continue;
            }
            *seen = vm.gen;
            match self.insts[pc as usize] {
                Inst::Jmp(t) => vm.stack.push(t),
                Inst::Split(a, b) => {
                    vm.stack.push(b);
                    vm.stack.push(a);
                }
                Inst::Look(k, negate) => {
                    let is = next_char.is_some_and(|c| self.classes[k as usize].matches(c));
                    if is != negate {
                        vm.stack.push(pc + 1);
                    }
                }
                Inst::Class(_) | Inst::Match => list.push((pc, start)),
            }
        }
    }
}

/// The VM's reusable state (per thread).
#[derive(Default)]
struct Vm {
    cur: Vec<(u32, usize)>,
    next: Vec<(u32, usize)>,
    stack: Vec<u32>,
    /// `seen[pc] == gen`: `pc` is already in the list being built.
    seen: Vec<u64>,
    gen: u64,
}

impl Vm {
    fn reset(&mut self, n: usize) {
        self.cur.clear();
        self.next.clear();
        if self.seen.len() < n {
            self.seen.resize(n, 0);
        }
    }
}

thread_local! {
    static VM: RefCell<Vm> = RefCell::new(Vm::default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Qwen2/Qwen3's pattern.
    pub(crate) const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    /// cl100k's (and Llama 3's).
    const CL100K: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    /// GPT-2's (as HF's ByteLevel runs it).
    const GPT2: &str =
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

    fn pieces(pattern: &str, regex: bool, behavior: Behavior, text: &str) -> Vec<String> {
        let s = Split::new(pattern, regex, behavior, false).unwrap();
        let mut out = Vec::new();
        s.for_each_piece(text, |r| out.push(text[r].to_string()));
        out
    }

    #[test]
    fn behaviors_like_hf() {
        let t = "the-final--countdown";
        let b = |behavior| pieces("-", false, behavior, t);
        assert_eq!(b(Behavior::Removed), ["the", "final", "countdown"]);
        assert_eq!(
            b(Behavior::Isolated),
            ["the", "-", "final", "-", "-", "countdown"]
        );
        assert_eq!(
            b(Behavior::MergedWithPrevious),
            ["the-", "final-", "-", "countdown"]
        );
        assert_eq!(
            b(Behavior::MergedWithNext),
            ["the", "-final", "-", "-countdown"]
        );
        assert_eq!(
            b(Behavior::Contiguous),
            ["the", "-", "final", "--", "countdown"]
        );
        // Matches at the edges.
        let e = "-a-";
        assert_eq!(
            pieces("-", false, Behavior::MergedWithPrevious, e),
            ["-", "a-"]
        );
        assert_eq!(pieces("-", false, Behavior::MergedWithNext, e), ["-a", "-"]);
        // Inverted: the text between matches is the delimiter.
        let inv = Split::new("-", false, Behavior::Removed, true).unwrap();
        let mut out = Vec::new();
        inv.for_each_piece(t, |r| out.push(t[r].to_string()));
        assert_eq!(out, ["-", "-", "-"]);
        // Gemma's: a space joins the word before it.
        assert_eq!(
            pieces(" ", false, Behavior::MergedWithPrevious, "a b  c "),
            ["a ", "b ", " ", "c "]
        );
        assert_eq!(
            pieces(" ", false, Behavior::Isolated, ""),
            Vec::<String>::new()
        );
    }

    #[test]
    fn qwen2_pattern() {
        let p = |t: &str| pieces(QWEN2, true, Behavior::Isolated, t);
        assert_eq!(
            p("Hello world's TEST'S 123"),
            ["Hello", " world", "'s", " TEST", "'S", " ", "1", "2", "3"]
        );
        assert_eq!(p("a  b\n\n  c"), ["a", " ", " b", "\n\n", " ", " c"]);
        assert_eq!(p("x  \n"), ["x", "  \n"]);
        assert_eq!(p("x   "), ["x", "   "]);
        assert_eq!(p("!!!\n\nfoo"), ["!!!\n\n", "foo"]);
        assert_eq!(p(" ?!x"), [" ?!", "x"]);
        assert_eq!(p("\"Hi\""), ["\"Hi", "\""]);
        assert_eq!(p("'ſ"), ["'ſ"]);
        assert_eq!(p("中文ab"), ["中文ab"]);
        let c = |t: &str| pieces(CL100K, true, Behavior::Isolated, t);
        assert_eq!(c("12345"), ["123", "45"]);
    }

    /// The matcher on GPT-2's pattern against the hand-written scanner that
    /// HF's ByteLevel ids are verified with.
    #[test]
    fn gpt2_pattern_agrees_with_the_byte_level_scanner() {
        let alphabet: Vec<char> = "ab Z1'sltvdmre\n\t\r\u{3000}é中٣!?.,-ſ  ".chars().collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let s = Split::new(GPT2, true, Behavior::Isolated, false).unwrap();
        for len in 0..400 {
            let text: String = (0..len % 24)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut mine = Vec::new();
            s.for_each_piece(&text, |r| mine.push(text[r].to_string()));
            let mut theirs = Vec::new();
            super::super::byte_level::for_each_split(&text, |w| theirs.push(w.to_string()));
            assert_eq!(mine, theirs, "{text:?}");
        }
    }

    #[test]
    fn regex_features() {
        let p = |pat: &str, t: &str| pieces(pat, true, Behavior::Isolated, t);
        assert_eq!(p("a{2}", "aaaaa"), ["aa", "aa", "a"]);
        assert_eq!(p("a{1,2}?", "aaa"), ["a", "a", "a"]);
        assert_eq!(p("[a-c]+", "xabcx"), ["x", "abc", "x"]);
        assert_eq!(p("(?i)[a-c]+", "xAbCx"), ["x", "AbC", "x"]);
        assert_eq!(p(r"\x41|\x{42}", "ABC"), ["A", "B", "C"]);
        assert_eq!(p(r"b(?=c)", "bbc"), ["b", "b", "c"]);
        assert_eq!(p(".", "a\nb"), ["a", "\n", "b"]);
        assert_eq!(p(r"[\p{N}\s]+", "a1 2b"), ["a", "1 2", "b"]);
        assert_eq!(p(r"[^\S\n]+", "a \t\nb"), ["a", " \t", "\nb"]);
        // Empty matches split between characters, as Oniguruma's find_iter.
        assert_eq!(p("x*", "ab"), ["a", "b"]);
        assert_eq!(pieces("", false, Behavior::Isolated, "ab"), ["a", "b"]);
    }

    #[test]
    fn unsupported_patterns_are_refused_by_name() {
        for (pat, what) in [
            (r"(?<=a)b", "look-behind"),
            (r"(?<!a)b", "look-behind"),
            (r"\d+", "\\d"),
            (r"\w+", "\\w"),
            (r"\bx", "\\b"),
            (r"^a", "anchor"),
            (r"a$", "anchor"),
            (r"a++", "possessive"),
            (r"(a)\1", "\\1"),
            (r"\p{Lu}", "\\p{Lu}"),
            (r"(?=ab)", "look-ahead"),
            (r"[[:alpha:]]", "nested"),
            (r"[a&&b]", "intersection"),
            (r"(?i:é)", "non-ASCII"),
            (r"a{1000}", "repetition"),
            (r"(?<n>a)", "named group"),
            (r"(?x)a", "group"),
        ] {
            let e = Split::new(pat, true, Behavior::Isolated, false).unwrap_err();
            assert!(e.message().contains(what), "{pat}: {e}");
        }
        for (pat, what) in [
            ("(a", "')'"),
            ("a)", "'('"),
            ("[a", "end"),
            ("[b-a]", "reversed"),
        ] {
            let e = Split::new(pat, true, Behavior::Isolated, false).unwrap_err();
            assert!(e.message().contains(what), "{pat}: {e}");
        }
        // o200k's letter-case classes are not run.
        let o200k = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\s+";
        let e = Split::new(o200k, true, Behavior::Isolated, false).unwrap_err();
        assert!(e.message().contains("\\p{Lu}"), "{e}");
    }

    #[test]
    fn json_round_trip_and_bad_fields() {
        let v = json!({"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": false});
        let s = Split::from_json(&v, "p").unwrap();
        assert_eq!(s.to_json(), v);
        assert_eq!(Split::from_json(&s.to_json(), "p").unwrap(), s);
        for (v, what) in [
            (
                json!({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Weird"}),
                "p.behavior: \"Weird\"",
            ),
            (
                json!({"type": "Split", "pattern": {"Regex": "a"}}),
                "p.behavior",
            ),
            (
                json!({"type": "Split", "pattern": "a", "behavior": "Isolated"}),
                "p.pattern",
            ),
            (
                json!({"type": "Split", "pattern": {"Regex": "(?<=a)"}, "behavior": "Isolated"}),
                "p.pattern: regex",
            ),
            (
                json!({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": 1}),
                "p.invert",
            ),
        ] {
            let e = Split::from_json(&v, "p").unwrap_err();
            assert!(e.message().contains(what), "{e}");
        }
    }
}

//! The I-JSON (RFC 7493) rules the canonical form (RFC 8785, [`crate::json::jcs`])
//! relies on, checked on the raw bytes of a document before it is parsed.
//!
//! A signature over the canonical form of `pack.json` binds what the
//! canonical form shows. Three things in plain JSON are not shown
//! faithfully, so a signed manifest could carry bytes the signature does
//! not bind (decision 0016):
//!
//! - **a repeated member name** (`{"a":1,"a":2}`): a parser keeps one of
//!   them (serde_json the last), so a signed `pack.json` could carry a
//!   decoy block that a reviewer reads and the runtime ignores;
//! - **a number the canonical form would change**: an integer beyond
//!   ±(2^53−1) (`9007199254740993` and `9007199254740992` canonicalize
//!   alike), or any number whose value differs from the IEEE-754 double
//!   the canonical form prints (`0.10000000000000000001`, `1e400`);
//! - **a lone surrogate** (`"\ud800"`), which has no UTF-8 form.
//!
//! [`check`] finds the first of these, with its JSON path. Syntax errors
//! are not its business: it stops at the first one without a verdict and
//! leaves the message to the JSON parser that runs next.

use std::collections::HashSet;

/// Deepest nesting examined (serde_json refuses deeper documents itself).
const MAX_DEPTH: usize = 128;
/// The largest integer every IEEE-754 double holds exactly with its
/// neighbours: 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Which rule a document breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// An object repeats a member name (after unescaping).
    DuplicateMember,
    /// An integer literal beyond ±(2^53−1).
    UnsafeInteger,
    /// A number whose value the canonical form would change.
    InexactNumber,
    /// A `\uD800`–`\uDFFF` escape without its pair.
    LoneSurrogate,
}

impl Violation {
    /// `details.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Violation::DuplicateMember => "duplicate-member",
            Violation::UnsafeInteger => "unsafe-integer",
            Violation::InexactNumber => "inexact-number",
            Violation::LoneSurrogate => "lone-surrogate",
        }
    }
}

/// The first violation in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Which rule.
    pub violation: Violation,
    /// JSON path of the value (`$.x-wop.limits.fuel`, `$.nodes[0]`).
    pub path: String,
    /// What is wrong, for people.
    pub message: String,
}

/// Checks `bytes` (one JSON document). `Ok` also when the bytes are not
/// JSON at all: the parser that runs next reports that.
pub fn check(bytes: &[u8]) -> Result<(), Found> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
        path: Vec::new(),
    };
    match s.value(0) {
        Ok(()) | Err(Stop::Syntax) => Ok(()),
        Err(Stop::Found(f)) => Err(f),
    }
}

enum Stop {
    Syntax,
    Found(Found),
}

enum Seg {
    Member(String),
    Index(usize),
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    path: Vec<Seg>,
}

impl Scanner<'_> {
    fn path(&self) -> String {
        let mut p = String::from("$");
        for s in &self.path {
            match s {
                Seg::Member(m) => {
                    p.push('.');
                    p.push_str(m);
                }
                Seg::Index(i) => p.push_str(&format!("[{i}]")),
            }
        }
        p
    }

    fn found(&self, violation: Violation, message: String) -> Stop {
        Stop::Found(Found {
            violation,
            path: self.path(),
            message,
        })
    }

    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), Stop> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(Stop::Syntax)
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Syntax);
        }
        self.ws();
        match self.b.get(self.i) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.word(b"true"),
            Some(b'f') => self.word(b"false"),
            Some(b'n') => self.word(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(Stop::Syntax),
        }
    }

    fn word(&mut self, w: &[u8]) -> Result<(), Stop> {
        if self.b.get(self.i..self.i + w.len()) == Some(w) {
            self.i += w.len();
            Ok(())
        } else {
            Err(Stop::Syntax)
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Stop> {
        self.i += 1;
        let mut seen = HashSet::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return Err(Stop::Syntax);
            }
            let name = self.string()?;
            self.eat(b':')?;
            if !seen.insert(name.clone()) {
                self.path.push(Seg::Member(name.clone()));
                return Err(self.found(
                    Violation::DuplicateMember,
                    format!(
                        "member `{name}` appears more than once in one object; JSON parsers keep only one of them, so what is signed and what runs could differ: remove the repeats"
                    ),
                ));
            }
            self.path.push(Seg::Member(name));
            self.value(depth + 1)?;
            self.path.pop();
            if !self.separator(b'}')? {
                return Ok(());
            }
        }
    }

    /// After a member or an element: `,` (another follows: `true`) or the
    /// closing `close` (`false`).
    fn separator(&mut self, close: u8) -> Result<bool, Stop> {
        self.ws();
        match self.b.get(self.i) {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(c) if *c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => Err(Stop::Syntax),
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Stop> {
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(());
        }
        let mut n = 0;
        loop {
            self.path.push(Seg::Index(n));
            self.value(depth + 1)?;
            self.path.pop();
            n += 1;
            if !self.separator(b']')? {
                return Ok(());
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, Stop> {
        let h = self.b.get(self.i..self.i + 4).ok_or(Stop::Syntax)?;
        let h = std::str::from_utf8(h).map_err(|_| Stop::Syntax)?;
        let v = u32::from_str_radix(h, 16).map_err(|_| Stop::Syntax)?;
        self.i += 4;
        Ok(v)
    }

    /// A string at `self.i` (on its opening quote), unescaped.
    fn string(&mut self) -> Result<String, Stop> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(c) = self.b.get(self.i) {
                if *c == b'"' || *c == b'\\' || *c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            // The input is UTF-8 and the run stops at ASCII bytes only.
            out.push_str(std::str::from_utf8(&self.b[start..self.i]).map_err(|_| Stop::Syntax)?);
            match self.b.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let e = *self.b.get(self.i).ok_or(Stop::Syntax)?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            out.push(c);
                        }
                        _ => return Err(Stop::Syntax),
                    }
                }
                _ => return Err(Stop::Syntax),
            }
        }
    }

    /// After `\u`: one code point, pairing surrogates.
    fn unicode_escape(&mut self) -> Result<char, Stop> {
        let lone = |s: &Self, v: u32| {
            s.found(
                Violation::LoneSurrogate,
                format!(
                    "the string escape \\u{v:04X} is half of a UTF-16 surrogate pair without its other half; it has no UTF-8 form: remove it"
                ),
            )
        };
        let hi = self.hex4()?;
        if (0xDC00..=0xDFFF).contains(&hi) {
            return Err(lone(self, hi));
        }
        if !(0xD800..=0xDBFF).contains(&hi) {
            return char::from_u32(hi).ok_or(Stop::Syntax);
        }
        if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
            return Err(lone(self, hi));
        }
        self.i += 2;
        let lo = self.hex4()?;
        if !(0xDC00..=0xDFFF).contains(&lo) {
            return Err(lone(self, hi));
        }
        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)).ok_or(Stop::Syntax)
    }

    fn number(&mut self) -> Result<(), Stop> {
        let start = self.i;
        let digits = |s: &mut Self| {
            let from = s.i;
            while s.b.get(s.i).is_some_and(u8::is_ascii_digit) {
                s.i += 1;
            }
            s.i > from
        };
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        if !digits(self) {
            return Err(Stop::Syntax);
        }
        let mut integer = true;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            integer = false;
            if !digits(self) {
                return Err(Stop::Syntax);
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            integer = false;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return Err(Stop::Syntax);
            }
        }
        let literal = std::str::from_utf8(&self.b[start..self.i]).map_err(|_| Stop::Syntax)?;
        match judge_number(literal, integer) {
            None => Ok(()),
            Some(v) => {
                let message = match v {
                    Violation::UnsafeInteger => format!(
                        "the integer {literal} is beyond ±(2^53−1); the canonical form prints it as a double, so another integer would sign the same: use a string or a smaller number"
                    ),
                    _ => format!(
                        "the number {literal} has no exact IEEE-754 double; the canonical form would print another number in its place: write it as the canonical form does"
                    ),
                };
                Err(self.found(v, message))
            }
        }
    }
}

/// The rule a number literal breaks, if any (pure; the literal is valid
/// JSON number syntax). `integer`: no fraction and no exponent.
pub fn judge_number(literal: &str, integer: bool) -> Option<Violation> {
    if integer {
        let magnitude = literal.trim_start_matches('-');
        let safe = magnitude.len() <= 16
            && magnitude
                .parse::<u64>()
                .is_ok_and(|m| m <= MAX_SAFE_INTEGER);
        return (!safe).then_some(Violation::UnsafeInteger);
    }
    let Ok(f) = literal.parse::<f64>() else {
        return Some(Violation::InexactNumber);
    };
    if !f.is_finite() {
        return Some(Violation::InexactNumber);
    }
    let mut buf = ryu_js::Buffer::new();
    let printed = if f == 0.0 { "0" } else { buf.format(f) };
    (decimal(literal) != decimal(printed)).then_some(Violation::InexactNumber)
}

/// The exact decimal value of a number literal (JSON or ECMAScript
/// output): sign, significant digits without leading or trailing zeros,
/// and the power of ten of the last digit. Zero is `(false, "", 0)`.
fn decimal(s: &str) -> (bool, String, i64) {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int}{frac}");
    let trimmed_end = all.trim_end_matches('0');
    let exp = exp
        .saturating_sub(frac.len() as i64)
        .saturating_add((all.len() - trimmed_end.len()) as i64);
    let digits = trimmed_end.trim_start_matches('0').to_owned();
    if digits.is_empty() {
        return (false, String::new(), 0);
    }
    (neg, digits, exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(doc: &str) -> Result<(), (&'static str, String)> {
        check(doc.as_bytes()).map_err(|f| (f.violation.reason(), f.path))
    }

    #[test]
    fn documents() {
        let ok = |d: &str| assert_eq!(reason(d), Ok(()), "{d}");
        let bad = |d: &str, r: &'static str, p: &str| {
            assert_eq!(reason(d), Err((r, p.to_owned())), "{d}")
        };
        ok(r#"{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}"#);
        ok(r#"{"n":[0,-0,1,-1,9007199254740991,-9007199254740991,1.5,0.1,1e2,1E-7,2.5e+300]}"#);
        ok(r#"{"s":"\ud83d\ude00 \u00e9 \" \\ \/ \n"}"#);
        ok("{}");
        ok("[]");
        // Not JSON: no verdict here, the parser reports it.
        ok(r#"{"a":1,"a""#);
        ok("{nope}");
        ok("\u{0}");
        bad(r#"{"a":1,"a":2}"#, "duplicate-member", "$.a");
        bad(r#"{"a":1,"\u0061":2}"#, "duplicate-member", "$.a");
        bad(
            r#"{"x-wop":{"mcp":{},"sha256":"","mcp":{"servers":["x"]}}}"#,
            "duplicate-member",
            "$.x-wop.mcp",
        );
        bad(r#"{"n":[1,{"k":0,"k":0}]}"#, "duplicate-member", "$.n[1].k");
        bad(r#"{"n":9007199254740992}"#, "unsafe-integer", "$.n");
        bad(r#"{"n":-9007199254740993}"#, "unsafe-integer", "$.n");
        bad(
            r#"{"n":[0,123456789012345678901234567890]}"#,
            "unsafe-integer",
            "$.n[1]",
        );
        bad(r#"{"n":0.10000000000000000001}"#, "inexact-number", "$.n");
        bad(r#"{"n":1e400}"#, "inexact-number", "$.n");
        bad(r#"{"n":9007199254740993.0}"#, "inexact-number", "$.n");
        bad(r#"{"s":"\ud800"}"#, "lone-surrogate", "$.s");
        bad(r#"{"s":"\udc00\ud800"}"#, "lone-surrogate", "$.s");
        bad(r#"{"s":"\ud800\u0041"}"#, "lone-surrogate", "$.s");
        bad(r#"{"\ud800":1}"#, "lone-surrogate", "$");
    }

    #[test]
    fn numbers() {
        let cases: &[(&str, bool, Option<Violation>)] = &[
            ("0", true, None),
            ("-0", true, None),
            ("9007199254740991", true, None),
            ("9007199254740992", true, Some(Violation::UnsafeInteger)),
            ("00", true, None),
            ("1.0", false, None),
            ("100e-2", false, None),
            ("0.1", false, None),
            ("0.30000000000000004", false, None),
            (
                "0.3000000000000000444",
                false,
                Some(Violation::InexactNumber),
            ),
            ("5e-324", false, None),
            ("1e-400", false, Some(Violation::InexactNumber)),
            ("1.7976931348623157e308", false, None),
            ("1.8e308", false, Some(Violation::InexactNumber)),
            ("1e21", false, None),
            (
                "123456789012345678901234567890e0",
                false,
                Some(Violation::InexactNumber),
            ),
        ];
        for (lit, int, want) in cases {
            assert_eq!(judge_number(lit, *int), *want, "{lit}");
        }
        assert_eq!(decimal("1.50e2"), (false, "15".to_owned(), 1));
        assert_eq!(decimal("-0.0"), (false, String::new(), 0));
        assert_eq!(decimal("1e+21"), (false, "1".to_owned(), 21));
    }
}

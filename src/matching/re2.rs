//! Regular expressions as kube-apiserver runs them: CEL's `matches` and the Kubernetes `find`
//! and `findAll` call Go's `regexp` (RE2 syntax, `regexp.Compile`, Perl flags), whose syntax
//! and semantics differ from the `regex` crate's defaults. A pattern is read as Go's
//! `regexp/syntax` parser reads it (`parse.go`) and written out as a `regex` crate pattern
//! that matches the same strings:
//!
//! - `\d`, `\w`, `\s` and their negations are ASCII (`perl_groups.go`: `[0-9]`,
//!   `[0-9A-Za-z_]`, `[\t\n\f\r ]`), as are `\b` and `\B`; the `regex` crate's are Unicode, so
//!   `'déjà'.matches('^\\w+$')` was true where kube-apiserver says false. Written as Unicode
//!   classes of those ASCII sets, `(?i)` still folds them as Go does (`(?i)\w` matches the
//!   Kelvin sign in both).
//! - Go's literal forms: `\Q...\E`, octal escapes (`\0`, `\012`), a `\` before any ASCII
//!   punctuation (`\<` is `<`, an assertion in the `regex` crate), a `{` that starts no
//!   repetition (`a{`, `a{,5}`, `x{02}`), and inside a class `[`, `&&`, `--` and `~~` (set
//!   operations in the `regex` crate).
//! - Named groups are plain groups (names do not change what matches; Go takes names the
//!   `regex` crate refuses, `(?P<1a>...)`), and repeated flags are written once.
//! - Go's refusals, in its words (`error parsing regexp: CODE: `EXPR``): a repetition count
//!   over 1,000, or nested counts whose product is (`repeatIsValid`, so `(\w{100}){10}` is
//!   valid and `(\w{100}){11}` not), a repetition of a repetition (`a**`), flags other than
//!   `i`, `m`, `s`, `U` (`(?x)`), and escapes Go does not have (`\u`, `\Z`, `\C`, `\1`).
//!
//! The `regex` crate's own limits are raised to Go's: nesting 1,000 (`maxHeight`) and a
//! compiled size that a pattern within Go's `maxSize` fits. Unicode class names (`\p{...}`)
//! are passed through: the `regex` crate knows every name Go does, and more.

use regex::{Regex, RegexBuilder};

/// Go's `maxRepeat` (`regexp/syntax/parse.go`).
const MAX_REPEAT: u32 = 1000;

/// Go's `maxHeight`: how deep a pattern may nest.
const MAX_NESTING: u32 = 1000;

/// The `regex` crate's compiled-size limit: ten times its default, so that what Go's
/// `maxSize` (3,355,443 instructions, a class counted as one) takes compiles here too, where a
/// Unicode class is many states.
const SIZE_LIMIT: usize = 100 << 20;

/// A pattern Go's `regexp.Compile` refuses, or one the `regex` crate cannot build.
#[derive(Debug, thiserror::Error)]
pub enum Re2Error {
    /// Go's parser refuses it: `error parsing regexp: {code}: `{expr}``, as Go prints
    /// `*syntax.Error`.
    #[error("error parsing regexp: {code}: `{expr}`")]
    Syntax {
        /// Go's `ErrorCode` text (`invalid repeat count`, ...).
        code: &'static str,
        /// The part of the pattern it is about.
        expr: String,
    },
    /// The translated pattern could not be built (over the size limit): the crate's words, on
    /// one line (quoted, not a `source()`).
    #[error("{}", one_line(.0))]
    Build(regex::Error),
}

/// `e`'s message with its lines and runs of white space joined by single spaces (the `regex`
/// crate's span several lines).
fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn syntax(code: &'static str, expr: &str) -> Re2Error {
    Re2Error::Syntax {
        code,
        expr: expr.to_string(),
    }
}

/// Compiles `pattern` to match what Go's `regexp.Compile(pattern)` matches.
///
/// ```
/// use admission_proxy::matching::re2::compile;
///
/// assert!(!compile(r"^\w+$").unwrap().is_match("déjà"));
/// assert!(compile(r"^\w+$").unwrap().is_match("deja_vu2"));
/// assert!(compile(r"(\w{100}){10}").is_ok());
/// assert_eq!(
///     compile(r"(\w{100}){11}").unwrap_err().to_string(),
///     "error parsing regexp: invalid repeat count: `{11}`"
/// );
/// ```
///
/// # Errors
/// [`Re2Error`]: Go's refusal, or the `regex` crate's.
pub fn compile(pattern: &str) -> Result<Regex, Re2Error> {
    let translated = translate(pattern)?;
    RegexBuilder::new(&translated)
        .nest_limit(MAX_NESTING)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(Re2Error::Build)
}

/// What the last thing written was, for the repetition that may follow it.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    /// Nothing to repeat: the start, `(`, `|`, a flags setting.
    Nothing,
    /// An atom, with the repetition product inside it (1 for a single character or class).
    Atom(u32),
    /// A repetition (`*`, `+`, `?`, `{n,m}`) starting at `start`, already non-greedy when
    /// `lazy`.
    Repeat { start: usize, lazy: bool },
}

/// `pattern` as Go reads it, written for the `regex` crate.
///
/// Over 80 lines: one scanner loop over the pattern, as Go's `parse` is.
fn translate(pattern: &str) -> Result<String, Re2Error> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    // Per group open (the pattern itself first): the largest repetition count product inside
    // it so far.
    let mut stack: Vec<u32> = vec![1];
    let mut last = Last::Nothing;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '(' => {
                let (written, end, opens) = group_start(&chars, i)?;
                out.push_str(&written);
                i = end;
                if opens {
                    stack.push(1);
                    last = Last::Nothing;
                }
                continue;
            }
            ')' => {
                if stack.len() == 1 {
                    return Err(syntax("unexpected )", pattern));
                }
                let inner = stack.pop().unwrap_or(1);
                out.push(')');
                last = Last::Atom(inner);
            }
            '|' => {
                out.push('|');
                last = Last::Nothing;
            }
            '*' | '+' | '?' => {
                repeat(&mut last, &chars, (i, i + 1), None, &mut stack)?;
                out.push(c);
            }
            '{' => match counted_repeat(&chars, i, &mut last, &mut stack)? {
                Some(end) => {
                    out.extend(&chars[i..end]);
                    i = end;
                    continue;
                }
                // Go reads a `{` that starts no repetition as itself.
                None => {
                    out.push_str(r"\{");
                    last = Last::Atom(1);
                }
            },
            '[' => {
                let (class, end) = class(&chars, i, pattern)?;
                out.push_str(&class);
                i = end;
                last = Last::Atom(1);
                continue;
            }
            '\\' => {
                let (written, end) = escape(&chars, i, false)?;
                out.push_str(&written);
                i = end;
                // `\Q\E` and assertions are not repeatable atoms in Go either, but a
                // repetition of them is valid there; treat them as atoms.
                last = Last::Atom(1);
                continue;
            }
            '.' | '^' | '$' => {
                out.push(c);
                last = Last::Atom(1);
            }
            other => {
                push_literal(&mut out, other);
                last = Last::Atom(1);
            }
        }
        i += 1;
    }
    if stack.len() > 1 {
        return Err(syntax("missing closing )", pattern));
    }
    Ok(out)
}

/// A counted repetition (`{n}`, `{n,}`, `{n,m}`) at `at`, checked (counts at most 1,000, `m`
/// not below `n`) and recorded as [`repeat`] does: where it ends, or `None` when the `{` starts
/// no repetition.
fn counted_repeat(
    chars: &[char],
    at: usize,
    last: &mut Last,
    stack: &mut [u32],
) -> Result<Option<usize>, Re2Error> {
    let Some((min, max, end)) = parse_repeat(chars, at) else {
        return Ok(None);
    };
    if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
        return Err(syntax(
            "invalid repeat count",
            &operator_span(chars, at, end),
        ));
    }
    let count = match max {
        Some(m) if m > 0 => m,
        Some(_) => 1,
        None => min.max(1),
    };
    repeat(last, chars, (at, end), Some(count), stack)?;
    Ok(Some(end))
}

/// Checks and records a repetition of what `last` is, the operator at `at..end`: `count` for
/// `{n,m}`, `None` for `*`, `+`, `?` (a `?` right after a repetition makes it non-greedy,
/// once: Go's `repeat`).
fn repeat(
    last: &mut Last,
    chars: &[char],
    (at, end): (usize, usize),
    count: Option<u32>,
    stack: &mut [u32],
) -> Result<(), Re2Error> {
    match *last {
        Last::Nothing => Err(syntax(
            "missing argument to repetition operator",
            &operator_span(chars, at, end),
        )),
        Last::Repeat { start, lazy: false } if count.is_none() && chars[at] == '?' => {
            *last = Last::Repeat { start, lazy: true };
            Ok(())
        }
        // Go quotes both operators, from the first (`**`, `{2}{3}`, `*??`).
        Last::Repeat { start, .. } => {
            let end = if chars.get(end) == Some(&'?') {
                end + 1
            } else {
                end
            };
            Err(syntax(
                "invalid nested repetition operator",
                &operator_span(chars, start, end),
            ))
        }
        Last::Atom(inner) => {
            let product = match count {
                Some(count) => {
                    let product = inner.saturating_mul(count);
                    if product > MAX_REPEAT {
                        return Err(syntax(
                            "invalid repeat count",
                            &operator_span(chars, at, end),
                        ));
                    }
                    product
                }
                None => inner,
            };
            if let Some(inner) = stack.last_mut() {
                *inner = (*inner).max(product);
            }
            *last = Last::Repeat {
                start: at,
                lazy: false,
            };
            Ok(())
        }
    }
}

fn operator_span(chars: &[char], start: usize, end: usize) -> String {
    chars[start..end.min(chars.len())].iter().collect()
}

/// `{n}`, `{n,}` or `{n,m}` at `at` as Go's `parseRepeat` reads it (decimal, no sign, no
/// space, no leading zero): the counts and where it ends; `None` when it is no repetition.
fn parse_repeat(chars: &[char], at: usize) -> Option<(u32, Option<u32>, usize)> {
    let number = |mut i: usize| -> Option<(u32, usize)> {
        let start = i;
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        if i == start || (i - start > 1 && chars[start] == '0') {
            return None;
        }
        let text: String = chars[start..i].iter().collect();
        // Over 8 digits: Go's parseInt gives up (and the count is over 1,000 anyway).
        let value = if text.len() > 8 {
            u32::MAX
        } else {
            text.parse().ok()?
        };
        Some((value, i))
    };
    let (min, mut i) = number(at + 1)?;
    let max = match chars.get(i) {
        Some('}') => Some(min),
        Some(',') if chars.get(i + 1) == Some(&'}') => {
            i += 1;
            None
        }
        Some(',') => {
            let (max, end) = number(i + 1)?;
            i = end;
            if chars.get(i) != Some(&'}') {
                return None;
            }
            Some(max)
        }
        _ => return None,
    };
    Some((min, max, i + 1))
}

/// A `(` at `at`: what to write, where the pattern goes on, and whether a group opened (a bare
/// flags setting, `(?i)`, opens none).
fn group_start(chars: &[char], at: usize) -> Result<(String, usize, bool), Re2Error> {
    if chars.get(at + 1) != Some(&'?') {
        return Ok(("(".to_string(), at + 1, true));
    }
    let rest = |from: usize| chars[from..].iter().collect::<String>();
    // Named groups: `(?P<name>` and `(?<name>`; written as plain groups.
    let name_start = match (chars.get(at + 2), chars.get(at + 3)) {
        (Some('P'), Some('<')) => Some(at + 4),
        (Some('<'), _) => Some(at + 3),
        _ => None,
    };
    if let Some(start) = name_start {
        let Some(len) = chars[start..].iter().position(|c| *c == '>') else {
            return Err(syntax("invalid named capture", &rest(at)));
        };
        let name = &chars[start..start + len];
        if name.is_empty() || !name.iter().all(|c| c.is_ascii_alphanumeric() || *c == '_') {
            let text: String = chars[at..=start + len].iter().collect();
            return Err(syntax("invalid named capture", &text));
        }
        return Ok(("(".to_string(), start + len + 1, true));
    }
    // Flags: `(?flags)` or `(?flags:`; Go knows i, m, s, U, and one `-`.
    let mut on = String::new();
    let mut off = String::new();
    let mut negated = false;
    let mut i = at + 2;
    while let Some(&c) = chars.get(i) {
        match c {
            'i' | 'm' | 's' | 'U' => {
                let set = if negated { &mut off } else { &mut on };
                if !set.contains(c) {
                    set.push(c);
                }
            }
            '-' if !negated => negated = true,
            ':' | ')' => {
                if negated && off.is_empty() {
                    let text: String = chars[at..=i].iter().collect();
                    return Err(syntax("invalid or unsupported Perl syntax", &text));
                }
                let mut flags = on;
                if !off.is_empty() {
                    flags.push('-');
                    flags.push_str(&off);
                }
                let opens = c == ':';
                let written = match (flags.is_empty(), opens) {
                    (true, true) => "(?:".to_string(),
                    (true, false) => String::new(),
                    (false, true) => format!("(?{flags}:"),
                    (false, false) => format!("(?{flags})"),
                };
                return Ok((written, i + 1, opens));
            }
            _ => {
                let text: String = chars[at..=i].iter().collect();
                return Err(syntax("invalid or unsupported Perl syntax", &text));
            }
        }
        i += 1;
    }
    Err(syntax("missing closing )", &rest(at)))
}

/// Go's ASCII Perl classes (`perl_groups.go`), as class contents.
fn perl_class(c: char) -> Option<(&'static str, bool)> {
    Some(match c {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        'w' => ("0-9A-Za-z_", false),
        'W' => ("0-9A-Za-z_", true),
        's' => (r"\t\n\x0C\r ", false),
        'S' => (r"\t\n\x0C\r ", true),
        _ => return None,
    })
}

/// A `\` escape at `at` (`in_class`: inside `[...]`): what to write and where the pattern goes
/// on.
///
/// Over 80 lines: one match over Go's escapes (`regexp/syntax/parse.go`, `parseEscape`).
fn escape(chars: &[char], at: usize, in_class: bool) -> Result<(String, usize), Re2Error> {
    let Some(&c) = chars.get(at + 1) else {
        return Err(syntax("trailing backslash at end of expression", ""));
    };
    let invalid = |end: usize| syntax("invalid escape sequence", &operator_span(chars, at, end));
    if let Some((set, negated)) = perl_class(c) {
        let written = match (in_class, negated) {
            (true, false) => set.to_string(),
            (_, true) => format!("[^{set}]"),
            (false, false) => format!("[{set}]"),
        };
        return Ok((written, at + 2));
    }
    match c {
        'b' | 'B' if !in_class => Ok((format!("(?-u:\\{c})"), at + 2)),
        'A' | 'z' if !in_class => Ok((format!("\\{c}"), at + 2)),
        'Q' if !in_class => {
            let start = at + 2;
            let end = (start..chars.len())
                .find(|&i| chars[i] == '\\' && chars.get(i + 1) == Some(&'E'))
                .unwrap_or(chars.len());
            let mut written = String::new();
            for &q in &chars[start..end] {
                push_literal(&mut written, q);
            }
            Ok((written, (end + 2).min(chars.len()).max(end)))
        }
        'a' => Ok((r"\x07".to_string(), at + 2)),
        'f' | 't' | 'n' | 'r' | 'v' => Ok((format!("\\{c}"), at + 2)),
        // Octal: `\0` with up to two more digits, or `\1`-`\7` followed by one or two.
        '0'..='7' => {
            let mut end = at + 2;
            while end < at + 4 && chars.get(end).is_some_and(|d| ('0'..='7').contains(d)) {
                end += 1;
            }
            if c != '0' && end == at + 2 {
                return Err(invalid(end));
            }
            let digits: String = chars[at + 1..end].iter().collect();
            let value = u32::from_str_radix(&digits, 8).unwrap_or(0);
            Ok((format!("\\x{{{value:X}}}"), end))
        }
        'x' => {
            // `\xHH` or `\x{H...}`: the same in both syntaxes.
            if chars.get(at + 2) == Some(&'{') {
                let Some(len) = chars[at + 3..].iter().position(|c| *c == '}') else {
                    return Err(invalid(chars.len()));
                };
                let end = at + 3 + len + 1;
                Ok((operator_span(chars, at, end), end))
            } else {
                let end = at + 4;
                let hex = chars
                    .get(at + 2..end)
                    .is_some_and(|h| h.iter().all(char::is_ascii_hexdigit));
                if !hex {
                    return Err(invalid(end));
                }
                Ok((operator_span(chars, at, end), end))
            }
        }
        'p' | 'P' => {
            let end = if chars.get(at + 2) == Some(&'{') {
                match chars[at + 3..].iter().position(|c| *c == '}') {
                    Some(len) => at + 3 + len + 1,
                    None => {
                        return Err(syntax(
                            "invalid character class range",
                            &operator_span(chars, at, chars.len()),
                        ))
                    }
                }
            } else if at + 2 < chars.len() {
                at + 3
            } else {
                return Err(syntax(
                    "invalid character class range",
                    &operator_span(chars, at, chars.len()),
                ));
            };
            Ok((operator_span(chars, at, end), end))
        }
        // Any ASCII punctuation stands for itself.
        p if p.is_ascii() && !p.is_ascii_alphanumeric() => {
            let mut written = String::new();
            push_literal(&mut written, p);
            Ok((written, at + 2))
        }
        _ => Err(invalid(at + 2)),
    }
}

/// One literal character, escaped where the `regex` crate gives it a meaning (in or out of a
/// class).
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_punctuation() || c.is_whitespace() || c.is_control() {
        out.push_str(&format!("\\x{{{:X}}}", u32::from(c)));
    } else {
        out.push(c);
    }
}

/// A class `[...]` at `at`, read as Go's `parseClass` reads it (a `]` first is literal, `-`
/// anywhere that is no range is literal, `[:alpha:]` is POSIX's ASCII class, any other `[` is
/// literal): what to write and where the pattern goes on.
fn class(chars: &[char], at: usize, pattern: &str) -> Result<(String, usize), Re2Error> {
    let mut out = String::from("[");
    let mut i = at + 1;
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let mut first = true;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(syntax(
                "missing closing ]",
                &operator_span(chars, at, chars.len()),
            ));
        };
        if c == ']' && !first {
            out.push(']');
            return Ok((out, i + 1));
        }
        first = false;
        // POSIX classes, `[:alpha:]` and `[:^alpha:]`: ASCII in both syntaxes.
        if c == '[' && chars.get(i + 1) == Some(&':') {
            if let Some(len) = chars[i + 2..].windows(2).position(|w| w == [':', ']']) {
                let end = i + 2 + len + 2;
                out.push_str(&operator_span(chars, i, end));
                i = end;
                continue;
            }
        }
        // One element: a character (maybe the start of a range) or an escape.
        let (lo, next) = class_char(chars, i, pattern)?;
        let ClassChar::Char(lo_char) = lo else {
            if let ClassChar::Written(text) = lo {
                out.push_str(&text);
            }
            i = next;
            continue;
        };
        if chars.get(next) == Some(&'-') && chars.get(next + 1).is_some_and(|c| *c != ']') {
            let (hi, end) = class_char(chars, next + 1, pattern)?;
            let ClassChar::Char(hi_char) = hi else {
                return Err(syntax(
                    "invalid character class range",
                    &operator_span(chars, i, end),
                ));
            };
            if hi_char < lo_char {
                return Err(syntax(
                    "invalid character class range",
                    &operator_span(chars, i, end),
                ));
            }
            push_literal(&mut out, lo_char);
            out.push('-');
            push_literal(&mut out, hi_char);
            i = end;
            continue;
        }
        push_literal(&mut out, lo_char);
        i = next;
    }
}

/// One element of a class: a single character, or what an escape that is no single
/// character writes (`\d`, `\pL`).
enum ClassChar {
    Char(char),
    Written(String),
}

fn class_char(chars: &[char], at: usize, pattern: &str) -> Result<(ClassChar, usize), Re2Error> {
    let c = chars[at];
    if c != '\\' {
        return Ok((ClassChar::Char(c), at + 1));
    }
    let Some(&e) = chars.get(at + 1) else {
        return Err(syntax("missing closing ]", pattern));
    };
    // Escapes that are one character become that character, so that they may bound a range.
    let single = match e {
        'a' => Some('\u{7}'),
        'f' => Some('\u{c}'),
        't' => Some('\t'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        'v' => Some('\u{b}'),
        p if p.is_ascii() && !p.is_ascii_alphanumeric() => Some(p),
        _ => None,
    };
    if let Some(c) = single {
        return Ok((ClassChar::Char(c), at + 2));
    }
    let (written, end) = escape(chars, at, true)?;
    // An octal or hex escape is one character too.
    if let Some(hex) = written
        .strip_prefix("\\x{")
        .and_then(|h| h.strip_suffix('}'))
    {
        if let Some(c) = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
            return Ok((ClassChar::Char(c), end));
        }
    }
    if let Some(hex) = written.strip_prefix("\\x").filter(|h| h.len() == 2) {
        if let Some(c) = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
            return Ok((ClassChar::Char(c), end));
        }
    }
    Ok((ClassChar::Written(written), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        compile(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
            .is_match(text)
    }

    fn refused(pattern: &str) -> String {
        match compile(pattern) {
            Ok(_) => panic!("{pattern} compiled"),
            Err(e) => e.to_string(),
        }
    }

    /// Where Go's RE2 and the `regex` crate's defaults answer differently, Go's answer
    /// (`regexp/syntax/perl_groups.go`, `parse.go`; the `regex` crate's Unicode classes).
    #[test]
    fn matches_as_go_s_regexp_does() {
        let cases: &[(&str, &str, bool)] = &[
            (r"\d", "\u{663}", false),
            (r"^\w+$", "é", false),
            (r"^\w+$", "deja_vu9", true),
            (r"\s", "\u{b}", false),
            (r"\s", "\u{a0}", false),
            (r"\s", "\t", true),
            (r"[[:space:]]", "\u{b}", true),
            (r"\bé", "é", false),
            (r"a\b", "aé", true),
            (r"\B", "é", true),
            (r"\w", "\u{212a}", false),
            (r"(?i)\w", "\u{212a}", true),
            (r"(?i)k", "\u{212a}", true),
            (r"a$", "a\n", false),
            (r"(?m)a$", "a\n", true),
            (r"[\d]", "5", true),
            (r"[\d]", "\u{663}", false),
            (r"[^\w]", "é", true),
            (r"[\W]", "é", true),
            (r"\Qa.b\E", "axb", false),
            (r"\Qa.b\E", "a.b", true),
            (r"\012", "\n", true),
            (r"\0", "\0", true),
            (r"\<a", "<a", true),
            (r"\<a", "a", false),
            (r"[a&&b]", "&", true),
            (r"[a[b]]", "[]", true),
            (r"[0-9--4]", "4", true),
            (r"[[]", "[", true),
            (r"[\d-z]", "-", true),
            (r"a{,5}", "a{,5}", true),
            (r"a{", "a{", true),
            (r"^x{02}$", "xx", false),
            (r"^x{02}$", "x{02}", true),
            (r"^a{ 2 }$", "aa", false),
            (r"(?)a", "a", true),
            (r"(?ii)a", "A", true),
            (r"(?P<1a>x)", "x", true),
            (r"(?P<n>a)(?P<n>b)", "ab", true),
            (r"[]a]", "]", true),
            (r"[a-b-c]", "-", true),
            (r"a*?b", "aab", true),
            (r"x{2,3}", "xx", true),
            (r"^x{2,3}$", "xxxx", false),
            (r"\pL", "é", true),
            (r"\x41\x{42}", "AB", true),
            (r"# not a comment", "# not a comment", true),
        ];
        for (pattern, text, go) in cases {
            assert_eq!(matches(pattern, text), *go, "{pattern} on {text:?}");
        }
    }

    /// Go's refusals, in Go's words; and Go's limits, which the `regex` crate's defaults
    /// refuse below.
    #[test]
    fn refuses_and_limits_as_go_s_regexp_does() {
        let cases: &[(&str, &str)] = &[
            (
                r"a{1001}",
                "error parsing regexp: invalid repeat count: `{1001}`",
            ),
            (
                r"(\w{100}){11}",
                "error parsing regexp: invalid repeat count: `{11}`",
            ),
            (
                r"a**",
                "error parsing regexp: invalid nested repetition operator: `**`",
            ),
            (
                r"a*??",
                "error parsing regexp: invalid nested repetition operator: `*??`",
            ),
            (
                r"a{2}{3}",
                "error parsing regexp: invalid nested repetition operator: `{2}{3}`",
            ),
            (
                r"(?x)a b",
                "error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
            ),
            (
                r"\u0041",
                "error parsing regexp: invalid escape sequence: `\\u`",
            ),
            (
                r"\Z",
                "error parsing regexp: invalid escape sequence: `\\Z`",
            ),
            (
                r"\C",
                "error parsing regexp: invalid escape sequence: `\\C`",
            ),
            (
                r"\1",
                "error parsing regexp: invalid escape sequence: `\\1`",
            ),
            (
                r"*a",
                "error parsing regexp: missing argument to repetition operator: `*`",
            ),
            (r"a)", "error parsing regexp: unexpected ): `a)`"),
        ];
        for (pattern, go) in cases {
            assert_eq!(refused(pattern), *go, "{pattern}");
        }
        assert!(compile(r"a{1000}").is_ok());
        assert!(compile(r"(\w{100}){10}").is_ok());
        let nested = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert!(matches(&nested, "a"));
    }
}

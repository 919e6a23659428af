//! Values a request supplies (its uid, names, kind, path, a parse error quoting its body), made
//! fit for a log line or an error body: control characters escaped, so that no value starts a
//! line of its own in text logs, and at most [`MAX_VALUE_BYTES`] bytes of each, so that one
//! request cannot write megabytes of log. Depends on nothing.

use std::fmt::{self, Display, Write};

/// The most bytes of one request-supplied value written into a log line or an error body
/// (escapes included); the rest is replaced by `… (N bytes)`, N the value's whole length.
pub const MAX_VALUE_BYTES: usize = 1024;

/// `T`'s text for a log line or an error body: control characters (and the Unicode line and
/// paragraph separators) escaped as Rust writes them (`\n`, `\r`, `\t`, `\u{1b}`), cut after
/// [`MAX_VALUE_BYTES`] bytes at a character boundary. Formats lazily: nothing is allocated, and
/// a log line that is not written costs nothing.
#[derive(Clone, Copy, Debug)]
pub struct Bounded<T>(pub T);

impl<T: Display> Display for Bounded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Escaper {
            out: f,
            written: 0,
            seen: 0,
            cut: false,
        };
        // The escaper never fails on its own; an error is the formatter's, passed on.
        write!(out, "{}", self.0)?;
        if out.cut {
            write!(out.out, "… ({} bytes)", out.seen)?;
        }
        Ok(())
    }
}

/// Writes what it is given to `out`, escaped, until [`MAX_VALUE_BYTES`] were written; counts
/// the rest without writing it.
struct Escaper<'a, 'b> {
    out: &'a mut fmt::Formatter<'b>,
    written: usize,
    /// Bytes of the value seen, written or not.
    seen: usize,
    cut: bool,
}

/// Whether `c` is written escaped: what could end a line in a terminal or a log shipper.
fn escaped(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

impl Write for Escaper<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.seen += s.len();
        if self.cut {
            return Ok(());
        }
        // Runs of characters written as they are go out in one piece.
        let mut run = 0;
        for (at, c) in s.char_indices() {
            let escape = escaped(c);
            let width = if escape {
                c.escape_default().count()
            } else {
                c.len_utf8()
            };
            if self.written + width > MAX_VALUE_BYTES {
                self.out.write_str(&s[run..at])?;
                self.cut = true;
                return Ok(());
            }
            self.written += width;
            if escape {
                self.out.write_str(&s[run..at])?;
                for e in c.escape_default() {
                    self.out.write_char(e)?;
                }
                run = at + c.len_utf8();
            }
        }
        self.out.write_str(&s[run..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(
            Bounded("a\nb\r\tc\u{1b}[31m\u{2028}é ü").to_string(),
            r"a\nb\r\tc\u{1b}[31m\u{2028}é ü"
        );
        assert_eq!(Bounded(42).to_string(), "42");
    }

    #[test]
    fn a_long_value_is_cut_at_a_character_boundary_with_its_length() {
        let long = "é".repeat(2000);
        let text = Bounded(&long).to_string();
        let (kept, rest) = text.split_once('…').unwrap();
        assert_eq!(kept, "é".repeat(MAX_VALUE_BYTES / 2));
        assert_eq!(rest, " (4000 bytes)");
        // Escapes count: a value of newlines is cut at the same number of bytes written.
        let newlines = "\n".repeat(MAX_VALUE_BYTES);
        let text = Bounded(&newlines).to_string();
        assert!(
            text.starts_with(&r"\n".repeat(MAX_VALUE_BYTES / 2)),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("… ({MAX_VALUE_BYTES} bytes)")),
            "{text}"
        );
        // Exactly at the limit: nothing cut.
        let full = "x".repeat(MAX_VALUE_BYTES);
        assert_eq!(Bounded(&full).to_string(), full);
    }

    #[test]
    fn a_value_written_in_pieces_is_bounded_as_a_whole() {
        let piece = "y".repeat(300);
        let text = Bounded(format_args!("{piece}{piece}{piece}{piece}")).to_string();
        assert_eq!(
            text,
            format!("{}… (1200 bytes)", "y".repeat(MAX_VALUE_BYTES))
        );
    }
}

//! Reading the files the proxy is configured with (webhook configuration, namespaces,
//! exclusions, serving certificate and key, client CA): regular files only, opened without
//! blocking, and bounded in size; and the nesting bound YAML and JSON texts are checked against
//! before they are parsed. The reload thread re-reads these files on every change and at every
//! resync, so a named pipe put in place of one (an `open` that never returns), a device (a read
//! that never ends), a huge file or a deeply nested one must be a clear error, never a stall.
//! Depends on nothing else in this crate.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Most bytes one configuration file may hold (webhook configurations, the namespaces file, the
/// exclusions file): 8 MiB. The largest measured configuration, 5,000 webhooks, is one 6 MB
/// document; parsing a YAML document takes about 9 times its size while it loads.
pub const MAX_CONFIG_FILE_BYTES: u64 = 8 << 20;

/// Most bytes the YAML and JSON files of one configuration directory may hold together: 32 MiB.
pub const MAX_CONFIG_BYTES: u64 = 32 << 20;

/// Most bytes a PEM file may hold (serving certificate, its key, the client CA bundle): 1 MiB,
/// several hundred certificates.
pub const MAX_PEM_FILE_BYTES: u64 = 1 << 20;

/// How deep YAML and JSON flow collections (`[`, `{`) may nest: 128, the recursion limit at
/// which serde_json and serde_yaml_ng already refuse a document. Checked on the text before
/// parsing because libyaml's scanner costs the current nesting depth for every token (100,000
/// levels took 37 s).
pub const MAX_NESTING: usize = 128;

/// Why a file is refused before or while it is read; wrapped in the [`io::Error`] that
/// [`read`] returns, so every caller's error names the file as for any other read failure.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not a regular file: reading it could block (a named pipe) or never end (a device).
    #[error("not a regular file ({0}): refused, as reading it could block or never end")]
    NotRegular(&'static str),
    /// More bytes than allowed.
    #[error("{size} bytes, more than the {limit} bytes such a file may hold")]
    TooLarge {
        /// The file's size (or what was read of it before the limit), bytes.
        size: u64,
        /// The limit, bytes.
        limit: u64,
    },
    /// The files of a configuration directory hold more bytes together than allowed.
    #[error("its YAML and JSON files hold {size} bytes together, more than the {limit} bytes a configuration may hold")]
    TooLargeTogether {
        /// The files' sizes added up, bytes.
        size: u64,
        /// The limit, bytes.
        limit: u64,
    },
}

impl From<FileError> for io::Error {
    fn from(e: FileError) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// Nesting deeper than [`MAX_NESTING`], found by [`check_nesting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("nested more than {MAX_NESTING} levels deep at line {line}: refused before parsing")]
pub struct TooDeep {
    /// The 1-based line of the bracket one level too deep.
    pub line: usize,
}

/// What a file type is called in [`FileError::NotRegular`].
fn kind(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// The contents of the regular file at `path` (symbolic links followed), at most `limit`
/// bytes. The file is looked at before it is opened, opened with `O_NONBLOCK` (a named pipe
/// swapped in between does not block the `open`) and looked at again once open.
///
/// # Errors
/// The `open` or read's own error; or, wrapping a [`FileError`] (kind `InvalidInput`): not a
/// regular file, or more than `limit` bytes (also when it grows past `limit` while read).
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let regular = |t: FileType| {
        if t.is_file() {
            Ok(())
        } else {
            Err(io::Error::from(FileError::NotRegular(kind(t))))
        }
    };
    regular(std::fs::metadata(path)?.file_type())?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    regular(meta.file_type())?;
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            size: meta.len(),
            limit,
        }
        .into());
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    File::take(file, limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(FileError::TooLarge {
            size: out.len() as u64,
            limit,
        }
        .into());
    }
    Ok(out)
}

/// [`read`], as UTF-8 text.
///
/// # Errors
/// What [`read`] returns; kind `InvalidData` ("not UTF-8 text") when it is not UTF-8.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Whether YAML or JSON `text` nests flow collections (`[`, `{`) at most [`MAX_NESTING`] deep,
/// on the text, in one pass, before any parser sees it. Follows YAML's lexical rules far enough
/// to find where flow collections start: quoted scalars and comments are skipped; in block
/// context a bracket opens a collection only where a node starts (not inside a plain scalar
/// such as `a[0]`), in flow context every bracket counts, as in libyaml's scanner. Block
/// nesting is not counted: libyaml parses it in linear time and the deserializers stop at
/// [`MAX_NESTING`] levels themselves.
///
/// # Errors
/// [`TooDeep`] with the line of the first bracket past the limit.
///
/// Over 80 lines: one scanner loop whose state is its local variables, as libyaml's scanner.
pub fn check_nesting(text: &str) -> Result<(), TooDeep> {
    let bytes = text.as_bytes();
    let blank = |i: usize| bytes.get(i).is_none_or(u8::is_ascii_whitespace);
    let mut depth = 0usize;
    let mut line = 1usize;
    // A node may start here (quotes and brackets open scalars and collections only there).
    let mut node_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line += 1;
                if depth == 0 {
                    node_start = true;
                }
            }
            b' ' | b'\t' | b'\r' => {}
            b'#' if i == 0 || bytes[i - 1].is_ascii_whitespace() => {
                // A comment, to the end of the line.
                while i + 1 < bytes.len() && bytes[i + 1] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' if node_start => {
                // A quoted scalar: `\` escapes in double quotes, `''` in single ones.
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\n' => line += 1,
                        b'\\' if b == b'"' => {
                            if bytes.get(i + 1) == Some(&b'\n') {
                                line += 1;
                            }
                            i += 1;
                        }
                        c if c == b && b == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
                        c if c == b => break,
                        _ => {}
                    }
                    i += 1;
                }
                node_start = false;
            }
            b'[' | b'{' if node_start || depth > 0 => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(TooDeep { line });
                }
                node_start = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                node_start = false;
            }
            b',' if depth > 0 => node_start = true,
            b':' if depth > 0 || blank(i + 1) => node_start = true,
            b'-' | b'?' if node_start && blank(i + 1) => {}
            // `---` and `...` at the start of a line end or start a document; a node follows.
            b'-' | b'.'
                if depth == 0
                    && (i == 0 || bytes[i - 1] == b'\n')
                    && bytes[i..].starts_with(if b == b'-' { b"---" } else { b"..." })
                    && blank(i + 3) =>
            {
                i += 2;
                node_start = true;
            }
            b'!' | b'&' if node_start => {
                // A tag or an anchor: a node still starts after it.
                while !(blank(i + 1) || depth > 0 && b",[]{}".contains(&bytes[i + 1])) {
                    i += 1;
                }
            }
            b'|' | b'>' if node_start && depth == 0 => {
                // A block scalar: its lines are those indented more than the indicator's line.
                let indent =
                    |start: usize| bytes[start..].iter().take_while(|c| **c == b' ').count();
                let line_start = bytes[..i]
                    .iter()
                    .rposition(|c| *c == b'\n')
                    .map_or(0, |p| p + 1);
                let own = indent(line_start);
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                loop {
                    // `i` is at the newline ending one of its lines, or at the end.
                    let next = i + 1;
                    if next >= bytes.len() {
                        break;
                    }
                    let n = indent(next);
                    let empty = matches!(bytes.get(next + n), None | Some(b'\n' | b'\r'));
                    if !empty && n <= own {
                        break;
                    }
                    line += 1;
                    i = next + n;
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
                node_start = false;
                continue;
            }
            _ => node_start = false,
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_collections_deeper_than_the_limit_are_refused_with_their_line() {
        let ok = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert_eq!(check_nesting(&ok), Ok(()));
        let deep = format!(
            "a: b\nc:\n  {}{}",
            "[".repeat(MAX_NESTING + 1),
            "]".repeat(MAX_NESTING + 1)
        );
        assert_eq!(check_nesting(&deep), Err(TooDeep { line: 3 }));
        let braces = "{a: ".repeat(100_000);
        assert_eq!(check_nesting(&braces), Err(TooDeep { line: 1 }));
        // JSON is flow YAML.
        let json = format!(
            "{}1{}",
            "{\"k\":".repeat(MAX_NESTING + 1),
            "}".repeat(MAX_NESTING + 1)
        );
        assert_eq!(check_nesting(&json), Err(TooDeep { line: 1 }));
        // Across lines, in flow context.
        let lines = "[\n".repeat(MAX_NESTING + 1);
        assert_eq!(
            check_nesting(&lines),
            Err(TooDeep {
                line: MAX_NESTING + 1
            })
        );
    }

    #[test]
    fn brackets_in_scalars_and_comments_do_not_count() {
        let many = "[".repeat(MAX_NESTING + 1);
        for text in [
            format!("expression: object.a{many}"),
            format!("name: \"{many}\""),
            format!("name: '{many}'"),
            format!("name: 'it''s {many}'"),
            format!("- \"esc\\\" {many}\""),
            format!("a: b # {many}"),
            format!("# {many}"),
            format!("a: |\n  {many}\n  more {many}\nb: c"),
            format!("- >-\n    {many}\n\n    {many}\n- x"),
            format!("url: http://x/{many}"),
            format!("[\"{many}\", '{many}']"),
            format!("{{\"a\": \"{}\"}}", "{".repeat(MAX_NESTING + 1)),
        ] {
            assert_eq!(check_nesting(&text), Ok(()), "{text}");
        }
    }

    #[test]
    fn closing_brackets_in_strings_do_not_hide_depth() {
        let hidden = "[\"]\", ".repeat(MAX_NESTING + 1);
        assert_eq!(check_nesting(&hidden), Err(TooDeep { line: 1 }));
        let tagged = "!!seq [".repeat(MAX_NESTING + 1);
        assert_eq!(check_nesting(&tagged), Err(TooDeep { line: 1 }));
        let keyed = "- a: ".to_string() + &"[".repeat(MAX_NESTING + 1);
        assert_eq!(check_nesting(&keyed), Err(TooDeep { line: 1 }));
        let document = "kind: A\n--- ".to_string() + &"[".repeat(MAX_NESTING + 1);
        assert_eq!(check_nesting(&document), Err(TooDeep { line: 2 }));
    }

    #[test]
    fn only_regular_files_are_read_and_within_their_limit() {
        let dir = std::env::temp_dir().join(format!("ap-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f.yaml");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read(&file, 10).unwrap(), b"0123456789");
        let large = read(&file, 9).unwrap_err();
        assert_eq!(
            large.to_string(),
            "10 bytes, more than the 9 bytes such a file may hold"
        );
        let fifo = dir.join("fifo.yaml");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // Returns at once: no writer needed.
        let err = read(&fifo, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "not a regular file (a named pipe): refused, as reading it could block or never end"
        );
        assert!(read(&dir, 10)
            .unwrap_err()
            .to_string()
            .contains("(a directory)"));
        assert!(read(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .to_string()
            .contains("(a character device)"));
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_to_string(&file, 10).unwrap_err().to_string(),
            "not UTF-8 text"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! JSON read as deep as kube-apiserver reads it.
//!
//! serde_json gives up at 128 levels of nesting (its recursion limit guards its recursive
//! descent against the thread's stack); kube-apiserver decodes request bodies up to 10,000
//! levels (Go's `encoding/json` `maxNestingDepth`, `src/encoding/json/scanner.go`, which
//! `sigs.k8s.io/json` keeps) and sends webhooks objects that deep. An object the proxy cannot
//! read must never be taken for an absent one (a `null` to CEL would skip a webhook that
//! matches on `object`), so: the common case is read with serde_json's limit, at no cost; a
//! value over it is measured, read again without the limit on a stack grown for its depth,
//! and only beyond kube-apiserver's own limit is it an error, which the caller decides by the
//! webhook's failurePolicy.
//!
//! Values read this deep are recursed into by everything that touches them (conversion, JSON
//! Patch, serialization, drop), so the binary runs its threads on stacks of
//! [`THREAD_STACK_BYTES`].

use serde::de::DeserializeOwned;

/// The deepest nesting kube-apiserver decodes (Go `encoding/json` `maxNestingDepth`); a body
/// deeper than this never reaches a webhook from a real kube-apiserver.
pub const MAX_DEPTH: usize = 10_000;

/// Stack for every thread of the binary that may hold a value [`MAX_DEPTH`] deep: 64 MiB of
/// address space, of which only what a request touches is ever backed by memory.
pub const THREAD_STACK_BYTES: usize = 64 << 20;

/// Stack given per level of nesting when a value is read past serde_json's limit: enough for
/// the unoptimised test build's frames (a few KiB a level for serde_json's descent and the CEL
/// conversion), address space only.
const STACK_PER_LEVEL: usize = 16 << 10;

/// Why a JSON value could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DeepError {
    /// Nested deeper than kube-apiserver decodes.
    #[error(
        "nested {depth} levels deep, deeper than the {MAX_DEPTH} levels kube-apiserver decodes"
    )]
    TooDeep {
        /// The value's nesting depth (arrays and objects open at once).
        depth: usize,
    },
    /// Not valid JSON for the type asked for.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The nesting depth of JSON `text`: the most arrays and objects open at once (brackets inside
/// strings do not count). A scan of the bytes, nothing allocated; meaningful for valid JSON.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                // Skip the string, escapes included.
                while let Some(c) = bytes.next() {
                    match c {
                        b'\\' => {
                            bytes.next();
                        }
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    deepest
}

/// Whether JSON `text` nests deeper than `limit` (arrays and objects open at once): as
/// `nesting_depth(text) > limit`, but it stops at the first bracket past `limit` and jumps
/// over strings with `memchr` (most of a Kubernetes object's bytes are in its keys and
/// values), so that asking costs a fraction of reading.
pub fn nests_deeper_than(text: &str, limit: usize) -> bool {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                // To the closing quote, escapes skipped.
                i += 1;
                while let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[i.min(bytes.len())..]) {
                    i += at;
                    if bytes[i] == b'"' {
                        break;
                    }
                    i += 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// The deepest nesting serde_json reads with its recursion limit on (it refuses 128).
pub const SERDE_JSON_MAX_DEPTH: usize = 127;

/// For a reader that does not recurse as it reads (one level at a time): refuses `text` as
/// serde_json's bounded read would, with serde_json's own recursion-limit error, when it
/// nests past [`SERDE_JSON_MAX_DEPTH`]. What is built from such a value later recurses as deep
/// as the value, so [`read_deep`] must see the refusal and read it again on a grown stack.
///
/// # Errors
/// serde_json's recursion limit ([`is_recursion_limit`]).
pub fn refuse_past_recursion_limit(text: &str) -> serde_json::Result<()> {
    if !nests_deeper_than(text, SERDE_JSON_MAX_DEPTH) {
        return Ok(());
    }
    let too_deep = "[".repeat(SERDE_JSON_MAX_DEPTH + 1);
    match serde_json::from_str::<serde_json::Value>(&too_deep) {
        Err(e) => Err(e),
        // serde_json reads no deeper than its limit: not reached.
        Ok(_) => Err(serde::de::Error::custom("recursion limit exceeded")),
    }
}

/// Whether `e` is serde_json's recursion limit (the value may still be valid JSON).
pub fn is_recursion_limit(e: &serde_json::Error) -> bool {
    e.classify() == serde_json::error::Category::Syntax
        && e.to_string().starts_with("recursion limit exceeded")
}

/// Runs `read` (which reads `texts` with serde_json's limit when given `false`) and, when it
/// fails at that limit, again with `true` (read without it, [`from_str_unbounded`]) on a stack
/// grown for the deepest of `texts`. Everything `read` builds from the values, and drops,
/// should happen inside it: only there is the stack known to be deep enough.
///
/// # Errors
/// [`DeepError::TooDeep`] past [`MAX_DEPTH`]; [`DeepError::Json`] for any other error of
/// `read`'s.
pub fn read_deep<R>(
    texts: &[Option<&str>],
    read: impl Fn(bool) -> Result<R, serde_json::Error>,
) -> Result<R, DeepError> {
    match read(false) {
        Err(e) if is_recursion_limit(&e) => {
            let depth = texts
                .iter()
                .flatten()
                .map(|t| nesting_depth(t))
                .max()
                .unwrap_or(0);
            if depth > MAX_DEPTH {
                return Err(DeepError::TooDeep { depth });
            }
            let size = (depth + 16).saturating_mul(STACK_PER_LEVEL);
            Ok(stacker::grow(size, || read(true))?)
        }
        other => Ok(other?),
    }
}

/// `text` read as `T` with serde_json's recursion limit, or without it when `unbounded` (only
/// inside [`read_deep`]'s `read`, or on a thread of [`THREAD_STACK_BYTES`]).
///
/// # Errors
/// serde_json's.
pub fn from_str<T: DeserializeOwned>(text: &str, unbounded: bool) -> serde_json::Result<T> {
    if !unbounded {
        return serde_json::from_str(text);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// `text` as a JSON tree however deep, up to [`MAX_DEPTH`]: for values that outlive the read
/// (held across a webhook call), on threads of [`THREAD_STACK_BYTES`].
///
/// # Errors
/// As [`read_deep`].
pub fn parse_value(text: &str) -> Result<serde_json::Value, DeepError> {
    read_deep(&[Some(text)], |unbounded| from_str(text, unbounded))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(nesting_depth("1"), 0);
        assert_eq!(nesting_depth(r#"{"a":[1,{"b":"[[[\"{"}]}"#), 3);
        assert_eq!(nesting_depth(&nested(300)), 300);
    }

    /// The early-stopping check agrees with the depth, brackets in strings and escaped quotes
    /// included.
    #[test]
    fn nests_deeper_than_agrees_with_the_depth() {
        for text in [
            "1",
            r#"{"a":[1,{"b":"[[[\"{"}]}"#,
            r#"["\\",["\"[",[]]]"#,
            r#""unterminated \"#,
            &nested(127),
            &nested(128),
            &nested(300),
        ] {
            let depth = nesting_depth(text);
            for limit in [0, 1, 2, 3, 126, 127, 128, 299, 300] {
                assert_eq!(
                    nests_deeper_than(text, limit),
                    depth > limit,
                    "{text} {limit}"
                );
            }
        }
    }

    /// serde_json alone stops at 128 levels; kube-apiserver's limit is 10,000.
    #[test]
    fn values_as_deep_as_kube_apiserver_reads_them_are_read() {
        let at_limit = nested(MAX_DEPTH);
        assert!(is_recursion_limit(
            &serde_json::from_str::<serde_json::Value>(&at_limit).unwrap_err()
        ));
        let depth = std::thread::Builder::new()
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                let value = parse_value(&at_limit).unwrap();
                let mut depth = 0;
                let mut at = &value;
                while let Some(inner) = at.get(0) {
                    depth += 1;
                    at = inner;
                }
                depth
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(depth, MAX_DEPTH);
        match parse_value(&nested(MAX_DEPTH + 1)) {
            Err(DeepError::TooDeep { depth }) => assert_eq!(depth, MAX_DEPTH + 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_value("[1,"), Err(DeepError::Json(_))));
    }
}

//! What never leaves the process: Secret values in AdmissionReviews, wherever a body is
//! written (captures, trace logs, `explain` output), and the fields `--redact-path` names.
//! Plain JSON work; depends only on `deep_json`.
//!
//! A Secret's values are in `data` and `stringData`, and a copy of them in the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation whenever the Secret was
//! written with `kubectl apply` (the annotation is the applied object as JSON). All three are
//! replaced in `object` and `oldObject`; keys stay, so what was there is still visible.

use std::str::FromStr;

use serde_json::Value;

/// What replaces a redacted value.
pub(crate) const REDACTED: &str = "REDACTED";

/// The annotation `kubectl apply` keeps the applied object in (`kubectl.kubernetes.io/`
/// `last-applied-configuration`, k8s.io/kubectl `pkg/util/apply`): for a Secret, its values.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A field to redact (`--redact-path`): a JSON Pointer (RFC 6901, `/request/object/metadata/
/// annotations/example.com~1token`, `~1` for `/` and `~0` for `~`), or a dotted path
/// (`request.object.spec.password`) for keys without dots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedactPath {
    /// The keys from the AdmissionReview's root, unescaped.
    keys: Vec<String>,
}

/// Why a `--redact-path` is not a path.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedactPathError {
    /// `""`: the whole review cannot be redacted away.
    #[error("an empty path names the whole AdmissionReview")]
    Empty,
    /// A `~` not followed by `0` or `1`.
    #[error("{0:?}: a JSON Pointer escapes only ~0 (~) and ~1 (/)")]
    BadEscape(String),
}

impl FromStr for RedactPath {
    type Err = RedactPathError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let keys: Vec<String> = match s.strip_prefix('/') {
            Some(pointer) => pointer
                .split('/')
                .map(|key| unescape(key).ok_or_else(|| RedactPathError::BadEscape(s.into())))
                .collect::<Result<_, _>>()?,
            None if s.is_empty() => return Err(RedactPathError::Empty),
            None => s.split('.').map(str::to_string).collect(),
        };
        Ok(RedactPath { keys })
    }
}

/// A JSON Pointer reference token unescaped: `~1` is `/`, `~0` is `~`, any other `~` is an
/// error (RFC 6901 section 4).
fn unescape(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Replaces Secret `data`, `stringData` and last-applied-configuration values in `object` and
/// `oldObject`, and every field at `paths`, with [`REDACTED`]. Returns whether anything was
/// replaced.
pub(crate) fn redact(review: &mut Value, paths: &[RedactPath]) -> bool {
    let mut replaced = false;
    let mut replace = |v: &mut Value| {
        *v = Value::String(REDACTED.into());
        replaced = true;
    };
    let secret = review.pointer("/request/kind/kind").and_then(Value::as_str) == Some("Secret")
        && review
            .pointer("/request/kind/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty();
    if secret {
        for object in ["object", "oldObject"] {
            let Some(object) = review.get_mut("request").and_then(|r| r.get_mut(object)) else {
                continue;
            };
            for field in ["data", "stringData"] {
                if let Some(Value::Object(values)) = object.get_mut(field) {
                    values.values_mut().for_each(&mut replace);
                }
            }
            if let Some(v) = object
                .pointer_mut("/metadata/annotations")
                .and_then(|a| a.get_mut(LAST_APPLIED))
            {
                replace(v);
            }
        }
    }
    for path in paths {
        let mut at = Some(&mut *review);
        for key in &path.keys {
            at = at.and_then(|v| v.get_mut(key.as_str()));
        }
        if let Some(v) = at {
            replace(v);
        }
    }
    replaced
}

/// `body` (an AdmissionReview) with [`redact`] applied, as JSON text for a log line or
/// `explain`: byte for byte when nothing is redacted, re-serialized otherwise; a body that is
/// not JSON, or nested deeper than kube-apiserver reads ([`crate::deep_json`]), is described
/// by its size only. Run on a thread of [`crate::deep_json::THREAD_STACK_BYTES`].
pub(crate) fn redacted_text(body: &[u8], paths: &[RedactPath]) -> String {
    let Some((text, mut review)) = std::str::from_utf8(body)
        .ok()
        .and_then(|text| Some((text, crate::deep_json::parse_value(text).ok()?)))
    else {
        return format!("<{} bytes, not JSON>", body.len());
    };
    if redact(&mut review, paths) {
        review.to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_and_named_paths_are_redacted_keys_kept() {
        let mut review = json!({"request": {
            "kind": {"group": "", "version": "v1", "kind": "Secret"},
            "object": {"data": {"password": "c2VjcmV0"}, "stringData": {"token": "t"}},
            "oldObject": {"data": {"password": "b2xk"}},
            "userInfo": {"extra": {"token": ["x"]}}
        }});
        redact(&mut review, &["request.userInfo.extra".parse().unwrap()]);
        assert_eq!(review["request"]["object"]["data"]["password"], REDACTED);
        assert_eq!(review["request"]["object"]["stringData"]["token"], REDACTED);
        assert_eq!(review["request"]["oldObject"]["data"]["password"], REDACTED);
        assert_eq!(review["request"]["userInfo"]["extra"], REDACTED);
        // A ConfigMap's data is not a Secret's.
        let mut cm = json!({"request": {"kind": {"group": "", "kind": "ConfigMap"},
            "object": {"data": {"a": "b"}}}});
        redact(&mut cm, &[]);
        assert_eq!(cm["request"]["object"]["data"]["a"], "b");
    }

    /// A Secret written with `kubectl apply` carries its values again in the
    /// last-applied-configuration annotation, which captures kept.
    #[test]
    fn the_last_applied_copy_of_a_secret_is_redacted() {
        let applied = r#"{"apiVersion":"v1","data":{"password":"c2VjcmV0"},"kind":"Secret","metadata":{"name":"db"}}"#;
        let mut review = json!({"request": {
            "kind": {"group": "", "version": "v1", "kind": "Secret"},
            "object": {"metadata": {"name": "db", "annotations": {LAST_APPLIED: applied, "team": "a"}},
                       "data": {"password": "c2VjcmV0"}},
            "oldObject": {"metadata": {"annotations": {LAST_APPLIED: applied}}}
        }});
        redact(&mut review, &[]);
        let text = review.to_string();
        assert!(!text.contains("c2VjcmV0"), "{text}");
        assert_eq!(
            review["request"]["object"]["metadata"]["annotations"][LAST_APPLIED],
            REDACTED
        );
        assert_eq!(
            review["request"]["object"]["metadata"]["annotations"]["team"],
            "a"
        );
    }

    /// Annotation keys have dots and slashes, which a dotted path cannot name.
    #[test]
    fn json_pointers_name_keys_with_dots_and_slashes() {
        let path: RedactPath = "/request/object/metadata/annotations/example.com~1token"
            .parse()
            .unwrap();
        let mut review = json!({"request": {"kind": {"kind": "ConfigMap"}, "object": {"metadata":
            {"annotations": {"example.com/token": "hunter2", "other": "x"}}}}});
        redact(&mut review, &[path]);
        assert_eq!(
            review["request"]["object"]["metadata"]["annotations"],
            json!({"example.com/token": REDACTED, "other": "x"})
        );
        assert_eq!(
            "/a/~2".parse::<RedactPath>(),
            Err(RedactPathError::BadEscape("/a/~2".into()))
        );
        assert_eq!("".parse::<RedactPath>(), Err(RedactPathError::Empty));
        assert_eq!(
            "/a~0b/c".parse::<RedactPath>().unwrap(),
            RedactPath {
                keys: vec!["a~b".into(), "c".into()]
            }
        );
    }

    #[test]
    fn text_for_logs_is_redacted_json_or_a_size() {
        let body = br#"{"request":{"kind":{"group":"","kind":"Secret"},"object":{"data":{"k":"dmFsdWU="}}}}"#;
        let text = redacted_text(body, &[]);
        assert!(!text.contains("dmFsdWU="), "{text}");
        assert_eq!(redacted_text(b"{not json", &[]), "<9 bytes, not JSON>");
        // Nothing to redact: the body as it was, key order and spacing included.
        let plain = br#"{"b": 1, "a": {"kind": "ConfigMap"}}"#;
        assert_eq!(redacted_text(plain, &[]).as_bytes(), plain);
    }
}

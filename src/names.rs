//! Kubernetes name formats (`k8s.io/apimachinery/pkg/util/validation`), used by config
//! validation and by the authz CEL library (`serviceAccount`). Depends on nothing.

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// DNS-1123 label: at most 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower)
}

/// DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| is_alnum_lower(c) || c == '-')
                && part.starts_with(is_alnum_lower)
                && part.ends_with(is_alnum_lower)
        })
}

/// DNS-1035 label: at most 63 characters of `[a-z]([-a-z0-9]*[a-z0-9])?`.
pub(crate) fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// `IsFullyQualifiedName`: a DNS-1123 subdomain with at least three segments (webhook names).
pub(crate) fn is_fully_qualified_name(s: &str) -> bool {
    is_dns1123_subdomain(s) && s.split('.').count() >= 3
}

fn is_qualified_name_part(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

/// Qualified name (label keys, matchCondition names): an optional DNS-subdomain prefix and `/`,
/// then at most 63 characters of `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_qualified_name_part(name),
        None => is_qualified_name_part(s),
    }
}

/// Label value: empty, or a qualified-name part.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_qualified_name_part(s)
}

/// `IsQualifiedName`'s messages, in order; empty when `value` is a qualified name. The port of
/// apimachinery's validation the Kubernetes CEL `format` library uses too (vendored kube-cel's
/// `go` module), so that both say the same.
pub(crate) fn qualified_name_errors(value: &str) -> Vec<String> {
    kube_cel::go::qualified_name(value)
}

/// `IsValidLabelValue`'s messages, in order; empty when `value` is a label value.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    kube_cel::go::label_value(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert!(is_fully_qualified_name("policy.example.com"));
        assert!(!is_fully_qualified_name("example.com"), "two segments");
        assert!(
            !is_fully_qualified_name("disallow"),
            "the upstream unit tests' names fail (webhook/testing/testcase.go)"
        );
        assert!(!is_fully_qualified_name("Policy.example.com"));
        assert!(is_dns1035_label("v1beta1") && !is_dns1035_label("1v"));
        assert!(
            is_qualified_name("kubernetes.io/metadata.name") && is_qualified_name("exclude_leases")
        );
        assert!(!is_qualified_name("-x") && !is_qualified_name("a/b/c"));
        assert!(is_label_value("") && is_label_value("prod") && !is_label_value("no spaces"));
        // apimachinery's words, as kube-apiserver 1.32.0 answers `kubectl apply` with them.
        assert_eq!(
            qualified_name_errors("bad key!"),
            ["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        assert_eq!(
            qualified_name_errors("Example.com/x"),
            ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert!(qualified_name_errors("kubernetes.io/metadata.name").is_empty());
        assert_eq!(
            label_value_errors("no spaces"),
            ["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
        );
    }
}

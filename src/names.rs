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
    }
}

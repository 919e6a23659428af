//! Where a legacy webhook or a CRD conversion webhook lives: `clientConfig` turned into a
//! dialable target with its trust roots, as `ClientManager.HookClient` does
//! (`staging/src/k8s.io/apiserver/pkg/util/webhook/client.go`). Depends on `api` and
//! `field_error`.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use std::sync::Arc;

use base64::Engine;
use pingora::utils::tls::WrappedX509;

use crate::api::{ServiceReference, WebhookClientConfig};
use crate::field_error::{BadValue, Error as FieldError, ErrorType};

/// A legacy webhook backend.
#[derive(Clone, Debug)]
pub struct Backend {
    /// The URL without query, as it appears in error messages (`https://host:port/path`).
    pub(crate) url: String,
    /// `https` (true) or plain `http` (loopback only, a documented extension).
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Request path; `path.Join` semantics: no trailing `/`, empty becomes `/`.
    pub(crate) path: String,
    /// Trust roots from `caBundle` (DER); `None` means the system roots.
    pub(crate) ca_bundle: Option<Arc<[WrappedX509]>>,
    /// When the first of `caBundle`'s certificates expires (its soonest `notAfter`, Unix
    /// seconds): from then on a backend certificate it signed no longer verifies.
    pub(crate) ca_bundle_expiry: Option<i64>,
    /// Distinguishes connection pools of backends with different trust roots or server names.
    pub(crate) ca_fingerprint: u64,
    /// Which idle connections a call may reuse: same address, scheme, server name and trust
    /// roots (computed here, once, not per call).
    pub(crate) pool_key: u64,
    /// The `Host` header value: `host` (IPv6 in brackets), with `:port` unless it is the
    /// scheme's default (as Go's transport writes it). Computed here, not per call.
    pub(crate) host_header: String,
    /// The TLS server name (SNI, and the name the certificate must carry) when it differs from
    /// `host`: the proxy's `tlsServerName` option (config::options). `None`: `host`.
    pub(crate) server_name: Option<String>,
    /// The self-signed certificates in `caBundle`.
    self_signed: Arc<[SelfSignedLeaf]>,
    /// Those of them that carry the server name: the backend may present one of them as its
    /// own leaf (see [`SelfSignedLeaf`]). Empty for most backends.
    pub(crate) self_signed_leaves: Arc<[SelfSignedLeaf]>,
    /// A `caBundle` that decodes but holds no usable certificate: kube-apiserver accepts the
    /// configuration and fails every call when it builds the client, in client-go's words
    /// (`rootCertPool`, `staging/src/k8s.io/client-go/transport/transport.go`: `unable to load
    /// root certificates: unable to parse bytes as PEM block`). The proxy fails each call with
    /// it too, by failurePolicy.
    pub(crate) rest_client_error: Option<Arc<str>>,
}

/// A self-signed certificate from `caBundle` that is also valid as the backend's own leaf.
///
/// Go's `crypto/x509` (kube-apiserver's webhook client) accepts a chain that consists of a
/// trust anchor alone: a self-signed certificate in `caBundle`, presented by the backend,
/// verifies even with `CA:TRUE` (webpki, which rustls uses, refuses a CA certificate as an end
/// entity: `CaUsedAsEndEntity`). The proxy accepts exactly those: the presented leaf must be
/// byte-for-byte one of these certificates, within its validity period, and carry the server
/// name; the TLS handshake signature is still verified against its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SelfSignedLeaf {
    /// SHA-256 of the DER certificate (pingora's `SslDigest::cert_digest`).
    pub(crate) sha256: Vec<u8>,
    /// Validity, Unix seconds.
    pub(crate) not_before: i64,
    pub(crate) not_after: i64,
    /// DNS names and IP addresses of the subjectAltName extension (Go ignores the CN).
    pub(crate) names: Vec<String>,
}

impl SelfSignedLeaf {
    /// Whether the certificate carries `name` (DNS, with a single leftmost `*` label, or IP).
    pub(crate) fn covers(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.names.iter().any(|n| {
            let n = n.to_ascii_lowercase();
            n == name
                || n.strip_prefix("*.").is_some_and(|suffix| {
                    name.split_once('.')
                        .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix)
                })
        })
    }
}

impl Backend {
    /// Builds the target of a validated `clientConfig`.
    ///
    /// # Errors
    /// A field error (fields under `clientConfig`) for a URL that is not `https` (or `http` to a loopback host), carries
    /// user info, a query or a fragment; a service without name or namespace, a port outside
    /// 1-65535, a path not starting with `/`; a `caBundle` that is not base64 PEM certificates.
    pub fn from_client_config(cc: &WebhookClientConfig) -> Result<Self, FieldError> {
        let trust = Trust::from_ca_bundle(cc.ca_bundle.as_deref())?;
        let target = match (&cc.url, &cc.service) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(FieldError::required(
                    "clientConfig",
                    "exactly one of url or service is required",
                ))
            }
            (Some(raw), None) => Target::from_url(raw)?,
            (None, Some(svc)) => Target::from_service(svc)?,
        };
        Ok(Backend {
            url: target.url,
            tls: target.tls,
            host: target.host,
            port: target.port,
            path: target.path,
            ca_bundle_expiry: trust.ca_bundle.as_deref().and_then(soonest_expiry),
            ca_bundle: trust.ca_bundle,
            ca_fingerprint: trust.fingerprint,
            server_name: None,
            self_signed: trust.self_signed_leaves,
            self_signed_leaves: Arc::from(Vec::new()),
            pool_key: 0,
            host_header: String::new(),
            rest_client_error: trust.rest_client_error,
        }
        .derived())
    }
}

/// What a `caBundle` gives a backend.
struct Trust {
    /// The certificates; `None` without a caBundle (the system roots) or when it is unusable.
    ca_bundle: Option<Arc<[WrappedX509]>>,
    /// A hash of the certificates' bytes (0 without), part of the pool key.
    fingerprint: u64,
    /// The self-signed leaf certificates in it.
    self_signed_leaves: Arc<[SelfSignedLeaf]>,
    /// client-go's words for a bundle that decodes but cannot be used: each call fails with
    /// them.
    rest_client_error: Option<Arc<str>>,
}

impl Trust {
    /// # Errors
    /// A bundle that is not base64: the API itself cannot decode the `[]byte` field.
    fn from_ca_bundle(ca_bundle: Option<&str>) -> Result<Self, FieldError> {
        let none = |rest_client_error| Trust {
            ca_bundle: None,
            fingerprint: 0,
            self_signed_leaves: Arc::from(Vec::new()),
            rest_client_error,
        };
        let Some(b64) = ca_bundle.filter(|s| !s.is_empty()) else {
            return Ok(none(None));
        };
        match parse_ca_bundle(b64) {
            Ok((certs, leaves)) => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                for cert in certs.iter() {
                    cert.borrow_raw_cert().hash(&mut h);
                }
                Ok(Trust {
                    ca_bundle: Some(certs),
                    fingerprint: h.finish(),
                    self_signed_leaves: leaves,
                    rest_client_error: None,
                })
            }
            Err(e @ CaBundleError::NotBase64(_)) => Err(FieldError::new(
                ErrorType::Invalid,
                "clientConfig.caBundle",
                BadValue::Omitted,
                e.to_string(),
            )),
            Err(e) => Ok(none(Some(Arc::from(e.client_go_words())))),
        }
    }
}

/// Where a backend is: `clientConfig.url` or `clientConfig.service`, validated as
/// `ValidateWebhookClientConfig` validates them.
struct Target {
    url: String,
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

impl Target {
    /// `clientConfig.url`: https, or http to a loopback host.
    fn from_url(raw: &str) -> Result<Self, FieldError> {
        let invalid = |detail: String| FieldError::invalid("clientConfig.url", raw, detail);
        let url = url::Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        let host = url
            .host_str()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if host.is_empty() {
            return Err(invalid("host must be specified".into()));
        }
        let tls = match url.scheme() {
            "https" => true,
            "http" if is_loopback(&host) => false,
            "http" => {
                return Err(invalid(
                    "'https' is required (plain 'http' is only accepted for loopback backends)"
                        .into(),
                ))
            }
            other => return Err(invalid(format!("'https' is required, got {other:?}"))),
        };
        refuse_url_parts(raw, &url).map_err(|e| invalid(e.to_string()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let path = join_path(url.path());
        Ok(Target {
            url: format!("{}://{}{}", url.scheme(), authority(&host, port), path),
            tls,
            host,
            port,
            path,
        })
    }

    /// `clientConfig.service`: `https://<name>.<namespace>.svc:<port><path>`.
    fn from_service(svc: &ServiceReference) -> Result<Self, FieldError> {
        if svc.name.is_empty() {
            return Err(FieldError::required(
                "clientConfig.service.name",
                "service name is required",
            ));
        }
        if svc.namespace.is_empty() {
            return Err(FieldError::required(
                "clientConfig.service.namespace",
                "service namespace is required",
            ));
        }
        let port = svc.port.unwrap_or(443);
        if !(1..=65535).contains(&port) {
            return Err(FieldError::invalid(
                "clientConfig.service.port",
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
        let raw_path = svc.path.as_deref().unwrap_or("");
        if !raw_path.is_empty() && !raw_path.starts_with('/') {
            return Err(FieldError::invalid(
                "clientConfig.service.path",
                raw_path,
                "must start with a '/'",
            ));
        }
        let host = format!("{}.{}.svc", svc.name, svc.namespace);
        let path = join_path(raw_path);
        Ok(Target {
            url: format!("https://{host}:{port}{path}"),
            tls: true,
            host,
            port: port as u16,
            path,
        })
    }
}

impl Backend {
    /// Sets the TLS server name (`tlsServerName`); a different name gets its own connection
    /// pool.
    pub(crate) fn set_server_name(&mut self, server_name: Option<String>) {
        if let Some(name) = &server_name {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self.ca_fingerprint, name).hash(&mut h);
            self.ca_fingerprint = h.finish();
        }
        self.server_name = server_name;
        self.derive();
    }

    fn derived(mut self) -> Self {
        self.derive();
        self
    }

    /// Recomputes what follows from the address, server name and trust roots.
    fn derive(&mut self) {
        self.self_signed_leaves = self.leaves_for_name();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &self.host,
            self.port,
            self.tls,
            &self.server_name,
            self.ca_fingerprint,
        )
            .hash(&mut h);
        self.pool_key = h.finish();
        // Go's transport omits the scheme's default port from `Host` (net/http `Request.Host`
        // from the URL as kube-apiserver's webhook client builds it).
        self.host_header = match (self.tls, self.port) {
            (true, 443) | (false, 80) if self.host.contains(':') => format!("[{}]", self.host),
            (true, 443) | (false, 80) => self.host.clone(),
            _ => authority(&self.host, self.port),
        };
    }

    fn leaves_for_name(&self) -> Arc<[SelfSignedLeaf]> {
        let name = self.tls_server_name();
        self.self_signed
            .iter()
            .filter(|l| l.covers(name))
            .cloned()
            .collect()
    }

    /// The namespace of the Service the backend is, when it is one.
    pub(crate) fn service_namespace(&self) -> Option<&str> {
        // `NAME.NAMESPACE.svc`, as a `service` reference is dialled, or a URL naming the
        // Service's cluster DNS name (`...svc.cluster.local`).
        let mut labels = self.host.split('.');
        let (_, namespace, svc) = (labels.next()?, labels.next()?, labels.next()?);
        (svc == "svc").then_some(namespace)
    }

    /// The name sent as SNI and verified in the backend's certificate.
    pub(crate) fn tls_server_name(&self) -> &str {
        self.server_name.as_deref().unwrap_or(&self.host)
    }
}

/// `host:port`, an IPv6 host in brackets (Go's `net.JoinHostPort`).
pub(crate) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Loopback hosts: 127.0.0.0/8, ::1 and `localhost`.
pub(crate) fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What kube-apiserver refuses in every webhook URL besides its scheme, in the order it checks
/// (`ValidateWebhookURL`, `staging/src/k8s.io/apiserver/pkg/util/webhook/validation.go`). The
/// texts are kube-apiserver's. Both a backend's `clientConfig.url` and `registration --url`
/// are held to it; each has its own scheme rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefusal {
    /// No host (`len(u.Host) == 0`).
    #[error("host must be specified")]
    Host,
    /// A user, even an empty one (`u.User != nil`: `https://@host` too).
    #[error("user information is not permitted in the URL")]
    UserInfo,
    /// A fragment that is not empty (`len(u.Fragment) != 0`: `https://host/path#` is valid).
    #[error("fragments are not permitted in the URL")]
    Fragment,
    /// A query that is not empty (`len(u.RawQuery) != 0`: `https://host/path?` is valid).
    #[error("query parameters are not permitted in the URL")]
    Query,
}

/// Checks `url` (parsed from `raw`) against [`UrlRefusal`]'s rules, the first broken one
/// reported. `raw` is read for an empty user (`https://@host`), which the URL standard's
/// parser drops and Go's `url.Parse` keeps.
///
/// # Errors
/// The first [`UrlRefusal`] that applies.
///
/// ```
/// use admission_proxy::backend::{refuse_url_parts, UrlRefusal};
///
/// let check = |raw: &str| refuse_url_parts(raw, &url::Url::parse(raw).unwrap());
/// assert_eq!(check("https://hooks.example.com/validate?"), Ok(()));
/// assert_eq!(check("https://@hooks.example.com/"), Err(UrlRefusal::UserInfo));
/// assert_eq!(check("https://hooks.example.com/#a?b=c"), Err(UrlRefusal::Fragment));
/// ```
pub fn refuse_url_parts(raw: &str, url: &url::Url) -> Result<(), UrlRefusal> {
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlRefusal::Host);
    }
    // The authority ends at the first `/`, `?` or `#` (`\` is a `/` in special schemes).
    let authority = raw
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '\\', '?', '#']).next())
        .unwrap_or("");
    if !url.username().is_empty() || url.password().is_some() || authority.contains('@') {
        return Err(UrlRefusal::UserInfo);
    }
    if url.fragment().is_some_and(|f| !f.is_empty()) {
        return Err(UrlRefusal::Fragment);
    }
    if url.query().is_some_and(|q| !q.is_empty()) {
        return Err(UrlRefusal::Query);
    }
    Ok(())
}

/// The soonest `notAfter` of `certs` (Unix seconds); `None` for none.
fn soonest_expiry(certs: &[WrappedX509]) -> Option<i64> {
    certs
        .iter()
        .map(|c| c.borrow_cert().validity().not_after.timestamp())
        .min()
}

/// Go's `path.Join(path)` for a single absolute path: trailing `/` dropped, empty becomes `/`.
fn join_path(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    }
}

/// Why a `caBundle` cannot be used; shown after `Invalid value: ` under `clientConfig.caBundle`,
/// the decoder's words included (so no `source()`).
#[derive(Debug, thiserror::Error)]
enum CaBundleError {
    #[error("not base64: {0}")]
    NotBase64(base64::DecodeError),
    #[error("not PEM: {0}")]
    NotPem(std::io::Error),
    /// The certificate at `index` (0-based) is not X.509; the parser's error as text, its
    /// type borrowing from the certificate.
    #[error("certificate {index} does not parse: {message}")]
    Unparsable { index: usize, message: String },
    /// No certificate: `pem_blocks` when it holds PEM blocks of other types.
    #[error("no PEM certificate found")]
    Empty { pem_blocks: bool },
}

impl CaBundleError {
    /// What client-go says of such a bundle when it builds the webhook's client
    /// (`rootCertPool` and `createErrorParsingCAData`), after `unable to load root
    /// certificates: `.
    fn client_go_words(&self) -> String {
        let why = match self {
            CaBundleError::Unparsable { message, .. } => {
                format!("failed to parse certificate: {message}")
            }
            CaBundleError::Empty { pem_blocks: true } => {
                "no valid certificate authority data seen".to_string()
            }
            _ => "unable to parse bytes as PEM block".to_string(),
        };
        format!("unable to load root certificates: {why}")
    }
}

/// A decoded `caBundle`: its certificates, and those that are self-signed.
type CaBundle = (Arc<[WrappedX509]>, Arc<[SelfSignedLeaf]>);

/// Decodes a `caBundle` (base64 of PEM) into parsed X.509 certificates, once, at load: the
/// request path only clones the `Arc`. Also returns its self-signed certificates (see
/// [`SelfSignedLeaf`]).
fn parse_ca_bundle(b64: &str) -> Result<CaBundle, CaBundleError> {
    let compact: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(CaBundleError::NotBase64)?;
    let mut reader = std::io::BufReader::new(pem.as_slice());
    let mut certs = Vec::new();
    let mut leaves = Vec::new();
    for cert in rustls_pemfile::certs(&mut reader) {
        let cert = cert.map_err(CaBundleError::NotPem)?;
        // Parsed here so that pingora, which panics on unparsable roots, never sees one.
        let wrapped = WrappedX509::try_new(cert.as_ref().to_vec(), |raw| {
            x509_parser::parse_x509_certificate(raw).map(|(_, c)| c)
        })
        .map_err(|e| CaBundleError::Unparsable {
            index: certs.len(),
            message: e.to_string(),
        })?;
        if let Some(leaf) = self_signed_leaf(wrapped.borrow_cert(), cert.as_ref()) {
            leaves.push(leaf);
        }
        certs.push(wrapped);
    }
    if certs.is_empty() {
        let pem_blocks = pem.windows(11).any(|w| w == b"-----BEGIN ");
        return Err(CaBundleError::Empty { pem_blocks });
    }
    Ok((Arc::from(certs), Arc::from(leaves)))
}

/// The certificate as a [`SelfSignedLeaf`] when its subject is its issuer and its signature
/// verifies with its own key.
fn self_signed_leaf(
    cert: &x509_parser::certificate::X509Certificate<'_>,
    der: &[u8],
) -> Option<SelfSignedLeaf> {
    use x509_parser::extensions::GeneralName;
    if cert.subject() != cert.issuer() || cert.verify_signature(None).is_err() {
        return None;
    }
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some(d.to_string()),
                    GeneralName::IPAddress(ip) => match ip.len() {
                        4 => Some(IpAddr::from(<[u8; 4]>::try_from(*ip).ok()?).to_string()),
                        16 => Some(IpAddr::from(<[u8; 16]>::try_from(*ip).ok()?).to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(SelfSignedLeaf {
        sha256: ring::digest::digest(&ring::digest::SHA256, der)
            .as_ref()
            .to_vec(),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServiceReference;

    fn url(u: &str) -> Result<Backend, FieldError> {
        Backend::from_client_config(&WebhookClientConfig {
            url: Some(u.into()),
            ..Default::default()
        })
    }

    #[test]
    fn urls() {
        let b = url("https://127.0.0.1:9443/validate/").unwrap();
        assert_eq!(
            (b.host.as_str(), b.port, b.path.as_str(), b.tls),
            ("127.0.0.1", 9443, "/validate", true)
        );
        assert_eq!(url("https://hooks.example.com").unwrap().path, "/");
        assert_eq!(url("https://hooks.example.com").unwrap().port, 443);
        assert!(!url("http://localhost:8080/x").unwrap().tls);
        assert!(url("http://10.0.0.1/x")
            .unwrap_err()
            .body()
            .contains("https"));
        assert!(url("https://u:p@h.example.com/")
            .unwrap_err()
            .body()
            .contains("user information"));
        assert!(url("https://h.example.com/?a=b")
            .unwrap_err()
            .body()
            .contains("query"));
        assert!(url("https://h.example.com/#f")
            .unwrap_err()
            .body()
            .contains("fragment"));
        // kube-apiserver refuses a query or fragment only when it is not empty
        // (`len(u.RawQuery) != 0`, `len(u.Fragment) != 0`), and any user, even an empty one.
        for valid in ["https://h.example.com/v?", "https://h.example.com/v#"] {
            let b = url(valid).unwrap();
            assert_eq!(
                (b.path.as_str(), b.url.as_str()),
                ("/v", "https://h.example.com:443/v")
            );
        }
        assert!(url("https://@h.example.com/")
            .unwrap_err()
            .body()
            .contains("user information"));
        assert_eq!(
            url("https://[::1]:8443/v").unwrap().url,
            "https://[::1]:8443/v"
        );
    }

    #[test]
    fn host_headers() {
        let host = |u: &str| url(u).unwrap().host_header;
        assert_eq!(host("https://hooks.example.com/v"), "hooks.example.com");
        assert_eq!(host("https://hooks.example.com:443/v"), "hooks.example.com");
        assert_eq!(
            host("https://hooks.example.com:8443/v"),
            "hooks.example.com:8443"
        );
        assert_eq!(host("https://[::1]/v"), "[::1]");
        assert_eq!(host("https://[::1]:8443/v"), "[::1]:8443");
        assert_eq!(host("http://localhost:80/v"), "localhost");
        assert_eq!(host("http://127.0.0.1:8080/v"), "127.0.0.1:8080");
    }

    #[test]
    fn services() {
        let svc = |port, path: Option<&str>| {
            Backend::from_client_config(&WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: "ns".into(),
                    name: "hook".into(),
                    path: path.map(Into::into),
                    port,
                }),
                ..Default::default()
            })
        };
        assert_eq!(
            svc(None, Some("/v")).unwrap().url,
            "https://hook.ns.svc:443/v"
        );
        assert_eq!(
            svc(Some(8443), None).unwrap().url,
            "https://hook.ns.svc:8443/"
        );
        assert!(svc(Some(0), None).is_err());
        assert!(svc(None, Some("v")).unwrap_err().field.ends_with("path"));
        let both = Backend::from_client_config(&WebhookClientConfig {
            url: Some("https://a.b.c/".into()),
            service: Some(ServiceReference::default()),
            ca_bundle: None,
        });
        assert!(both.unwrap_err().body().contains("exactly one"));
    }

    /// Not base64 is refused (the API cannot decode the field); base64 that holds no usable
    /// certificate loads, as kube-apiserver accepts it, and carries client-go's words for the
    /// calls to fail with.
    #[test]
    fn bad_ca_bundles() {
        let cc = |ca: &str| WebhookClientConfig {
            url: Some("https://a.b.c/".into()),
            ca_bundle: Some(ca.into()),
            ..Default::default()
        };
        assert!(Backend::from_client_config(&cc("!!!"))
            .unwrap_err()
            .body()
            .contains("base64"));
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        for (bundle, want) in [
            (
                "hello",
                "unable to load root certificates: unable to parse bytes as PEM block",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "unable to load root certificates: no valid certificate authority data seen",
            ),
            (
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "unable to load root certificates: failed to parse certificate: ",
            ),
        ] {
            let backend = Backend::from_client_config(&cc(&b64(bundle))).unwrap();
            let error = backend.rest_client_error.unwrap();
            assert!(error.starts_with(want), "{bundle}: {error}");
        }
    }
}

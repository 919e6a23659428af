//! TLS towards kube-apiserver: the serving pair in a resolver swapped at runtime (rotation
//! without restart), client-certificate verification (`--client-ca-file`, also swapped at
//! runtime, with an optional CN allow-list), and the minimum protocol version. Depends on nothing
//! else in this crate. (The demo's and the tests' self-signed certificates are the binary's
//! `pki` module.)

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// Why a certificate pair cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// Why it could not be read (quoted, not a `source()`).
        error: std::io::Error,
    },
    /// The PEM does not hold a usable certificate or key; why.
    #[error("{0}")]
    Invalid(String),
}

/// A server certificate resolver whose pair can be replaced while serving.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl CertResolver {
    /// A resolver serving `key`.
    pub fn new(key: CertifiedKey) -> Self {
        CertResolver {
            current: ArcSwap::from_pointee(key),
        }
    }

    /// Replaces the served pair; handshakes already under way keep the old one.
    pub(crate) fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
}

/// Builds a certified key from PEM text (certificate chain, private key).
///
/// # Errors
/// [`TlsError::Invalid`] when no certificate or key is found or the key type is unsupported.
pub fn certified_key_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid(format!("certificate PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::Invalid(
            "no certificate in the certificate file".into(),
        ));
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| TlsError::Invalid(format!("private key PEM: {e}")))?
        .ok_or_else(|| TlsError::Invalid("no private key in the key file".into()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| TlsError::Invalid(format!("private key: {e}")))?;
    let pair = CertifiedKey::new(certs, signing);
    // A pair that does not match would fail every handshake; refuse it where it is loaded.
    pair.keys_match().map_err(|_| {
        TlsError::Invalid(
            "the private key does not match the certificate (first certificate of the file)".into(),
        )
    })?;
    Ok(pair)
}

/// Loads a certificate pair from files.
///
/// # Errors
/// [`TlsError`] for unreadable files or invalid PEM.
pub fn load_certified_key(cert_file: &Path, key_file: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |p: &Path| {
        crate::files::read(p, crate::files::MAX_PEM_FILE_BYTES).map_err(|error| TlsError::Io {
            path: p.display().to_string(),
            error,
        })
    };
    certified_key_from_pem(&read(cert_file)?, &read(key_file)?).map_err(|e| match e {
        TlsError::Invalid(m) => TlsError::Invalid(format!(
            "{} and {}: {m}",
            cert_file.display(),
            key_file.display()
        )),
        io => io,
    })
}

/// When the first certificate of `key`'s chain expires, Unix seconds.
pub(crate) fn not_after(key: &CertifiedKey) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(key.cert.first()?).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// The lowest TLS version the server accepts (`--tls-min-version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MinVersion {
    /// TLS 1.2 and 1.3 (kube-apiserver's webhook client speaks both).
    #[value(name = "1.2")]
    Tls12,
    /// TLS 1.3 only.
    #[value(name = "1.3")]
    Tls13,
}

/// Verifies kube-apiserver's client certificate against `--client-ca-file`, whose CA set can be
/// replaced while serving; with a non-empty `--client-cn` list, the certificate's subject CN
/// must also be one of them.
///
/// No CA names are sent in the CertificateRequest: Go's client (kube-apiserver) then sends its
/// one configured certificate, whichever CA issued it, and the verifier decides.
#[derive(Debug)]
pub struct ClientAuth {
    verifier: ArcSwap<Arc<dyn ClientCertVerifier>>,
    allowed_cns: Vec<String>,
}

impl ClientAuth {
    /// Requires client certificates issued by a CA of `ca_pem` (PEM, one or more certificates).
    ///
    /// # Errors
    /// [`TlsError::Invalid`] when the PEM holds no usable CA certificate.
    pub(crate) fn new(ca_pem: &[u8], allowed_cns: Vec<String>) -> Result<Self, TlsError> {
        Ok(ClientAuth {
            verifier: ArcSwap::from_pointee(client_verifier(ca_pem)?),
            allowed_cns,
        })
    }

    /// Replaces the CA set; handshakes under way keep the old one.
    ///
    /// # Errors
    /// As [`ClientAuth::new`]; the current CA set stays.
    pub(crate) fn replace(&self, ca_pem: &[u8]) -> Result<(), TlsError> {
        self.verifier.store(Arc::new(client_verifier(ca_pem)?));
        Ok(())
    }
}

fn client_verifier(ca_pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca_pem[..]) {
        let cert = cert.map_err(|e| TlsError::Invalid(format!("client CA PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::Invalid(format!("client CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(TlsError::Invalid(
            "no certificate in the client CA file".into(),
        ));
    }
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| TlsError::Invalid(format!("client CA: {e}")))
}

impl ClientCertVerifier for ClientAuth {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .verifier
            .load()
            .verify_client_cert(end_entity, intermediates, now)?;
        if self.allowed_cns.is_empty() {
            return Ok(verified);
        }
        let cn = x509_parser::parse_x509_certificate(end_entity)
            .ok()
            .and_then(|(_, c)| {
                c.subject()
                    .iter_common_name()
                    .next()
                    .and_then(|cn| cn.as_str().ok().map(str::to_string))
            })
            .unwrap_or_default();
        if self.allowed_cns.contains(&cn) {
            Ok(verified)
        } else {
            Err(rustls::Error::General(format!(
                "client certificate CN {cn:?} is not one of --client-cn"
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier.load().supported_verify_schemes()
    }
}

/// The server's rustls configuration: `resolver`'s pair, TLS 1.2+ or 1.3 only, client
/// certificates required and verified by `client_auth` when given, ALPN `http/1.1`.
///
/// # Errors
/// [`TlsError::Invalid`] if rustls refuses the protocol versions (a bug).
pub fn server_config(
    resolver: Arc<CertResolver>,
    min_version: MinVersion,
    client_auth: Option<Arc<ClientAuth>>,
) -> Result<rustls::ServerConfig, TlsError> {
    let versions: &[&rustls::SupportedProtocolVersion] = match min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .map_err(|e| TlsError::Invalid(e.to_string()))?;
    let builder = match client_auth {
        Some(auth) => builder.with_client_cert_verifier(auth),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Installs the process's default rustls provider, which the upstream TLS client (pingora's
/// connector) takes: ring's, with the TLS 1.3 suites in Go's order, AES-128-GCM first
/// (`crypto/tls` `defaultCipherSuitesTLS13` on hardware with AES instructions, what
/// kube-apiserver offers a webhook). ring's default order puts AES-256-GCM first, and a rustls
/// backend follows the client's order: each call's records then cost AES-256's extra rounds.
/// Nothing changes when a provider is already installed.
pub fn install_client_provider() {
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: TLS 1.3's AES-128-GCM first, everything else in ring's order.
    provider
        .cipher_suites
        .sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    let _ = rustls::crypto::CryptoProvider::install_default(provider);
}

#[cfg(test)]
mod tests {
    /// The upstream client offers TLS 1.3's AES-128-GCM first, as Go's client does; the rest in
    /// ring's order.
    #[test]
    fn the_client_offers_aes_128_gcm_first() {
        super::install_client_provider();
        let provider = rustls::crypto::CryptoProvider::get_default().expect("installed");
        let suites: Vec<_> = provider
            .cipher_suites
            .iter()
            .map(rustls::SupportedCipherSuite::suite)
            .collect();
        assert_eq!(
            suites[..3],
            [
                rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
                rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
                rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            ]
        );
    }
}

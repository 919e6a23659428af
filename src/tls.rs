//! Serving certificates: a PEM cert/key pair loaded into a rustls resolver that can be swapped
//! at runtime (cert rotation without restart), and self-signed test/demo certificates.
//! Depends on nothing else in this crate.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate pair cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
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
    pub fn replace(&self, key: CertifiedKey) {
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
    Ok(CertifiedKey::new(certs, signing))
}

/// Loads a certificate pair from files.
///
/// # Errors
/// [`TlsError`] for unreadable files or invalid PEM.
pub fn load_certified_key(cert_file: &Path, key_file: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| TlsError::Io {
            path: p.display().to_string(),
            source,
        })
    };
    certified_key_from_pem(&read(cert_file)?, &read(key_file)?)
}

/// A self-signed CA and a server certificate it signed, for tests and the demo.
pub struct TestPki {
    /// The CA certificate, PEM: what clients trust (`caBundle`).
    pub ca_pem: String,
    /// The server certificate chain, PEM.
    pub cert_pem: String,
    /// The server private key, PEM.
    pub key_pem: String,
}

impl TestPki {
    /// A CA and a server certificate valid for `names` (DNS names or IP addresses).
    ///
    /// # Errors
    /// [`TlsError::Invalid`] if rcgen rejects a name.
    pub fn generate(names: &[&str]) -> Result<Self, TlsError> {
        let err = |e: rcgen::Error| TlsError::Invalid(e.to_string());
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "admission-proxy test CA");
        let ca_key = rcgen::KeyPair::generate().map_err(err)?;
        let ca = ca_params.self_signed(&ca_key).map_err(err)?;
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .map_err(err)?;
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok(TestPki {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The server pair as a rustls certified key.
    ///
    /// # Errors
    /// [`TlsError`] if the generated PEM does not load (a bug).
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        certified_key_from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }

    /// The CA as a `caBundle` value (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

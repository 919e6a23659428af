//! Self-signed certificates made at run time (rcgen): the `demo`'s CA and serving pair, and the
//! integration tests' and benches' PKI (which compile this file in; so do the library's unit
//! tests, through `#[cfg(test)]`). Not library API: only the binary's tools need it, which is
//! why `rcgen` is used here and nowhere in the library. Uses the library's `tls` only.

use admission_proxy::tls::{certified_key_from_pem, TlsError};
use rustls::sign::CertifiedKey;

/// The test CA's parameters: the same every time, so that an issuer rebuilt from them and
/// the CA's key signs certificates that chain to the CA.
fn test_ca_params() -> Result<rcgen::CertificateParams, TlsError> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())
        .map_err(|e| TlsError::Invalid(e.to_string()))?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "admission-proxy test CA");
    Ok(ca_params)
}

/// A self-signed CA and a server certificate it signed, for tests and the demo.
pub(crate) struct TestPki {
    /// The CA certificate, PEM: what clients trust (`caBundle`).
    pub(crate) ca_pem: String,
    /// The server certificate chain, PEM.
    pub(crate) cert_pem: String,
    /// The server private key, PEM.
    pub(crate) key_pem: String,
    /// The CA's private key, PEM (to issue client certificates in tests).
    #[allow(dead_code)] // read by `client_certificate`, for tests/it only
    pub(crate) ca_key_pem: String,
}

impl TestPki {
    /// A CA and a server certificate valid for `names` (DNS names or IP addresses).
    ///
    /// # Errors
    /// [`TlsError::Invalid`] if rcgen rejects a name.
    pub(crate) fn generate(names: &[&str]) -> Result<Self, TlsError> {
        let err = |e: rcgen::Error| TlsError::Invalid(e.to_string());
        let ca_params = test_ca_params()?;
        let ca_key = rcgen::KeyPair::generate().map_err(err)?;
        let ca = ca_params.self_signed(&ca_key).map_err(err)?;
        let params = rcgen::CertificateParams::new(
            names
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>(),
        )
        .map_err(err)?;
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok(TestPki {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_key_pem: ca_key.serialize_pem(),
        })
    }

    /// A self-signed certificate with `CA:TRUE` for `names`, serving as its own CA (`ca_pem`
    /// equals `cert_pem`): what many legacy webhooks generate for themselves.
    ///
    /// # Errors
    /// [`TlsError::Invalid`] if rcgen rejects a name.
    #[allow(dead_code)] // tests/it only (self-signed legacy backends)
    pub(crate) fn self_signed_ca(names: &[&str]) -> Result<Self, TlsError> {
        let err = |e: rcgen::Error| TlsError::Invalid(e.to_string());
        let mut params = rcgen::CertificateParams::new(
            names
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>(),
        )
        .map_err(err)?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "self-signed legacy webhook");
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(TestPki {
            ca_pem: cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_key_pem: key.serialize_pem(),
        })
    }

    /// The server pair as a rustls certified key.
    ///
    /// # Errors
    /// [`TlsError`] if the generated PEM does not load (a bug).
    pub(crate) fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        certified_key_from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }

    /// A client certificate with subject CN `cn`, issued by this PKI's CA: `(cert PEM, key
    /// PEM)`, for mutual-TLS tests.
    ///
    /// # Errors
    /// [`TlsError::Invalid`] if rcgen fails.
    #[allow(dead_code)] // tests/it only (mutual TLS)
    pub(crate) fn client_certificate(&self, cn: &str) -> Result<(String, String), TlsError> {
        let err = |e: rcgen::Error| TlsError::Invalid(e.to_string());
        let ca_key = rcgen::KeyPair::from_pem(&self.ca_key_pem).map_err(err)?;
        let ca_params = test_ca_params()?;
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA as a `caBundle` value (base64 of the PEM).
    pub(crate) fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

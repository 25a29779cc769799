//! TLS for cluster connections (rustls, the `ring` provider), through ractor_cluster's own
//! encrypted streams.
//!
//! A node started with `--tls-cert` and `--tls-key` accepts only TLS connections; a parent
//! given `--tls-ca` connects to every node with TLS and verifies each node's certificate
//! against that root for the host it dialled (a name, or an IP address, which the certificate
//! must name). The cookie handshake runs inside the TLS session, so with TLS the cookie's digest
//! and everything after it (tasks, artifacts, answers, traces) is encrypted and
//! integrity-protected. There is no client certificate: the cookie authenticates the parent.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::ClusterError;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn fail(path: &Path, why: impl std::fmt::Display) -> ClusterError {
    ClusterError::Tls {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ClusterError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(path, e))?;
    if certs.is_empty() {
        return Err(fail(path, "it holds no PEM certificate"));
    }
    Ok(certs)
}

/// The node's acceptor, from its certificate chain and private key (PEM files).
pub fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, ClusterError> {
    let chain = certs(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| fail(key, e))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(cert, e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| fail(cert, e))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The parent's connector, trusting the certificates of the PEM file `ca`.
pub fn connector(ca: &Path) -> Result<tokio_rustls::TlsConnector, ClusterError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca)? {
        roots.add(c).map_err(|e| fail(ca, e))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(ca, e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The name a node's certificate must hold: the host part of the address as given.
pub fn server_name(given: &str) -> Result<ServerName<'static>, String> {
    let host = match given.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => given,
    };
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("'{host}' cannot be checked against a certificate: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_checked_is_the_host_dialled() {
        assert!(matches!(
            server_name("127.0.0.1:7420").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("build-1.internal:7420").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(matches!(
            server_name("[::1]:7420").unwrap(),
            ServerName::IpAddress(_)
        ));
    }
}

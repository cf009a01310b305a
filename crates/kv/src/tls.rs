//! TLS for the RESP port, as `redis-server --tls-port` offers it: the
//! member's certificate and key from PEM files, and optionally a CA whose
//! certificates clients must (or may) present (`tls-auth-clients`).
//!
//! This module only builds the [`rustls::ServerConfig`] from the files and
//! names the listener ([`TlsPort`]); the event loop
//! ([`crate::client_loop`]) runs each TLS connection without blocking.
//! TLS 1.2 and 1.3, rustls's default cipher suites (ring's
//! implementations).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether clients must present a certificate signed by the CA
/// (`tls-auth-clients`, Redis's default `yes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// A client without a valid certificate is refused in the handshake.
    #[default]
    Yes,
    /// No certificate is asked for.
    No,
    /// A certificate is asked for; one that is presented must be valid.
    Optional,
}

impl std::str::FromStr for AuthClients {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "yes" => Ok(AuthClients::Yes),
            "no" => Ok(AuthClients::No),
            "optional" => Ok(AuthClients::Optional),
            _ => Err(format!(
                "tls-auth-clients must be yes, no or optional, not '{s}'"
            )),
        }
    }
}

impl AuthClients {
    /// Its name in `CONFIG GET tls-auth-clients`.
    pub fn name(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

/// The files a TLS port is set up from (`--tls-cert-file`,
/// `--tls-key-file`, `--tls-ca-cert-file`, `--tls-auth-clients`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The member's certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates that sign clients' certificates (PEM). Without
    /// it no client certificate is asked for.
    pub ca: Option<PathBuf>,
    /// Whether a client certificate is required (with `ca`).
    pub auth_clients: AuthClients,
}

/// Why a TLS port could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The port could not be bound.
    #[error("TLS port {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be read or holds no valid PEM.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// The certificate file holds no certificate.
    #[error("{0}: no certificate in the file")]
    NoCertificate(PathBuf),
    /// The CA file's certificates cannot verify clients.
    #[error("{path}: cannot verify clients with it: {reason}")]
    Ca {
        /// The CA file.
        path: PathBuf,
        /// rustls's reason.
        reason: String,
    },
    /// The certificate and key do not make a server configuration (the
    /// key does not match the certificate, an unsupported key type...).
    #[error("certificate {cert} with key {key}: {reason}")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        reason: String,
    },
}

fn file_error(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// The server configuration `files` describe, checked whole: every file
/// read and parsed, the key matching the certificate.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certificates(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e))?;
    let builder = ServerConfig::builder();
    let builder = match &files.ca {
        Some(ca) if files.auth_clients != AuthClients::No => {
            let mut roots = RootCertStore::empty();
            for c in certificates(ca)? {
                roots.add(c).map_err(|e| TlsError::Ca {
                    path: ca.clone(),
                    reason: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = match files.auth_clients {
                AuthClients::Optional => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier.build().map_err(|e| TlsError::Ca {
                path: ca.clone(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config {
            cert: files.cert.clone(),
            key: files.key.clone(),
            reason: e.to_string(),
        })?;
    Ok(Arc::new(config))
}

/// A bound TLS listener and the configuration its connections run under.
#[derive(Clone)]
pub struct TlsPort {
    /// The listener (the event loop takes a duplicate of it).
    pub listener: Arc<TcpListener>,
    /// The configuration of its connections.
    pub config: Arc<ServerConfig>,
    /// The files it was made from (`CONFIG GET tls-*`).
    pub files: TlsFiles,
}

impl TlsPort {
    /// Reads `files` ([`server_config`]), then binds `addr`: a bad file
    /// fails before the port is taken.
    pub fn open(addr: std::net::SocketAddr, files: TlsFiles) -> Result<TlsPort, TlsError> {
        let config = server_config(&files)?;
        let listener = TcpListener::bind(addr).map_err(|e| TlsError::Bind { addr, source: e })?;
        Ok(TlsPort {
            listener: Arc::new(listener),
            config,
            files,
        })
    }
}

impl std::fmt::Debug for TlsPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPort")
            .field("listener", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_clients_parse_as_redis_names_them() {
        for (text, want) in [
            ("yes", Ok(AuthClients::Yes)),
            ("NO", Ok(AuthClients::No)),
            ("optional", Ok(AuthClients::Optional)),
            ("maybe", Err(())),
        ] {
            let got = text.parse::<AuthClients>().map_err(|_| ());
            assert_eq!(got, want, "{text}");
            if let Ok(a) = got {
                assert_eq!(a.name(), text.to_ascii_lowercase());
            }
        }
    }

    #[test]
    fn bad_files_are_named_in_the_error() {
        let dir = std::env::temp_dir().join(format!("xlane-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, b"").unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, b"-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
        let missing = dir.join("missing.pem");
        let files = |cert: &Path, key: &Path| TlsFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            ca: None,
            auth_clients: AuthClients::Yes,
        };
        for (cert, key, want) in [
            (&missing, &missing, "missing.pem"),
            (&empty, &missing, "no certificate"),
            (&junk, &missing, "junk.pem"),
        ] {
            let e = server_config(&files(cert, key)).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should name {want}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The cluster's errors, each with its diagnostic code (docs/errors.md, `E-CLU-nnn`).

use crate::diagnostic::Diagnostic;

/// What can go wrong starting a node or reaching one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    /// Neither `MUR_CLUSTER_COOKIE` nor `--cookie-file` gave a cookie.
    #[error("no cluster cookie: set MUR_CLUSTER_COOKIE or pass --cookie-file")]
    NoCookie,
    /// The cookie file could not be read, or holds nothing.
    #[error("cannot use the cookie file {path}: {why}")]
    CookieFile {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// `--listen` could not be bound.
    #[error("cannot listen on {addr}: {why}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// Why.
        why: String,
    },
    /// The node server (ractor_cluster) did not start.
    #[error("cannot start the node server: {0}")]
    Server(String),
    /// A node named with `--nodes` (or `nodes:`) cannot be used; the run goes on without it.
    #[error("node {addr} is unavailable: {why}")]
    Unavailable {
        /// The address as given.
        addr: String,
        /// Why: unreachable, not authenticated, another protocol version, no answer.
        why: String,
    },
    /// A TLS certificate, key or root file cannot be used.
    #[error("cannot use {path} for TLS: {why}")]
    Tls {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// `nodes:` in the config file is not a list of addresses.
    #[error("{path}: {why}")]
    Config {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

impl ClusterError {
    /// The diagnostic code.
    pub fn code(&self) -> &'static str {
        match self {
            ClusterError::NoCookie => "E-CLU-001",
            ClusterError::CookieFile { .. } => "E-CLU-002",
            ClusterError::Listen { .. } => "E-CLU-003",
            ClusterError::Server(_) => "E-CLU-004",
            ClusterError::Unavailable { .. } => "W-CLU-005",
            ClusterError::Config { .. } => "E-CLU-006",
            ClusterError::Tls { .. } => "E-CLU-007",
        }
    }

    /// As `mur` prints it: an error, except an unavailable node, which is a warning.
    pub fn diagnostic(&self) -> Diagnostic {
        match self {
            ClusterError::Unavailable { .. } => Diagnostic::warning(self.code(), self.to_string())
                .with_hint("the run goes on with the other nodes and this machine"),
            _ => Diagnostic::error(self.code(), self.to_string()),
        }
    }
}

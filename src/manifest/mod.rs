//! `murmur.yaml`: loading, validation and diagnostics for capsule manifests.
//!
//! A bad manifest must never start a session or touch `murmur.lock`, so everything that can be
//! decided from the file alone is decided here, once, with upstream Murmur's codes and wording
//! (`E-MAN-001/002/003`, `E-CAP-013/018/020`, warnings `W-SEC-019`). The result is a typed
//! [`Manifest`] the rest of `mur` reads without re-checking. Credentials are kept as written
//! and resolved at launch by [`env::resolve_credential`].

pub mod artifact_manifest;
pub mod artifacts;
pub mod capabilities;
mod checks;
pub mod depth;
pub mod doctor;
pub mod env;
pub mod exports;
pub mod gateway;
pub mod inference;
pub mod install;
pub mod lifecycle;
pub mod limits;
pub mod model;
pub mod names;
pub mod other;
mod parse;
pub(crate) mod reader;
pub mod shell;

use std::path::{Path, PathBuf};

pub use artifact_manifest::{
    parse_artifact_manifest, ArtifactManifest, CommitPolicy, ExecutionMode, HookEvent,
    Implementation,
};
pub use artifacts::{ArtifactDecl, ArtifactRuntime, BuiltinDriver, OnOverflow};
pub use capabilities::{
    Capabilities, Containment, EnvCap, FilesystemCap, NetworkCap, PeerFetchCap, PlanCap, SpawnCap,
};
pub use exports::{Exports, FilesExport, PeerFiles};
pub use gateway::{Credential, Gateway};
pub use inference::{Alternate, Inference, RetryConfig, ToolRefresh, Transport};
pub use install::{InstallCap, InstallFrom};
pub use lifecycle::{Capture, Lifecycle, TraceConfig};
pub use limits::{Limits, Resources};
pub use model::Manifest;
pub use names::{
    is_reserved_tool_name, ArtifactName, InstallPattern, NameError, RESERVED_TOOL_NAMES,
};
pub use shell::ShellCap;

use crate::diagnostic::Diagnostic;

/// The conventional manifest file name.
pub const MANIFEST_FILE: &str = "murmur.yaml";

/// A manifest read from disk, with where it came from.
#[derive(Clone, Debug)]
pub struct LoadedManifest {
    /// The validated manifest.
    pub manifest: Manifest,
    /// The file it was read from, as given.
    pub path: PathBuf,
    /// The directory relative paths (`config.script`, `system_prompt_file`, `source:`) are
    /// resolved against.
    pub dir: PathBuf,
    /// Warnings (W-SEC-019 unknown keys, …); they never stop a load.
    pub warnings: Vec<Diagnostic>,
}

impl LoadedManifest {
    /// Resolves a path written in the manifest against the manifest's directory.
    pub fn resolve(&self, rel: &Path) -> PathBuf {
        self.dir.join(rel)
    }
}

/// Parses manifest text (messages name it `murmur.yaml`). `Ok` carries the warnings; `Err`
/// carries the errors first, then any warnings.
pub fn parse_str(text: &str) -> Result<(Manifest, Vec<Diagnostic>), Vec<Diagnostic>> {
    parse::parse_labeled(text, MANIFEST_FILE)
}

/// Reads and validates the manifest at `path`. A missing file is E-IO-001 naming the path.
pub fn load(path: &Path) -> Result<LoadedManifest, Vec<Diagnostic>> {
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| MANIFEST_FILE.to_string());
    let bytes = crate::files::read_capped(path, crate::files::TEXT_CAP).map_err(|e| match e {
        crate::files::ReadError::Io(e) => vec![read_error(path, &label, &e)],
        other if path.is_dir() => vec![read_error(
            path,
            &label,
            &std::io::Error::other(other.to_string()),
        )],
        other => vec![Diagnostic::error(
            "E-IO-003",
            format!("{} cannot be read as a manifest: {other}", path.display()),
        )],
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        vec![Diagnostic::error(
            "E-IO-003",
            format!("{} is not UTF-8 text", path.display()),
        )]
    })?;
    let (manifest, warnings) = parse::parse_labeled(&text, &label)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(LoadedManifest {
        manifest,
        path: path.to_path_buf(),
        dir,
        warnings,
    })
}

fn read_error(path: &Path, label: &str, e: &std::io::Error) -> Diagnostic {
    match e.kind() {
        std::io::ErrorKind::NotFound => Diagnostic::error(
            "E-IO-001",
            format!(
                "{label} not found at {}",
                std::path::absolute(path)
                    .unwrap_or_else(|_| path.to_path_buf())
                    .display()
            ),
        )
        .with_hint("run mur in the capsule's folder, or name its murmur.yaml"),
        std::io::ErrorKind::PermissionDenied => Diagnostic::error(
            "E-IO-002",
            format!("permission denied reading {}", path.display()),
        ),
        _ if path.is_dir() => Diagnostic::error(
            "E-IO-003",
            format!("{} is a directory, not a manifest file", path.display()),
        ),
        _ => Diagnostic::error(
            "E-IO-003",
            format!("could not read {}: {e}", path.display()),
        ),
    }
}

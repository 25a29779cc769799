//! Building the HTTP drivers from a manifest's driver entry (filled in by the drivers merge).

use std::sync::Arc;

use mur_actors::model::ModelDriver;

use crate::diagnostic::Diagnostic;
use crate::manifest::{ArtifactDecl, LoadedManifest};

/// Build `murmur/driver-anthropic` or `murmur/driver-openai` for this manifest.
pub fn build(
    _loaded: &LoadedManifest,
    decl: &ArtifactDecl,
) -> Result<Arc<dyn ModelDriver>, Diagnostic> {
    Err(Diagnostic::error(
        "E-RUN-006",
        format!("driver '{}' is not wired yet", decl.name),
    ))
}

//! Why a pull or a removal of an artifact was refused: one enum of codes, so the kernel, the
//! pull service and `mur resume` tell the classes apart without reading prefixes.
//!
//! The model reads a refusal as text. The four upstream classes (`not-granted`, `not-found`,
//! `does-not-fit`, `not-fetched`) and `not-removable` lead the text with their code, as the
//! original writes them; an input, lock, restore or file error is a sentence of its own. Nothing is
//! written when a pull or a removal is refused.

use std::fmt;

/// The class of a refused pull or removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArtifactErrorKind {
    /// The capsule's grants do not reach the artifact (or it may not be pulled at all).
    NotGranted,
    /// No store or source holds it.
    NotFound,
    /// It exists, but no version of it runs in this `mur`.
    DoesNotFit,
    /// It could not be fetched, read or checked (network, integrity, owner, staging).
    NotFetched,
    /// It may not be removed (declared, a hook or driver, pinned by the operator).
    NotRemovable,
    /// The tool input was not what the tool takes.
    BadInput,
    /// `murmur.lock` could not be read or written, or refuses the pin.
    Lock,
    /// A resume cannot hold again what the recorded session pulled.
    NotRestorable,
    /// The change was made, but a staged file could not be deleted.
    Files,
}

impl ArtifactErrorKind {
    /// The code: the refusal's prefix for the upstream classes, a name for the others.
    pub fn code(self) -> &'static str {
        match self {
            ArtifactErrorKind::NotGranted => "not-granted",
            ArtifactErrorKind::NotFound => "not-found",
            ArtifactErrorKind::DoesNotFit => "does-not-fit",
            ArtifactErrorKind::NotFetched => "not-fetched",
            ArtifactErrorKind::NotRemovable => "not-removable",
            ArtifactErrorKind::BadInput => "bad-input",
            ArtifactErrorKind::Lock => "lock",
            ArtifactErrorKind::NotRestorable => "not-restorable",
            ArtifactErrorKind::Files => "files",
        }
    }

    /// Whether the text the model reads leads with the code.
    pub fn is_prefixed(self) -> bool {
        !matches!(
            self,
            ArtifactErrorKind::BadInput
                | ArtifactErrorKind::Lock
                | ArtifactErrorKind::NotRestorable
                | ArtifactErrorKind::Files
        )
    }
}

/// A refused pull or removal: its class and the sentence saying what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactError {
    /// The class.
    pub kind: ArtifactErrorKind,
    /// The sentence, without the code.
    pub message: String,
}

impl ArtifactError {
    /// A refusal of `kind`.
    pub fn new(kind: ArtifactErrorKind, message: impl Into<String>) -> Self {
        ArtifactError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ArtifactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind.is_prefixed() {
            write!(f, "{}: {}", self.kind.code(), self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for ArtifactError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_classes_lead_with_their_code_and_the_others_do_not() {
        let e = ArtifactError::new(ArtifactErrorKind::NotFound, "'a/b' is in no store");
        assert_eq!(e.to_string(), "not-found: 'a/b' is in no store");
        let e = ArtifactError::new(ArtifactErrorKind::Lock, "failed to read murmur.lock: x");
        assert_eq!(e.to_string(), "failed to read murmur.lock: x");
        assert_eq!(e.kind.code(), "lock");
    }
}

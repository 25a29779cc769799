//! [`RecordError`]: what can go wrong keeping a session's records (its folders, staged files,
//! trace and result), as one enum instead of sentences with prefixes.
//!
//! Each variant names the file or folder and the operating system's reason; `Display` is the
//! sentence users see (`mur run` prints it as `error[E-RUN-007]: …`), and [`RecordError::code`]
//! the diagnostic code, so the CLI no longer guesses the kind of failure from a prefix.

use std::path::PathBuf;

/// A failure to create, write or flush a session's records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A trace line could not be written (or its file created or reopened): disk full, EIO,
    /// a removed folder. Later lines of that trace are dropped.
    #[error("trace write failed: {}: {cause}", path.display())]
    TraceWrite {
        /// The trace file.
        path: PathBuf,
        /// The operating system's reason.
        cause: String,
    },
    /// A trace could not be made durable (`fdatasync`).
    #[error("trace sync failed: {}: {cause}", path.display())]
    TraceSync {
        /// The trace file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// A session's folder could not be made.
    #[error("cannot create {}: {cause}", path.display())]
    Create {
        /// The folder.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// A session's files could not be staged (tool manifests, the task, links).
    #[error("cannot stage {}: {cause}", path.display())]
    Stage {
        /// The folder staged into.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// The result file could not be written.
    #[error("cannot write {}: {cause}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// A record file or folder could not be flushed to the disk.
    #[error("cannot sync {}: {cause}", path.display())]
    Flush {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// The trace thread or a file-lane job stopped before it answered (it panicked, or could
    /// not start).
    #[error("{what} stopped before it answered: {cause}")]
    Stopped {
        /// `the trace thread`, `a file job`.
        what: &'static str,
        /// Why, as the runtime knows it.
        cause: String,
    },
}

impl RecordError {
    /// The diagnostic code `mur run` reports it with: the agent loop could not keep its
    /// records (E-RUN-007).
    pub fn code(&self) -> &'static str {
        match self {
            RecordError::TraceWrite { .. }
            | RecordError::TraceSync { .. }
            | RecordError::Create { .. }
            | RecordError::Stage { .. }
            | RecordError::Write { .. }
            | RecordError::Flush { .. }
            | RecordError::Stopped { .. } => "E-RUN-007",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_its_file_and_why() {
        let e = RecordError::TraceWrite {
            path: "/r/trace.jsonl".into(),
            cause: "No space left on device (os error 28)".into(),
        };
        assert_eq!(
            e.to_string(),
            "trace write failed: /r/trace.jsonl: No space left on device (os error 28)"
        );
        assert_eq!(e.code(), "E-RUN-007");
        let s = RecordError::Stopped {
            what: "a file job",
            cause: "it panicked".into(),
        };
        assert_eq!(
            s.to_string(),
            "a file job stopped before it answered: it panicked"
        );
    }
}

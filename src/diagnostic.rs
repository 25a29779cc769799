//! Diagnostics: the `error[CODE]: message` / `  hint: …` lines every `mur` command prints.
//!
//! One type for every user-facing failure so that the CLI prints them the same way and tests
//! can match codes. Codes follow upstream Murmur (`E-MAN-003`, `W-SEC-019`, …).

use std::fmt;

/// How bad a diagnostic is: errors stop the command, warnings are printed and it goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Fatal: the command exits 1.
    Error,
    /// Printed on stderr; the command continues.
    Warning,
}

/// One diagnostic: a code, a message naming the file or field, and an optional hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// `error` or `warning`.
    pub severity: Severity,
    /// Stable code such as `E-MAN-003`.
    pub code: String,
    /// The sentence the user reads; names the file, field or tool.
    pub message: String,
    /// What to do about it, printed as `  hint: …`.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A fatal diagnostic.
    pub fn error(code: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code: code.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// A warning.
    pub fn warning(code: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            code: code.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// The same diagnostic with a hint line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl Diagnostic {
    /// The diagnostic as a JSON object (`severity`, `code`, `message`, `hint`), for `--json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "severity": match self.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        })
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{word}[{}]: {}", self.code, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

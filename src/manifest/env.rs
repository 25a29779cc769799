//! Resolving `gateway.api_key: ${NAME}` at launch.
//!
//! The key is looked up in the process environment first and then in a `.env` file beside the
//! manifest, which never overrides the environment (an exported key always wins). The file is
//! read without touching the process environment. No message ever contains a key's value.

use std::path::Path;

use super::artifacts::ArtifactDecl;
use super::gateway::Credential;
use crate::diagnostic::Diagnostic;

/// `NAME` when `raw` (trimmed) is exactly `${NAME}` with `NAME` matching `[A-Z_][A-Z0-9_]*`;
/// anything else is a literal key.
pub fn env_reference(raw: &str) -> Option<&str> {
    let name = raw.trim().strip_prefix("${")?.strip_suffix('}')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_uppercase() || first == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(name)
}

/// Resolves a raw `api_key` value: `${NAME}` from the environment, else from `.env` beside
/// the manifest; a literal key is returned as is.
pub fn resolve_credential(raw: &str, manifest_dir: &Path) -> Result<String, Diagnostic> {
    resolve(raw, manifest_dir, None)
}

/// Resolves the key of an artifact's `gateway:`; `Ok(None)` when it has no gateway or is
/// `keyless: true`. Errors name the artifact.
pub fn resolve_gateway_key(
    artifact: &ArtifactDecl,
    manifest_dir: &Path,
) -> Result<Option<String>, Diagnostic> {
    match artifact.gateway.as_ref().map(|g| &g.credential) {
        Some(Credential::ApiKey(raw)) => {
            resolve(raw, manifest_dir, Some(artifact.name.as_str())).map(Some)
        }
        _ => Ok(None),
    }
}

fn resolve(raw: &str, dir: &Path, artifact: Option<&str>) -> Result<String, Diagnostic> {
    let Some(name) = env_reference(raw) else {
        return Ok(raw.trim().to_string());
    };
    let on = artifact
        .map(|a| format!(" on artifact '{a}'"))
        .unwrap_or_default();
    let dotenv = dir.join(".env");
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => return Ok(v),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(Diagnostic::error(
                "E-MAN-003",
                format!(
                    "murmur.yaml: gateway.api_key{on} references ${{{name}}}, but the \
                     environment variable {name} is not valid UTF-8"
                ),
            ))
        }
        _ => {}
    }
    if let Some(v) = from_dotenv(&dotenv, name)? {
        if !v.is_empty() {
            return Ok(v);
        }
    }
    Err(Diagnostic::error(
        "E-MAN-003",
        format!(
            "murmur.yaml: gateway.api_key{on} references ${{{name}}}, but neither the environment \
             variable {name} nor a {name}= line in {} is set",
            dotenv.display()
        ),
    )
    .with_hint(format!(
        "export {name}=<your key>, or add {name}=<your key> to {}",
        dotenv.display()
    )))
}

/// The value of `name` in the `.env` file at `path`, if the file exists and sets it.
fn from_dotenv(path: &Path, name: &str) -> Result<Option<String>, Diagnostic> {
    let bytes = match crate::files::read_capped(path, crate::files::TEXT_CAP) {
        Ok(b) => b,
        Err(e) if e.not_found() => return Ok(None),
        Err(e) => {
            return Err(Diagnostic::error(
                "E-IO-003",
                format!("{} cannot be read: {e}", path.display()),
            ))
        }
    };
    let iter = dotenvy::from_read_iter(std::io::Cursor::new(bytes));
    let mut found = None;
    for item in iter {
        let (key, value) = item.map_err(|e| dotenv_error(path, &e))?;
        if key == name {
            found = Some(value);
        }
    }
    Ok(found)
}

/// Describes a `.env` problem without quoting the file's contents (they may hold keys).
fn dotenv_error(path: &Path, e: &dotenvy::Error) -> Diagnostic {
    let why = match e {
        dotenvy::Error::LineParse(_, index) => {
            format!("it cannot be parsed (at character {index} of a line)")
        }
        dotenvy::Error::Io(io) => io.to_string(),
        _ => "it cannot be read".to_string(),
    };
    Diagnostic::error(
        "E-IO-003",
        format!("could not read {}: {why}", path.display()),
    )
    .with_hint("each line of .env is NAME=value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_upper_snake_references_are_variables() {
        assert_eq!(
            env_reference("${ANTHROPIC_API_KEY}"),
            Some("ANTHROPIC_API_KEY")
        );
        assert_eq!(env_reference(" ${_K2} "), Some("_K2"));
        assert_eq!(env_reference("${lower}"), None);
        assert_eq!(env_reference("${2X}"), None);
        assert_eq!(env_reference("${}"), None);
        assert_eq!(env_reference("sk-${X}"), None);
        assert_eq!(env_reference("sk-live-123"), None);
    }

    #[test]
    fn literal_keys_are_returned_as_is() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve_credential("sk-literal", dir.path()).unwrap(),
            "sk-literal"
        );
    }
}

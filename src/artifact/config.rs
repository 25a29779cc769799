//! Where artifacts live and where they come from: the murmur home and `config.yaml`'s
//! `registry:` block.
//!
//! The murmur home is `$MURMUR_HOME` when set (tests point it at a temporary folder so they
//! never touch the real home), else `$HOME/.murmur`. It holds the global store (`artifacts/`)
//! and `config.yaml`:
//!
//! ```yaml
//! registry:
//!   api_base: http://127.0.0.1:8080     # optional; the GitHub API base URL
//!   sources:
//!     - repo: <owner>/<repo>             # serves the scope <owner>, lowercased
//!       token: "${GITHUB_TOKEN}"         # optional: ${VAR}, VAR, or a literal token
//! ```
//!
//! The API base is, in order: `$MUR_GITHUB_API_BASE` (the original Murmur's name for it),
//! `$MUR_GITHUB_API`, `registry.api_base`, `https://api.github.com`.
//! The `murmur` scope is always served by `murmur-nexus/default-artifacts`, whose owner id is
//! known in advance (190196424); a configured entry for that repo only lends it a token.

use std::path::{Path, PathBuf};

use serde_norway::Value;

use crate::diagnostic::Diagnostic;
use crate::manifest::names::check_name_part;

/// The repository of the built-in `murmur` scope.
pub const MURMUR_SCOPE_REPO: &str = "murmur-nexus/default-artifacts";
/// The GitHub account id that owns `murmur-nexus`.
pub const MURMUR_OWNER_ID: u64 = 190196424;
/// The public GitHub API.
pub const DEFAULT_API_BASE: &str = "https://api.github.com";
/// Environment variables overriding the API base, in the order they are read: the original
/// Murmur's name first, so a shell set up for it sends `mur` to the same server.
pub const API_ENVS: [&str; 2] = ["MUR_GITHUB_API_BASE", "MUR_GITHUB_API"];

/// The API base set in the environment, if any (the first non-empty of [`API_ENVS`]).
pub fn api_base_from_env() -> Option<String> {
    API_ENVS
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|s| !s.trim().is_empty())
}
/// Environment variable overriding the murmur home.
pub const HOME_ENV: &str = "MURMUR_HOME";

/// The murmur home folder (`$MURMUR_HOME`, else `$HOME/.murmur`).
pub fn murmur_home() -> Result<PathBuf, Diagnostic> {
    if let Some(h) = std::env::var_os(HOME_ENV).filter(|h| !h.is_empty()) {
        return Ok(std::path::absolute(PathBuf::from(h)).unwrap_or_default());
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(std::path::absolute(PathBuf::from(h))
            .unwrap_or_default()
            .join(".murmur")),
        None => Err(Diagnostic::error(
            "E-IO-004",
            "neither MURMUR_HOME nor HOME is set, so there is no place for ~/.murmur",
        )
        .with_hint("set MURMUR_HOME to a folder mur may write to")),
    }
}

/// The source of one scope: a GitHub repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The scope it serves (the owner, lowercased; `murmur` for the built-in one).
    pub scope: String,
    /// `<owner>/<repo>`.
    pub repo: String,
    /// Token for the API, if any.
    pub token: Option<String>,
}

impl Source {
    /// `github:<owner>/<repo>`, the label used in messages and `fetched_from`.
    pub fn label(&self) -> String {
        format!("github:{}", self.repo)
    }

    /// The owner id this source must answer, when known in advance (the built-in one).
    pub fn expected_owner(&self) -> Option<u64> {
        (self.scope == "murmur").then_some(MURMUR_OWNER_ID)
    }
}

/// The sources configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcesConfig {
    /// The GitHub API base URL, without a trailing `/`.
    pub api_base: String,
    /// Configured sources (the built-in `murmur` one is implied).
    pub sources: Vec<Source>,
    /// Token for the built-in source, when a configured entry names its repo.
    pub murmur_token: Option<String>,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            api_base: api_base_from_env()
                .unwrap_or_else(|| DEFAULT_API_BASE.to_string())
                .trim_end_matches('/')
                .to_string(),
            sources: Vec::new(),
            murmur_token: None,
        }
    }
}

fn env_token() -> Option<String> {
    std::env::var("GITHUB_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Resolves a `token:` value: `${VAR}` → the variable (or nothing); a bare upper-snake `VAR` →
/// the variable if set, else the text; anything else is the token itself.
pub fn resolve_token(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let upper_snake = |s: &str| {
        !s.is_empty()
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    if let Some(var) = raw.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        if upper_snake(var) {
            return std::env::var(var).ok().filter(|v| !v.trim().is_empty());
        }
    }
    if upper_snake(raw) {
        if let Ok(v) = std::env::var(raw) {
            if !v.trim().is_empty() {
                return Some(v);
            }
        }
    }
    (!raw.is_empty()).then(|| raw.to_string())
}

impl SourcesConfig {
    /// Reads `<home>/config.yaml` (a missing file is an empty configuration). Errors are
    /// E-CFG-003 and name the file.
    pub fn load(home: &Path) -> Result<SourcesConfig, Diagnostic> {
        let path = home.join("config.yaml");
        let text = match crate::files::read_text(&path, crate::files::TEXT_CAP) {
            Ok(t) => t,
            Err(e) if e.not_found() => return Ok(Self::default()),
            Err(e) => {
                return Err(Diagnostic::error(
                    "E-IO-003",
                    format!("cannot read {}: {e}", path.display()),
                ))
            }
        };
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses config text; `label` names the file in messages.
    pub fn parse(text: &str, label: &str) -> Result<SourcesConfig, Diagnostic> {
        let fail = |why: String| Diagnostic::error("E-CFG-003", format!("{label}: {why}"));
        let mut cfg = Self::default();
        if let Some((line, col, why)) = crate::manifest::depth::too_costly(text) {
            return Err(fail(format!(
                "YAML syntax error at line {line}, column {col}: {why}"
            )));
        }
        let value: Value =
            serde_norway::from_str(text).map_err(|e| fail(format!("YAML syntax error: {e}")))?;
        let Some(registry) = value.get("registry").filter(|v| !v.is_null()) else {
            return Ok(cfg);
        };
        for removed in ["default", "index", "url"] {
            if registry.get(removed).is_some() {
                return Err(fail(format!("registry.{removed} is not a registry key; name sources with registry.sources: [{{repo, token}}]")));
            }
        }
        if api_base_from_env().is_none() {
            match registry.get("api_base") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.starts_with("http://") || s.starts_with("https://") => {
                    cfg.api_base = s.trim_end_matches('/').to_string()
                }
                Some(_) => {
                    return Err(fail(
                        "registry.api_base must be an http:// or https:// URL".into(),
                    ))
                }
            }
        }
        let entries = match registry.get("sources") {
            None | Some(Value::Null) => return Ok(cfg),
            Some(Value::Sequence(s)) => s,
            Some(_) => {
                return Err(fail(
                    "registry.sources must be a list of {repo, token} entries".into(),
                ))
            }
        };
        for (i, e) in entries.iter().enumerate() {
            let field = format!("registry.sources[{i}]");
            if !e.is_mapping() {
                return Err(fail(format!(
                    "{field} must be a mapping with repo and token"
                )));
            }
            for removed in ["name", "type", "url"] {
                if e.get(removed).is_some() {
                    return Err(fail(format!(
                        "{field}.{removed} is not a source key; a source is {{repo, token}}"
                    )));
                }
            }
            let repo = e
                .get("repo")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .ok_or_else(|| fail(format!("{field} has no repo")))?;
            let Some((owner, name)) = repo
                .split_once('/')
                .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
            else {
                return Err(fail(format!("{field}.repo '{repo}' is not <owner>/<repo>")));
            };
            let token = e
                .get("token")
                .and_then(Value::as_str)
                .and_then(resolve_token);
            if repo.eq_ignore_ascii_case(MURMUR_SCOPE_REPO) {
                cfg.murmur_token = token;
                continue;
            }
            let scope = owner.to_ascii_lowercase();
            check_name_part(&scope).map_err(|why| {
                fail(format!(
                    "{field}.repo '{repo}': the owner '{owner}' is not a valid scope: it {why}"
                ))
            })?;
            if scope == "local" || scope == "murmur" {
                return Err(fail(format!(
                    "{field}.repo '{repo}' claims the reserved scope '{scope}'"
                )));
            }
            if cfg.sources.iter().any(|s| s.scope == scope) {
                return Err(fail(format!(
                    "{field}: two entries serve the scope '{scope}'"
                )));
            }
            cfg.sources.push(Source {
                scope,
                repo: format!("{owner}/{name}"),
                token,
            });
        }
        Ok(cfg)
    }

    /// The source serving `scope`, if any (`local` never has one).
    pub fn source_for(&self, scope: &str) -> Option<Source> {
        if scope == "murmur" {
            return Some(Source {
                scope: "murmur".into(),
                repo: MURMUR_SCOPE_REPO.into(),
                token: self.murmur_token.clone().or_else(env_token),
            });
        }
        self.sources
            .iter()
            .find(|s| s.scope == scope)
            .map(|s| Source {
                token: s.token.clone().or_else(env_token),
                ..s.clone()
            })
    }

    /// The source for a `github:<owner>/<repo>` reference: the configured entry's token when
    /// one names that repo, else `GITHUB_TOKEN`.
    pub fn source_for_repo(&self, owner: &str, repo: &str) -> Source {
        let full = format!("{owner}/{repo}");
        if full.eq_ignore_ascii_case(MURMUR_SCOPE_REPO) {
            return self
                .source_for("murmur")
                .unwrap_or_else(|| unreachable_source(&full));
        }
        let configured = self
            .sources
            .iter()
            .find(|s| s.repo.eq_ignore_ascii_case(&full));
        Source {
            scope: owner.to_ascii_lowercase(),
            repo: full,
            token: configured.and_then(|s| s.token.clone()).or_else(env_token),
        }
    }
}

fn unreachable_source(repo: &str) -> Source {
    Source {
        scope: "murmur".into(),
        repo: repo.into(),
        token: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_refuse_reserved_scopes() {
        let cfg = SourcesConfig::parse(
            "registry:\n  sources:\n    - repo: Ana/tools\n      token: literal-token\n",
            "config.yaml",
        )
        .unwrap();
        let s = cfg.source_for("ana").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.token.as_deref()),
            ("Ana/tools", Some("literal-token"))
        );
        assert_eq!(s.label(), "github:Ana/tools");
        assert_eq!(cfg.source_for("murmur").unwrap().repo, MURMUR_SCOPE_REPO);
        assert!(cfg.source_for("local").is_none());
        let e = SourcesConfig::parse("registry:\n  sources:\n    - repo: local/x\n", "c.yaml")
            .unwrap_err();
        assert_eq!(e.code, "E-CFG-003");
        assert_eq!(
            e.message,
            "c.yaml: registry.sources[0].repo 'local/x' claims the reserved scope 'local'"
        );
        let e =
            SourcesConfig::parse("registry:\n  sources:\n    - token: x\n", "c.yaml").unwrap_err();
        assert_eq!(e.message, "c.yaml: registry.sources[0] has no repo");
    }

    #[test]
    fn tokens_resolve_from_the_environment() {
        assert_eq!(resolve_token("${MUR_TEST_SURELY_UNSET_VAR}"), None);
        assert_eq!(resolve_token("ghp_literal"), Some("ghp_literal".into()));
        assert_eq!(
            resolve_token("MUR_TEST_SURELY_UNSET_VAR"),
            Some("MUR_TEST_SURELY_UNSET_VAR".into())
        );
    }
}

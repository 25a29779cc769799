//! Listing what a capsule may pull: `pull-artifact` with a pattern ending in `*`.
//!
//! The listing pulls nothing and writes nothing. It names each pullable skill or tool the
//! pattern and the grant both admit, with every version held in an allowed place (newest
//! first), the version a pull would choose, and where each is held (stores first, then the
//! source). At most [`MAX_LISTED`] matches are shown; the rest are counted in `omitted`. A
//! source that cannot be read leaves a note instead of failing the listing.

use std::collections::BTreeMap;

use mur_actors::artifact_error::{ArtifactError, ArtifactErrorKind};
use serde_json::{json, Map, Value};

use super::config::Source;
use super::decls::pattern_list;
use super::pull::{index_fit, store_fit};
use super::service::PullService;
use super::version::compare_versions;
use crate::manifest::{ArtifactName, InstallCap, InstallPattern};

/// Most matches a listing shows.
pub const MAX_LISTED: usize = 50;

#[derive(Default)]
struct Row {
    runtime: String,
    description: Option<String>,
    /// (version, fits)
    versions: Vec<(String, bool)>,
    held_in: Vec<String>,
}

impl Row {
    fn add(&mut self, version: &str, fits: bool, place: &str) {
        match self.versions.iter_mut().find(|(v, _)| v == version) {
            Some(slot) => slot.1 |= fits,
            None => self.versions.push((version.to_string(), fits)),
        }
        if !self.held_in.iter().any(|p| p == place) {
            self.held_in.push(place.to_string());
        }
    }
}

/// Whether two install patterns admit a common name.
fn overlaps(a: &InstallPattern, b: &InstallPattern) -> bool {
    a.covers(b) || b.covers(a)
}

fn pattern_scope(p: &InstallPattern) -> Option<&str> {
    match p {
        InstallPattern::Any => None,
        InstallPattern::Scope(s) => Some(s),
        InstallPattern::Prefix { scope, .. } => Some(scope),
        InstallPattern::Exact(n) => Some(n.scope()),
    }
}

impl PullService {
    pub(super) async fn list(
        &self,
        install: &InstallCap,
        text: &str,
    ) -> Result<Value, ArtifactError> {
        let pattern = InstallPattern::parse(text).map_err(|e| {
            let why = e
                .message
                .split_once(" is invalid (")
                .and_then(|(_, rest)| rest.split_once("); expected"))
                .map(|(why, _)| why.to_string())
                .unwrap_or(e.message.clone());
            ArtifactError::new(ArtifactErrorKind::NotGranted, format!(
                "'{text}' is neither an artifact name nor a pattern ({why}); expected a full artifact name '<scope>/<name>', '<scope>/<name>@<version>', or a pattern ending in a single trailing '*' (e.g. 'murmur/tool-*' or 'murmur/*')"
            ))
        })?;
        let reaches = install
            .tool
            .iter()
            .chain(&install.skill)
            .any(|g| overlaps(g, &pattern));
        if !reaches {
            return Err(ArtifactError::new(
                ArtifactErrorKind::NotGranted,
                format!(
                    "'{text}' reaches no name capabilities.install grants (skill: {}; tool: {})",
                    pattern_list(&install.skill),
                    pattern_list(&install.tool)
                ),
            ));
        }
        let admitted = |name: &ArtifactName, role: &str| -> bool {
            let list = match role {
                "tool" => &install.tool,
                "skill" => &install.skill,
                _ => return false,
            };
            pattern.matches(name) && list.iter().any(|g| g.matches(name))
        };

        let mut rows: BTreeMap<ArtifactName, Row> = BTreeMap::new();
        for store in &self.stores {
            for name in store.names() {
                if !pattern.matches(&name) {
                    continue;
                }
                for v in store.versions(&name) {
                    // The payload's own role when it can be read (what a pull checks), else
                    // the sidecar's.
                    let fit = store_fit(store, &name, &v);
                    let role = match &fit {
                        Ok(role) => role.to_string(),
                        Err(_) => v
                            .meta
                            .as_ref()
                            .map(|m| m.artifact_runtime.clone())
                            .unwrap_or_default(),
                    };
                    if !admitted(&name, &role) {
                        continue;
                    }
                    let row = rows.entry(name.clone()).or_default();
                    row.runtime = role;
                    if row.description.is_none() {
                        row.description = v.meta.as_ref().and_then(|m| m.description.clone());
                    }
                    row.add(&v.version, fit.is_ok(), store.label());
                }
            }
        }

        let mut notes = Vec::new();
        if install.from_sources() {
            for src in self.sources_for(install, &pattern) {
                let label = src.label();
                let index = match self.client() {
                    Ok(c) => c.index(&src).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                let index = match index {
                    Ok(i) => i,
                    Err(e) => {
                        notes.push(format!("{label} could not be consulted: {e}"));
                        continue;
                    }
                };
                for art in &index.artifacts {
                    let Ok(name) = ArtifactName::from_parts(&src.scope, &art.name) else {
                        continue;
                    };
                    if !admitted(&name, &art.runtime) {
                        continue;
                    }
                    let row = rows.entry(name.clone()).or_default();
                    if row.runtime.is_empty() {
                        row.runtime = art.runtime.clone();
                    }
                    if row.description.is_none() {
                        row.description = art.description.clone();
                    }
                    for iv in &art.versions {
                        row.add(&iv.version, index_fit(&name, iv).is_ok(), &label);
                    }
                }
            }
        }

        let total = rows.len();
        let matches: Vec<Value> = rows
            .into_iter()
            .take(MAX_LISTED)
            .map(|(name, mut row)| {
                row.versions.sort_by(|a, b| compare_versions(&b.0, &a.0));
                let mut m = Map::new();
                m.insert("artifact".into(), json!(name.to_string()));
                m.insert("runtime".into(), json!(row.runtime));
                if let Some(d) = row.description {
                    m.insert("description".into(), json!(d));
                }
                let versions: Vec<&str> = row.versions.iter().map(|(v, _)| v.as_str()).collect();
                m.insert("versions".into(), json!(versions));
                if let Some((v, _)) = row.versions.iter().find(|(_, fits)| *fits) {
                    m.insert("newest_fitting".into(), json!(v));
                }
                m.insert("held_in".into(), json!(row.held_in));
                Value::Object(m)
            })
            .collect();
        Ok(json!({
            "pattern": text,
            "matches": matches,
            "omitted": total.saturating_sub(MAX_LISTED),
            "notes": notes,
        }))
    }

    /// The sources a listing consults: the pattern's scope, or for `*` every scope a grant
    /// names (every configured one when a grant is `*` too).
    fn sources_for(&self, install: &InstallCap, pattern: &InstallPattern) -> Vec<Source> {
        let mut scopes: Vec<String> = Vec::new();
        match pattern_scope(pattern) {
            Some(s) => scopes.push(s.to_string()),
            None => {
                for g in install.tool.iter().chain(&install.skill) {
                    match pattern_scope(g) {
                        Some(s) => scopes.push(s.to_string()),
                        None => {
                            scopes.push("murmur".into());
                            scopes.extend(self.sources.sources.iter().map(|s| s.scope.clone()));
                        }
                    }
                }
            }
        }
        scopes.sort();
        scopes.dedup();
        scopes
            .iter()
            .filter_map(|s| self.sources.source_for(s))
            .collect()
    }
}

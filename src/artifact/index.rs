//! `artifacts-index.json` (schema 2): what a scope's GitHub source publishes.
//!
//! The index is an asset of the source's latest release. It lists every artifact of the scope
//! with its versions (newest first), the release whose assets hold each version, and each
//! asset's file name, platform tag and sha256, so a pull can decide tier and fit, and check the
//! bytes, before and after downloading anything.

use serde::Deserialize;

use super::version::{compare_versions, host_platform};

/// The asset name of the index on a release.
pub const INDEX_ASSET: &str = "artifacts-index.json";

/// A whole index.
#[derive(Clone, Debug, Deserialize)]
pub struct Index {
    /// The scope the index claims (must be the source's).
    pub scope: String,
    /// Artifacts, by bare name.
    #[serde(default)]
    pub artifacts: Vec<IndexArtifact>,
}

/// One artifact of the scope.
#[derive(Clone, Debug, Deserialize)]
pub struct IndexArtifact {
    /// Bare name.
    pub name: String,
    /// Role: `tool`, `skill`, `hook`, `driver` (or `capsule`).
    pub runtime: String,
    /// Description shown in listings.
    #[serde(default)]
    pub description: Option<String>,
    /// Versions, newest first.
    #[serde(default)]
    pub versions: Vec<IndexVersion>,
}

/// One published version.
#[derive(Clone, Debug, Deserialize)]
pub struct IndexVersion {
    /// Version.
    pub version: String,
    /// Tag of the release holding its assets.
    pub release: String,
    /// `murmur:` interfaces a WebAssembly component uses (empty for native and static payloads).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Payload files.
    #[serde(default)]
    pub assets: Vec<IndexAsset>,
}

/// One payload file of a version.
#[derive(Clone, Debug, Deserialize)]
pub struct IndexAsset {
    /// `<name>-<version>[-<platform>].mur.zip`.
    pub file: String,
    /// Platform tag, when the payload is per-platform.
    #[serde(default)]
    pub platform: Option<String>,
    /// Lowercase hex sha256 of the file.
    pub sha256: String,
}

/// Whether a version can run on this mur.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// It can.
    Fits,
    /// A WebAssembly component: mur runs native tools and skills only.
    Wasm,
    /// No payload for this host's platform.
    NoPayloadFor(String),
}

impl IndexVersion {
    /// The asset for this host: tagged with its platform, else untagged; never another's.
    pub fn host_asset(&self) -> Option<&IndexAsset> {
        let host = host_platform();
        self.assets
            .iter()
            .find(|a| a.platform.as_deref() == Some(host.as_str()))
            .or_else(|| self.assets.iter().find(|a| a.platform.is_none()))
    }

    /// Whether this version fits this mur.
    pub fn fit(&self) -> Fit {
        if self.interfaces.iter().any(|i| i.starts_with("murmur:")) {
            Fit::Wasm
        } else if self.host_asset().is_none() {
            Fit::NoPayloadFor(host_platform())
        } else {
            Fit::Fits
        }
    }
}

impl IndexArtifact {
    /// The version entry for exactly `version`.
    pub fn version(&self, version: &str) -> Option<&IndexVersion> {
        self.versions.iter().find(|v| v.version == version)
    }

    /// Version strings, newest first.
    pub fn version_list(&self) -> Vec<String> {
        let mut v: Vec<String> = self.versions.iter().map(|v| v.version.clone()).collect();
        v.sort_by(|a, b| compare_versions(b, a));
        v
    }
}

impl Index {
    /// The artifact with bare name `name`.
    pub fn artifact(&self, name: &str) -> Option<&IndexArtifact> {
        self.artifacts.iter().find(|a| a.name == name)
    }
}

/// Why an index cannot be read: E-IDX-002 wherever it is met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexError {
    /// A schema 1 index (the format before per-asset digests), which this mur does not read.
    Schema1(String),
    /// Not JSON, another schema, or fields missing.
    Unreadable(String),
}

impl IndexError {
    /// The sentence.
    pub fn message(&self) -> &str {
        match self {
            IndexError::Schema1(s) | IndexError::Unreadable(s) => s,
        }
    }

    /// What the reader can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            IndexError::Schema1(_) => SCHEMA_1_HINT,
            IndexError::Unreadable(_) => "its publisher regenerates it as a schema 2 index",
        }
    }
}

impl std::fmt::Display for IndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The hint on a schema 1 index (the original Murmur gives the same advice).
pub const SCHEMA_1_HINT: &str = "a schema 1 artifact index is not read by this mur; its publisher regenerates it as schema 2 with `mur index <dir> --repo <owner>/<repo> --release <tag>` (the original Murmur's mur 0.8)";

/// Parses index bytes; `label` names the source (and release). Only schema 2 is read.
pub fn parse_index(bytes: &[u8], label: &str) -> Result<Index, IndexError> {
    let unreadable = |s: String| IndexError::Unreadable(s);
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| unreadable(format!("the index of {label} is not JSON: {e}")))?;
    match value.get("schema_version") {
        Some(v) if v.as_u64() == Some(2) => {}
        Some(v) if v.as_u64() == Some(1) || v.as_str() == Some("1") => {
            return Err(IndexError::Schema1(format!(
                "the index of {label} is a schema 1 index; this mur reads schema 2"
            )))
        }
        Some(v) => {
            return Err(unreadable(format!(
                "the index of {label} has unsupported schema_version {v} (expected 2)"
            )))
        }
        None => {
            return Err(unreadable(format!(
                "the index of {label} has no schema_version"
            )))
        }
    }
    serde_json::from_value(value)
        .map_err(|e| unreadable(format!("the index of {label} is malformed: {e}")))
}

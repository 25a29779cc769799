//! Artifact stores: the project store `<project>/.murmur/artifacts/` and the global store
//! `<murmur home>/artifacts/`.
//!
//! Layout (upstream's): `<root>/<scope>/<name>/<version>/<name>-<version>[-<platform>].mur.zip`
//! with a `.sha256` sidecar (lowercase hex of the zip) and a `.meta.json` sidecar. Every read
//! checks the bytes against the sidecar, because a store is a cache anyone can write to. Every
//! write is all-or-nothing: the version folder is built beside the real one and renamed into
//! place, so a failed or interrupted write leaves the store as it was.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::payload::Payload;
use super::version::{compare_versions, host_platform, is_platform_tag};
use crate::manifest::ArtifactName;

/// Which store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// `<project>/.murmur/artifacts/`.
    Project,
    /// `<murmur home>/artifacts/`.
    Global,
}

/// One store on disk.
#[derive(Clone, Debug)]
pub struct Store {
    /// The folder holding `<scope>/<name>/<version>/`.
    pub root: PathBuf,
    /// Project or global.
    pub kind: StoreKind,
}

/// The `.meta.json` sidecar (inside `{"meta": …}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Full name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Packaging: `native`, `wasm` or `static` (capsules are `wasm`; older mur wrote `capsule`).
    pub runtime: String,
    /// Role: `tool`, `skill`, `hook`, `driver` or `capsule`.
    pub artifact_runtime: String,
    /// `[os, arch]` pairs of the platform-tagged payloads held.
    #[serde(default)]
    pub platforms: Vec<[String; 2]>,
    /// Description from the packed manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tags (kept for compatibility).
    #[serde(default)]
    pub tags: Vec<String>,
    /// GitHub id of the scope's owner when fetched from a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct MetaFile {
    meta: Meta,
}

/// A payload read from a store, its hash already checked.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The `.mur.zip` bytes.
    pub bytes: Vec<u8>,
    /// Lowercase hex sha256 of the bytes.
    pub sha256: String,
    /// The platform tag of the file read, `None` for the untagged one.
    pub platform: Option<String>,
    /// The `.mur.zip` path.
    pub path: PathBuf,
    /// The sidecar, when present and readable.
    pub meta: Option<Meta>,
}

/// The payload file a store holds for this host, read but not checked.
struct HostPayload {
    /// `<name>-<version>[-<platform>]`: the sidecars are named after it.
    stem: String,
    /// The `.mur.zip` bytes.
    bytes: Vec<u8>,
    /// The platform tag, `None` for the untagged payload.
    platform: Option<String>,
}

/// One version folder of an artifact in a store.
#[derive(Clone, Debug)]
pub struct StoreVersion {
    /// Version.
    pub version: String,
    /// Platform tags held; `None` stands for the untagged payload.
    pub payloads: Vec<Option<String>>,
    /// The sidecar of the untagged payload, else of the first tagged one.
    pub meta: Option<Meta>,
}

impl StoreVersion {
    /// True when a payload for this host (tagged for it, or untagged) is held.
    pub fn has_host_payload(&self) -> bool {
        let host = host_platform();
        self.payloads
            .iter()
            .any(|p| p.as_deref().is_none_or(|t| t == host))
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `<name>-<version>[-<platform>]`.
pub fn file_stem(bare: &str, version: &str, platform: Option<&str>) -> String {
    match platform {
        Some(p) => format!("{bare}-{version}-{p}"),
        None => format!("{bare}-{version}"),
    }
}

impl Store {
    /// The project store of the project whose `murmur.yaml` is in `project_dir`.
    pub fn project(project_dir: &Path) -> Store {
        Store {
            root: project_dir.join(".murmur").join("artifacts"),
            kind: StoreKind::Project,
        }
    }

    /// The global store under `home` (the murmur home, see [`super::config::murmur_home`]).
    pub fn global(home: &Path) -> Store {
        Store {
            root: home.join("artifacts"),
            kind: StoreKind::Global,
        }
    }

    /// `project store` or `global store`: the label used in messages and `fetched_from`.
    pub fn label(&self) -> &'static str {
        match self.kind {
            StoreKind::Project => "project store",
            StoreKind::Global => "global store",
        }
    }

    /// `<root>/<scope>/<name>/<version>/`.
    pub fn version_dir(&self, name: &ArtifactName, version: &str) -> PathBuf {
        self.root.join(name.scope()).join(name.name()).join(version)
    }

    /// The payload of `name@version` for this host (tagged with the host's platform, else
    /// untagged); `Ok(None)` when neither is held. Nothing is checked.
    fn read_host_payload(
        &self,
        name: &ArtifactName,
        version: &str,
    ) -> Result<Option<HostPayload>, String> {
        let dir = self.version_dir(name, version);
        let host = host_platform();
        for platform in [Some(host.as_str()), None] {
            let stem = file_stem(name.name(), version, platform);
            let zip = dir.join(format!("{stem}.mur.zip"));
            match crate::files::read_capped(&zip, crate::files::ARCHIVE_CAP) {
                Ok(bytes) => {
                    return Ok(Some(HostPayload {
                        stem,
                        bytes,
                        platform: platform.map(str::to_string),
                    }))
                }
                Err(e) if e.not_found() => continue,
                Err(e) => return Err(format!("cannot read {}: {e}", zip.display())),
            }
        }
        Ok(None)
    }

    /// Reads `name@version` for this host: the payload tagged with the host's platform, else
    /// the untagged one. `Ok(None)` when neither is held; `Err` when one is held but its
    /// sidecar is missing or does not match the bytes.
    pub fn get(&self, name: &ArtifactName, version: &str) -> Result<Option<Stored>, String> {
        let Some(HostPayload {
            stem,
            bytes,
            platform,
        }) = self.read_host_payload(name, version)?
        else {
            return Ok(None);
        };
        let dir = self.version_dir(name, version);
        let side = dir.join(format!("{stem}.sha256"));
        let recorded = std::fs::read_to_string(&side)
            .map_err(|e| format!("cannot read {}: {e}", side.display()))?
            .trim()
            .to_ascii_lowercase();
        if recorded.is_empty() {
            return Err(format!("{} is empty", side.display()));
        }
        let actual = sha256_hex(&bytes);
        if actual != recorded {
            return Err(format!(
                "artifact integrity check failed for {name}@{version}: the reported hash does \
                 not match the bytes ({} records {recorded}, the file hashes to {actual})",
                side.display()
            ));
        }
        let meta = read_meta(&dir.join(format!("{stem}.meta.json")));
        Ok(Some(Stored {
            bytes,
            sha256: actual,
            platform,
            path: dir.join(format!("{stem}.mur.zip")),
            meta,
        }))
    }

    /// The bytes of `name@version` for this host (tagged, else untagged), unchecked: for
    /// judging what a payload declares; whatever runs is read through [`Store::get`].
    pub fn peek_bytes(
        &self,
        name: &ArtifactName,
        version: &str,
    ) -> Result<Option<Vec<u8>>, String> {
        Ok(self.read_host_payload(name, version)?.map(|p| p.bytes))
    }

    /// Every version of `name` held, newest first.
    pub fn versions(&self, name: &ArtifactName) -> Vec<StoreVersion> {
        let base = self.root.join(name.scope()).join(name.name());
        let Ok(rd) = std::fs::read_dir(&base) else {
            return Vec::new();
        };
        let mut out: Vec<StoreVersion> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let version = e.file_name().to_str()?.to_string();
                if version.starts_with('.') {
                    return None;
                }
                self.version_entry(name, &version, &e.path())
            })
            .collect();
        out.sort_by(|a, b| compare_versions(&b.version, &a.version));
        out
    }

    fn version_entry(
        &self,
        name: &ArtifactName,
        version: &str,
        dir: &Path,
    ) -> Option<StoreVersion> {
        let prefix = format!("{}-{version}", name.name());
        let mut payloads = Vec::new();
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            let file = e.file_name();
            let Some(file) = file.to_str() else { continue };
            let Some(rest) = file.strip_prefix(&prefix) else {
                continue;
            };
            let Some(tag) = rest.strip_suffix(".mur.zip") else {
                continue;
            };
            match tag.strip_prefix('-') {
                None if tag.is_empty() => payloads.push(None),
                Some(t) if is_platform_tag(t) => payloads.push(Some(t.to_string())),
                _ => {}
            }
        }
        if payloads.is_empty() {
            return None;
        }
        payloads.sort();
        let meta_stem = file_stem(name.name(), version, payloads[0].as_deref());
        let meta = read_meta(&dir.join(format!("{meta_stem}.meta.json")));
        Some(StoreVersion {
            version: version.to_string(),
            payloads,
            meta,
        })
    }

    /// Every artifact name held (any version), sorted.
    pub fn names(&self) -> Vec<ArtifactName> {
        let mut out = Vec::new();
        let Ok(scopes) = std::fs::read_dir(&self.root) else {
            return out;
        };
        for scope in scopes.flatten() {
            let Some(s) = scope.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(names) = std::fs::read_dir(scope.path()) else {
                continue;
            };
            for n in names.flatten() {
                if let Some(n) = n.file_name().to_str() {
                    if let Ok(name) = ArtifactName::from_parts(&s, n) {
                        out.push(name);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Files `bytes` (already unpacked as `payload`) as `name` at the packed version, tagged with
    /// `platform` if given. Refuses a payload whose packed name is not `name`'s bare part. The
    /// version folder is rebuilt beside the old one and swapped in by rename; payloads of other
    /// platforms already held are kept. Returns the `.mur.zip` path.
    pub fn put(
        &self,
        name: &ArtifactName,
        bytes: &[u8],
        payload: &Payload,
        platform: Option<&str>,
        owner_id: Option<u64>,
    ) -> Result<PathBuf, String> {
        let version = payload.manifest.version().to_string();
        if payload.manifest.name() != name.name() {
            return Err(format!(
                "artifact {name}@{version} declares name '{}' in its murmur.yaml, so it cannot be filed as {name}",
                payload.manifest.name()
            ));
        }
        crate::manifest::names::check_version(&version)
            .map_err(|why| format!("artifact {name}: version {why}"))?;
        let dir = self.version_dir(name, &version);
        let parent = dir.parent().unwrap_or(&self.root).to_path_buf();
        std::fs::create_dir_all(&parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        let tmp = parent.join(format!(".tmp-{version}-{}", uuid::Uuid::now_v7().simple()));
        let result = self.fill_and_swap(
            name, &version, bytes, payload, platform, owner_id, &dir, &tmp,
        );
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_and_swap(
        &self,
        name: &ArtifactName,
        version: &str,
        bytes: &[u8],
        payload: &Payload,
        platform: Option<&str>,
        owner_id: Option<u64>,
        dir: &Path,
        tmp: &Path,
    ) -> Result<PathBuf, String> {
        let io = |e: std::io::Error| format!("cannot write {}: {e}", tmp.display());
        std::fs::create_dir(tmp).map_err(io)?;
        let stem = file_stem(name.name(), version, platform);
        let mut platforms: Vec<[String; 2]> = Vec::new();
        if dir.is_dir() {
            for e in std::fs::read_dir(dir).map_err(io)?.flatten() {
                let f = e.file_name();
                let keep = f
                    .to_str()
                    .is_some_and(|s| !s.starts_with(&format!("{stem}.")) && !s.starts_with('.'));
                if keep && e.file_type().is_ok_and(|t| t.is_file()) {
                    std::fs::copy(e.path(), tmp.join(&f)).map_err(io)?;
                }
            }
            if let Some(m) = self.version_entry(name, version, dir) {
                for p in m.payloads.into_iter().flatten() {
                    if Some(p.as_str()) != platform {
                        platforms.push(split_platform(&p));
                    }
                }
            }
        }
        if let Some(p) = platform {
            platforms.push(split_platform(p));
        }
        let meta = Meta {
            name: name.to_string(),
            version: version.to_string(),
            runtime: payload.manifest.packaging().to_string(),
            artifact_runtime: payload.manifest.role().to_string(),
            platforms,
            description: payload.manifest.description().map(str::to_string),
            tags: Vec::new(),
            owner_id,
        };
        let meta_json = serde_json::to_string_pretty(&MetaFile { meta }).unwrap_or_default();
        write_synced(&tmp.join(format!("{stem}.mur.zip")), bytes).map_err(io)?;
        write_synced(
            &tmp.join(format!("{stem}.sha256")),
            sha256_hex(bytes).as_bytes(),
        )
        .map_err(io)?;
        write_synced(&tmp.join(format!("{stem}.meta.json")), meta_json.as_bytes()).map_err(io)?;
        let old = dir.with_file_name(format!(".old-{version}-{}", uuid::Uuid::now_v7().simple()));
        let had_old = dir.exists();
        if had_old {
            std::fs::rename(dir, &old)
                .map_err(|e| format!("cannot replace {}: {e}", dir.display()))?;
        }
        if let Err(e) = std::fs::rename(tmp, dir) {
            if had_old {
                let _ = std::fs::rename(&old, dir);
            }
            return Err(format!("cannot move {} into place: {e}", dir.display()));
        }
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(dir.join(format!("{stem}.mur.zip")))
    }

    /// Deletes `name@version` (every platform). Missing is not an error.
    pub fn remove(&self, name: &ArtifactName, version: &str) -> Result<(), String> {
        let dir = self.version_dir(name, version);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot delete {}: {e}", dir.display())),
        }
    }
}

fn split_platform(p: &str) -> [String; 2] {
    match p.split_once('-') {
        Some((os, arch)) => [os.to_string(), arch.to_string()],
        None => [p.to_string(), String::new()],
    }
}

fn read_meta(path: &Path) -> Option<Meta> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice::<MetaFile>(&text)
        .ok()
        .map(|m| m.meta)
}

/// Writes a new file and fsyncs it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::payload::{unpack, zip_entries};

    fn tool(name: &str, version: &str) -> Vec<u8> {
        let m =
            format!("name: {name}\nversion: {version}\nruntime: tool\nimplementation: native\n");
        zip_entries(vec![
            ("murmur.yaml".into(), m.into_bytes(), false),
            (format!("bin/{name}"), b"#!/bin/sh\n".to_vec(), true),
        ])
        .unwrap()
    }

    #[test]
    fn a_refused_write_leaves_nothing_and_platforms_accumulate() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::project(tmp.path());
        let bytes = tool("t", "1.0.0");
        let p = unpack(&bytes, "t").unwrap();
        let wrong = ArtifactName::parse("ana/other").unwrap();
        let e = store.put(&wrong, &bytes, &p, None, None).unwrap_err();
        assert_eq!(e, "artifact ana/other@1.0.0 declares name 't' in its murmur.yaml, so it cannot be filed as ana/other");
        assert!(!store.root.join("ana/other/1.0.0").exists());
        let left: Vec<_> = std::fs::read_dir(store.root.join("ana/other"))
            .map(|d| d.count())
            .into_iter()
            .collect();
        assert!(left.iter().all(|n| *n == 0), "no temporary folder is left");

        let name = ArtifactName::parse("ana/t").unwrap();
        store
            .put(&name, &bytes, &p, Some("linux-aarch64"), Some(7))
            .unwrap();
        store
            .put(&name, &bytes, &p, Some("darwin-aarch64"), None)
            .unwrap();
        let v = &store.versions(&name)[0];
        assert_eq!(
            v.payloads,
            [
                Some("darwin-aarch64".to_string()),
                Some("linux-aarch64".to_string())
            ]
        );
        store.put(&name, &bytes, &p, None, None).unwrap();
        let hit = store.get(&name, "1.0.0").unwrap().unwrap();
        assert_eq!(hit.sha256, sha256_hex(&bytes));
        assert_eq!(store.versions(&name)[0].payloads.len(), 3);
    }
}

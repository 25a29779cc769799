//! `.mur.zip` payloads: packing a folder and unpacking one safely.
//!
//! A `.mur.zip` holds `murmur.yaml` at its root plus the payload: `bin/<name>` for a native tool
//! or hook, `skill.md` for a skill, or a capsule's own manifest and its files. Zips come from
//! the network, so unpacking trusts nothing: a corrupt archive, an entry that would land outside
//! the target (`../`, absolute), a symbolic link, or an oversized entry is refused with a message
//! naming the file and the entry. Everything is read into memory first and checked whole, so a
//! refused payload never leaves a half-written folder.

use std::io::{Cursor, Read, Write};
use std::path::Path;

use crate::manifest::{parse_artifact_manifest, ArtifactManifest, ArtifactRuntime, Implementation};

/// The manifest file at the root of every payload.
pub const MANIFEST_ENTRY: &str = "murmur.yaml";

/// Size limits applied while unpacking.
#[derive(Clone, Copy, Debug)]
pub struct ZipLimits {
    /// Largest single entry, uncompressed.
    pub entry_bytes: u64,
    /// Largest total, uncompressed.
    pub total_bytes: u64,
    /// Most entries.
    pub entries: usize,
}

impl Default for ZipLimits {
    /// 64 MiB per entry, 256 MiB in all, 10,000 entries.
    fn default() -> Self {
        ZipLimits {
            entry_bytes: 64 << 20,
            total_bytes: 256 << 20,
            entries: 10_000,
        }
    }
}

/// One file of a payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadFile {
    /// Relative path with `/` separators, checked to stay inside the payload.
    pub path: String,
    /// Contents.
    pub bytes: Vec<u8>,
    /// Whether it is written executable (`bin/*`, or an executable mode in the zip).
    pub executable: bool,
}

/// What a capsule artifact says about itself (the rest is read by `mur run` when it launches).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapsuleInfo {
    /// Bare name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// The packed `murmur.yaml`, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum PackedManifest {
    /// A tool, skill, hook or driver artifact.
    Artifact(ArtifactManifest),
    /// A capsule (its own capsule manifest; it has no `runtime:` key).
    Capsule(CapsuleInfo),
}

impl PackedManifest {
    /// Bare name.
    pub fn name(&self) -> &str {
        match self {
            PackedManifest::Artifact(m) => &m.name,
            PackedManifest::Capsule(c) => &c.name,
        }
    }

    /// Version.
    pub fn version(&self) -> &str {
        match self {
            PackedManifest::Artifact(m) => &m.version,
            PackedManifest::Capsule(c) => &c.version,
        }
    }

    /// The role word: `tool`, `skill`, `hook`, `driver` or `capsule`.
    pub fn role(&self) -> &'static str {
        match self {
            PackedManifest::Artifact(m) => m.runtime.as_str(),
            PackedManifest::Capsule(_) => "capsule",
        }
    }

    /// The packaging word of store sidecars: `native`, `wasm` or `static`, the only three the
    /// original Murmur reads there (one other word makes its whole store unreadable to it). A
    /// capsule is filed as `wasm`, as the original files one; its role word says `capsule`.
    pub fn packaging(&self) -> &'static str {
        match self {
            PackedManifest::Artifact(m) if m.runtime == ArtifactRuntime::Skill => "static",
            PackedManifest::Artifact(m) if m.implementation == Implementation::Native => "native",
            PackedManifest::Artifact(_) | PackedManifest::Capsule(_) => "wasm",
        }
    }

    /// What the payload is, for messages: the packaging word, or `capsule`.
    pub fn kind(&self) -> &'static str {
        match self {
            PackedManifest::Capsule(_) => "capsule",
            _ => self.packaging(),
        }
    }

    /// The description, when the manifest has one.
    pub fn description(&self) -> Option<&str> {
        match self {
            PackedManifest::Artifact(m) => m.description.as_deref(),
            PackedManifest::Capsule(_) => None,
        }
    }
}

/// An unpacked, checked payload.
#[derive(Clone, Debug)]
pub struct Payload {
    /// Every file, `murmur.yaml` included, in archive order.
    pub files: Vec<PayloadFile>,
    /// The packed manifest, parsed.
    pub manifest: PackedManifest,
    /// The packed manifest's text, verbatim.
    pub manifest_text: String,
}

impl Payload {
    /// The file at `path`, if packed.
    pub fn file(&self, path: &str) -> Option<&PayloadFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// The entrypoint a native tool or hook runs: `bin/<name>`.
    pub fn native_entry(&self) -> String {
        format!("bin/{}", self.manifest.name())
    }

    /// Writes every file under `dest` (created; must not exist or be empty), executables 0755.
    pub fn extract_to(&self, dest: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dest)?;
        for f in &self.files {
            let path = dest.join(&f.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?;
            out.write_all(&f.bytes)?;
            if f.executable {
                use std::os::unix::fs::PermissionsExt;
                out.set_permissions(std::fs::Permissions::from_mode(0o755))?;
            }
        }
        Ok(())
    }
}

/// Checks one entry name: relative, `/`-separated, no `..`, no empty or `.` components.
fn safe_entry_name(name: &str) -> bool {
    // An empty name and an absolute one fail the component rule below (an empty component).
    let drive_letter = name.len() >= 2 && name.as_bytes()[1] == b':';
    let forbidden = name.contains(['\\', '\0']) || drive_letter;
    !forbidden
        && name
            .trim_end_matches('/')
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// How many entries the archive's end-of-central-directory record says it holds (ZIP64 too).
fn central_directory_entries(bytes: &[u8]) -> Option<u64> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const EOCD64_LOCATOR: [u8; 4] = [0x50, 0x4b, 0x06, 0x07];
    // The record is 22 bytes plus a comment of at most 65,535 bytes, at the very end.
    let from = bytes.len().saturating_sub(22 + 65_535);
    let at = (from..bytes.len().saturating_sub(21))
        .rev()
        .find(|&i| bytes[i..i + 4] == EOCD)?;
    let count = u16::from_le_bytes([bytes[at + 10], bytes[at + 11]]);
    if count != u16::MAX {
        return Some(u64::from(count));
    }
    // ZIP64: the locator (20 bytes, just before the record) points at the ZIP64 record.
    let loc = at.checked_sub(20)?;
    if bytes[loc..loc + 4] != EOCD64_LOCATOR {
        return None;
    }
    // The offset is the archive's word: one near the top of the address space must not wrap.
    let off = usize::try_from(u64::from_le_bytes(
        bytes[loc + 8..loc + 16].try_into().ok()?,
    ))
    .ok()?;
    let rec = bytes.get(off..off.checked_add(40)?)?;
    Some(u64::from_le_bytes(rec[32..40].try_into().ok()?))
}

/// Unpacks `bytes` with the default limits; `label` names the file in messages.
pub fn unpack(bytes: &[u8], label: &str) -> Result<Payload, String> {
    unpack_with_limits(bytes, label, ZipLimits::default())
}

/// Unpacks and checks `bytes`: every refusal names `label` and, where there is one, the entry.
pub fn unpack_with_limits(bytes: &[u8], label: &str, limits: ZipLimits) -> Result<Payload, String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("{label} is not a readable .mur.zip: {e}"))?;
    if archive.len() > limits.entries {
        return Err(format!(
            "{label} has {} entries; at most {} are accepted",
            archive.len(),
            limits.entries
        ));
    }
    // The reader keeps one entry per name: an archive whose central directory lists more
    // holds a name twice, and a reviewer's zip tool may show a file other than the one `mur`
    // would run.
    if let Some(listed) = central_directory_entries(bytes) {
        if listed != archive.len() as u64 {
            return Err(format!(
                "{label} lists {listed} entries but only {} distinct names: an entry name appears twice; refused",
                archive.len()
            ));
        }
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| format!("{label} is not a readable .mur.zip (entry {i}): {e}"))?;
        let name = entry.name().to_string();
        if !safe_entry_name(&name) || entry.enclosed_name().is_none() {
            return Err(format!(
                "{label}: entry '{name}' would land outside the artifact (absolute or '..' path); refused"
            ));
        }
        if entry.is_symlink() {
            return Err(format!(
                "{label}: entry '{name}' is a symbolic link; a .mur.zip may hold only regular files"
            ));
        }
        if entry.is_dir() {
            continue;
        }
        if entry.size() > limits.entry_bytes {
            return Err(format!(
                "{label}: entry '{name}' is {} bytes, over the {} byte limit for one entry",
                entry.size(),
                limits.entry_bytes
            ));
        }
        let mut data = Vec::with_capacity(entry.size() as usize);
        (&mut entry)
            .take(limits.entry_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("{label}: entry '{name}' cannot be read: {e}"))?;
        if data.len() as u64 > limits.entry_bytes {
            return Err(format!(
                "{label}: entry '{name}' is over the {} byte limit for one entry",
                limits.entry_bytes
            ));
        }
        total += data.len() as u64;
        if total > limits.total_bytes {
            return Err(format!(
                "{label}: its entries add up to more than {} bytes; refused",
                limits.total_bytes
            ));
        }
        let mode_exec = entry.unix_mode().is_some_and(|m| m & 0o111 != 0);
        let path = name.trim_end_matches('/').to_string();
        if files.iter().any(|f: &PayloadFile| f.path == path) {
            return Err(format!("{label}: entry '{name}' appears twice"));
        }
        files.push(PayloadFile {
            executable: mode_exec || path.starts_with("bin/"),
            path,
            bytes: data,
        });
    }
    let manifest_file = files
        .iter()
        .find(|f| f.path == MANIFEST_ENTRY)
        .ok_or_else(|| format!("{label} has no murmur.yaml at its root"))?;
    let manifest_text = String::from_utf8(manifest_file.bytes.clone())
        .map_err(|_| format!("{label}: murmur.yaml is not UTF-8 text"))?;
    let manifest = parse_packed_manifest(&manifest_text, &format!("{label}: murmur.yaml"))?;
    let payload = Payload {
        files,
        manifest,
        manifest_text,
    };
    check_shape(&payload, label)?;
    Ok(payload)
}

/// What a payload declares, read without unpacking it: its packed manifest, checked against the
/// entry names the manifest implies (`bin/<name>`, `skill.md`). Only `murmur.yaml` is
/// decompressed, so a listing can judge a thousand stored payloads as a pull would judge one
/// (what `unpack` alone refuses, such as an unsafe entry name or an oversized entry, is still
/// refused by the pull itself).
pub fn peek(bytes: &[u8], label: &str) -> Result<PackedManifest, String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("{label} is not a readable .mur.zip: {e}"))?;
    let limits = ZipLimits::default();
    let text = {
        let entry = archive
            .by_name(MANIFEST_ENTRY)
            .map_err(|_| format!("{label} has no murmur.yaml at its root"))?;
        let mut data = Vec::new();
        entry
            .take(limits.entry_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("{label}: entry 'murmur.yaml' cannot be read: {e}"))?;
        String::from_utf8(data).map_err(|_| format!("{label}: murmur.yaml is not UTF-8 text"))?
    };
    let manifest = parse_packed_manifest(&text, &format!("{label}: murmur.yaml"))?;
    let names: std::collections::HashSet<&str> = archive
        .file_names()
        .map(|n| n.trim_end_matches('/'))
        .collect();
    if let Some(path) = required_entry(&manifest).filter(|p| !names.contains(p.as_str())) {
        return Err(format!("{label}: the payload has no {path}"));
    }
    Ok(manifest)
}

/// The file a payload must hold beside its manifest: `skill.md` for a skill, `bin/<name>` for a
/// native tool or hook; none for a capsule or a WebAssembly component.
fn required_entry(manifest: &PackedManifest) -> Option<String> {
    let PackedManifest::Artifact(m) = manifest else {
        return None;
    };
    if m.runtime == ArtifactRuntime::Skill {
        Some("skill.md".to_string())
    } else if m.implementation == Implementation::Native {
        Some(format!("bin/{}", m.name))
    } else {
        None
    }
}

/// Parses a packed manifest: an artifact manifest when it has `runtime:`, else a capsule's.
pub fn parse_packed_manifest(text: &str, label: &str) -> Result<PackedManifest, String> {
    if let Some((line, col, why)) = crate::manifest::depth::too_costly(text) {
        return Err(format!(
            "{label}: YAML syntax error at line {line}, column {col}: {why}"
        ));
    }
    let value: serde_norway::Value =
        serde_norway::from_str(text).map_err(|e| format!("{label}: YAML syntax error: {e}"))?;
    let has_runtime = value.get("runtime").is_some();
    if has_runtime {
        let (m, _warnings) = parse_artifact_manifest(text, label).map_err(|errs| {
            errs.iter()
                .filter(|d| d.is_error())
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        return Ok(PackedManifest::Artifact(m));
    }
    let (m, _warnings) = crate::manifest::parse_str(text).map_err(|errs| {
        let msgs: Vec<String> = errs
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.clone())
            .collect();
        format!(
            "{label} is not a valid capsule manifest: {}",
            msgs.join("; ")
        )
    })?;
    crate::manifest::names::check_name_part(&m.name)
        .map_err(|why| format!("{label}: capsule name '{}' {why}", m.name))?;
    Ok(PackedManifest::Capsule(CapsuleInfo {
        name: m.name,
        version: m.version,
    }))
}

/// Checks that the files the manifest implies are there: `bin/<name>` for a native tool or
/// hook, `skill.md` for a skill.
fn check_shape(p: &Payload, label: &str) -> Result<(), String> {
    let Some(path) = required_entry(&p.manifest).filter(|path| p.file(path).is_none()) else {
        return Ok(());
    };
    match &p.manifest {
        PackedManifest::Artifact(m) if m.runtime == ArtifactRuntime::Skill => Err(format!(
            "{label}: a skill payload needs skill.md at its root"
        )),
        PackedManifest::Artifact(m) => Err(format!(
            "{label}: a native {} payload needs its program at {path}",
            m.runtime
        )),
        PackedManifest::Capsule(_) => Ok(()),
    }
}

/// Builds a deterministic `.mur.zip` from `(path, bytes, executable)` entries (sorted, fixed
/// timestamps), so the same folder always hashes the same.
pub fn zip_entries(mut entries: Vec<(String, Vec<u8>, bool)>) -> Result<Vec<u8>, String> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (path, bytes, exec) in entries {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(if exec { 0o755 } else { 0o644 });
        w.start_file(path.as_str(), opts)
            .map_err(|e| format!("cannot add {path}: {e}"))?;
        w.write_all(&bytes)
            .map_err(|e| format!("cannot add {path}: {e}"))?;
    }
    let cur = w
        .finish()
        .map_err(|e| format!("cannot finish the zip: {e}"))?;
    Ok(cur.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_yaml() -> Vec<u8> {
        b"name: t\nversion: 1.0.0\nruntime: tool\nimplementation: native\n".to_vec()
    }

    #[test]
    fn a_native_tool_round_trips() {
        let z = zip_entries(vec![
            ("murmur.yaml".into(), tool_yaml(), false),
            ("bin/t".into(), b"#!/bin/sh\n".to_vec(), false),
        ])
        .unwrap();
        let p = unpack(&z, "t.mur.zip").unwrap();
        assert_eq!(p.manifest.name(), "t");
        assert!(p.file("bin/t").unwrap().executable);
        assert_eq!(p.manifest.packaging(), "native");
    }

    #[test]
    fn each_kind_of_payload_names_its_packaging() {
        let pack = |yaml: &str, extra: Vec<(String, Vec<u8>, bool)>| {
            let mut entries = vec![("murmur.yaml".to_string(), yaml.as_bytes().to_vec(), false)];
            entries.extend(extra);
            unpack(&zip_entries(entries).unwrap(), "t.mur.zip").map(|p| p.manifest.packaging())
        };
        assert_eq!(
            pack(
                "name: t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\n",
                vec![]
            ),
            Ok("wasm")
        );
        assert_eq!(
            pack(
                "name: t\nversion: 1.0.0\nruntime: tool\nimplementation: native\n",
                vec![("bin/t".into(), b"#!/bin/sh\n".to_vec(), true)]
            ),
            Ok("native")
        );
        assert_eq!(
            pack(
                "name: t\nversion: 1.0.0\nruntime: skill\n",
                vec![("skill.md".into(), b"# t\n".to_vec(), false)]
            ),
            Ok("static")
        );
        // A capsule is filed as the original files one: packaging `wasm`, role `capsule`.
        let capsule = unpack(
            &zip_entries(vec![(
                "murmur.yaml".into(),
                b"name: c\nversion: \"1.0.0\"\n".to_vec(),
                false,
            )])
            .unwrap(),
            "c.mur.zip",
        )
        .unwrap();
        assert_eq!(
            (
                capsule.manifest.packaging(),
                capsule.manifest.kind(),
                capsule.manifest.role()
            ),
            ("wasm", "capsule", "capsule")
        );
    }

    #[test]
    fn unpacking_makes_programs_executable_and_nothing_else() {
        use std::os::unix::fs::PermissionsExt;
        let z = zip_entries(vec![
            ("murmur.yaml".into(), tool_yaml(), false),
            ("bin/t".into(), b"#!/bin/sh\n".to_vec(), false),
            ("lib/helper.sh".into(), b"#!/bin/sh\n".to_vec(), true),
            ("README.md".into(), b"# t\n".to_vec(), false),
        ])
        .unwrap();
        let p = unpack(&z, "t.mur.zip").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("t");
        p.extract_to(&dest).unwrap();
        let mode = |f: &str| {
            std::fs::metadata(dest.join(f))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        // Under bin/, or marked executable in the archive: 0755. Everything else keeps the
        // umask's default, never an exec bit.
        assert_eq!(mode("bin/t"), 0o755);
        assert_eq!(mode("lib/helper.sh"), 0o755);
        assert_eq!(mode("README.md") & 0o111, 0);
        assert_eq!(mode("murmur.yaml") & 0o111, 0);
        assert_eq!(std::fs::read(dest.join("README.md")).unwrap(), b"# t\n");
        // A second extraction over the first is refused, not merged.
        assert!(p.extract_to(&dest).is_err());
    }

    #[test]
    fn entry_names_that_escape_are_refused() {
        for bad in [
            "../x",
            "/etc/x",
            "/",
            "",
            "a//b",
            "a/./b",
            "a/../../x",
            "a\\b",
            "a\0b",
            "C:/x",
            "./",
        ] {
            assert!(!safe_entry_name(bad), "{bad}");
        }
        assert!(safe_entry_name("bin/t"));
        assert!(safe_entry_name("dir/"));
        // Names the zip reader itself would let through are refused by unpack all the same.
        for bad in ["a/./b", "a\\b", "C:x", "a//b"] {
            let z = zip_entries(vec![
                ("murmur.yaml".into(), tool_yaml(), false),
                ("bin/t".into(), b"#!/bin/sh\n".to_vec(), true),
                (bad.into(), b"x".to_vec(), false),
            ])
            .unwrap();
            assert_eq!(
                unpack(&z, "t.mur.zip").map(|_| ()),
                Err(format!("t.mur.zip: entry '{bad}' would land outside the artifact (absolute or '..' path); refused")),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_missing_entrypoint_is_named() {
        let z = zip_entries(vec![("murmur.yaml".into(), tool_yaml(), false)]).unwrap();
        let e = unpack(&z, "t.mur.zip").unwrap_err();
        assert_eq!(
            e,
            "t.mur.zip: a native tool payload needs its program at bin/t"
        );
    }

    /// Replace every `from` with `to` (same length) in the archive's bytes: local headers and
    /// central directory alike.
    fn rename(mut z: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let mut i = 0;
        while i + from.len() <= z.len() {
            if &z[i..i + from.len()] == from {
                z[i..i + from.len()].copy_from_slice(to);
            }
            i += 1;
        }
        z
    }

    #[test]
    fn an_archive_holding_a_name_twice_is_refused() {
        let z = zip_entries(vec![
            ("murmur.yaml".into(), tool_yaml(), false),
            (
                "bin/t".into(),
                b"#!/bin/sh\necho reviewed\n".to_vec(),
                false,
            ),
            ("bin/u".into(), b"#!/bin/sh\necho runs\n".to_vec(), false),
        ])
        .unwrap();
        assert!(unpack(&z, "t.mur.zip").is_ok());
        assert_eq!(central_directory_entries(&z), Some(3));
        let twice = rename(z, b"bin/u", b"bin/t");
        let e = unpack(&twice, "t.mur.zip").unwrap_err();
        assert_eq!(
            e,
            "t.mur.zip lists 3 entries but only 2 distinct names: an entry name appears twice; refused"
        );
    }

    #[test]
    fn peek_reads_the_manifest_and_checks_the_entry_it_names() {
        let z = zip_entries(vec![
            ("murmur.yaml".into(), tool_yaml(), false),
            ("bin/t".into(), b"#!/bin/sh\n".to_vec(), true),
        ])
        .unwrap();
        assert_eq!(peek(&z, "t.mur.zip").unwrap().name(), "t");
        let z = zip_entries(vec![("murmur.yaml".into(), tool_yaml(), false)]).unwrap();
        assert_eq!(
            peek(&z, "t.mur.zip").map(|m| m.name().to_string()),
            Err("t.mur.zip: the payload has no bin/t".into())
        );
        let z = zip_entries(vec![("murmur.yaml".into(), skill_yaml(), false)]).unwrap();
        assert_eq!(
            peek(&z, "s.mur.zip").map(|m| m.name().to_string()),
            Err("s.mur.zip: the payload has no skill.md".into())
        );
        assert!(peek(b"not a zip", "x.mur.zip")
            .unwrap_err()
            .starts_with("x.mur.zip is not a readable .mur.zip"));
    }

    #[test]
    fn a_zip64_archive_is_counted_from_its_zip64_record() {
        // A ZIP64 end record (forced here by a ZIP64 comment), with the classic record's counts
        // set to 0xFFFF as a writer does past 65,535 entries: the count comes from the ZIP64
        // record the locator points at.
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
        for (path, body) in [
            ("murmur.yaml", tool_yaml()),
            ("bin/t", b"#!/bin/sh\necho reviewed\n".to_vec()),
            ("bin/u", b"#!/bin/sh\necho runs\n".to_vec()),
        ] {
            w.start_file(path, opts).unwrap();
            w.write_all(&body).unwrap();
        }
        w.set_zip64_comment(Some("z64"));
        let mut z = w.finish().unwrap().into_inner();
        let eocd = z.len() - 22;
        assert_eq!(z[eocd..eocd + 4], [0x50, 0x4b, 0x05, 0x06]);
        z[eocd + 8..eocd + 12].copy_from_slice(&[0xff; 4]);
        assert_eq!(central_directory_entries(&z), Some(3));
        assert!(unpack(&z, "t.mur.zip").is_ok());
        let twice = rename(z, b"bin/u", b"bin/t");
        assert_eq!(central_directory_entries(&twice), Some(3));
        assert_eq!(
            unpack(&twice, "t.mur.zip").unwrap_err(),
            "t.mur.zip lists 3 entries but only 2 distinct names: an entry name appears twice; refused"
        );
        // A classic record saying 0xFFFF with no locator before it counts nothing.
        let mut bare = zip_entries(vec![("murmur.yaml".into(), tool_yaml(), false)]).unwrap();
        let eocd = bare.len() - 22;
        bare[eocd + 10..eocd + 12].copy_from_slice(&[0xff; 2]);
        assert_eq!(central_directory_entries(&bare), None);
    }

    fn skill_yaml() -> Vec<u8> {
        b"name: t\nversion: 1.0.0\nruntime: skill\n".to_vec()
    }

    fn limits(entry_bytes: u64, total_bytes: u64, entries: usize) -> ZipLimits {
        ZipLimits {
            entry_bytes,
            total_bytes,
            entries,
        }
    }

    #[test]
    fn sizes_and_counts_are_accepted_at_their_limit_and_refused_one_past_it() {
        let m = skill_yaml();
        let n = m.len() as u64;
        let z = zip_entries(vec![
            ("murmur.yaml".into(), m.clone(), false),
            ("skill.md".into(), vec![b'a'; 100], false),
        ])
        .unwrap();
        // One entry of exactly the limit, and a total of exactly the limit, pass.
        assert!(unpack_with_limits(&z, "z", limits(100, 100 + n, 2)).is_ok());
        assert_eq!(
            unpack_with_limits(&z, "z", limits(99, 1 << 20, 2)).err(),
            Some("z: entry 'skill.md' is 100 bytes, over the 99 byte limit for one entry".into())
        );
        assert_eq!(
            unpack_with_limits(&z, "z", limits(1 << 20, 100 + n - 1, 2)).err(),
            Some(format!(
                "z: its entries add up to more than {} bytes; refused",
                100 + n - 1
            ))
        );
        assert_eq!(
            unpack_with_limits(&z, "z", limits(1 << 20, 1 << 20, 1)).err(),
            Some("z has 2 entries; at most 1 are accepted".into())
        );
    }

    #[test]
    fn an_entry_whose_header_understates_its_size_is_refused_by_what_it_holds() {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        w.start_file("murmur.yaml", deflated).unwrap();
        w.write_all(&skill_yaml()).unwrap();
        w.start_file("skill.md", deflated).unwrap();
        w.write_all(&[b'a'; 4096]).unwrap();
        let mut z = w.finish().unwrap().into_inner();
        // Rewrite skill.md's uncompressed size to 10 in its local header and its central
        // directory entry: the header now says it is small.
        let name = b"skill.md";
        let mut patched = 0;
        for at in 0..z.len() - 4 {
            // (uncompressed size, file name) offsets in a local and a central header.
            let (size_at, name_at) = match &z[at..at + 4] {
                [0x50, 0x4b, 0x03, 0x04] => (at + 22, at + 30),
                [0x50, 0x4b, 0x01, 0x02] => (at + 24, at + 46),
                _ => continue,
            };
            if z.get(name_at..name_at + name.len()) == Some(&name[..]) {
                z[size_at..size_at + 4].copy_from_slice(&10u32.to_le_bytes());
                patched += 1;
            }
        }
        assert_eq!(patched, 2);
        // The reader takes at most the limit plus one byte, whatever the header says.
        assert_eq!(
            unpack_with_limits(&z, "z", limits(1024, 1 << 20, 10)).err(),
            Some("z: entry 'skill.md' is over the 1024 byte limit for one entry".into())
        );
        // Within the limit, the lie gains nothing: the bytes are read, not trusted.
        let payload = unpack_with_limits(&z, "z", limits(1 << 20, 1 << 20, 10)).unwrap();
        assert_eq!(payload.file("skill.md").map(|f| f.bytes.len()), Some(4096));
    }
}

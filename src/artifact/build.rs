//! `mur build DIR [-o OUT]`: pack a folder into a `.mur.zip`.
//!
//! The folder's `murmur.yaml` says what it is. A tool or hook artifact packs its manifest and
//! `bin/<name>` (native; the file name carries this host's platform tag), a skill packs
//! `skill.md`, both plus any `requires_files`. A folder whose `murmur.yaml` has no `runtime:` is
//! a capsule: its manifest and every regular file beside it are packed (not `workdir/`,
//! `.murmur/`, `.git/`, `target/`, `.env`, `murmur.lock` or other `.mur.zip` files). Entries are
//! sorted with fixed timestamps, so the same folder always packs to the same bytes.

use std::path::{Path, PathBuf};

use super::payload::{parse_packed_manifest, unpack, zip_entries, PackedManifest, MANIFEST_ENTRY};
use super::store::{file_stem, sha256_hex};
use super::version::host_platform;
use crate::diagnostic::Diagnostic;
use crate::manifest::{ArtifactRuntime, Implementation};

/// A packed artifact.
#[derive(Clone, Debug)]
pub struct Built {
    /// The `.mur.zip` bytes.
    pub bytes: Vec<u8>,
    /// The packed manifest.
    pub manifest: PackedManifest,
    /// Platform tag for a native payload.
    pub platform: Option<String>,
}

impl Built {
    /// `<name>-<version>[-<platform>].mur.zip`.
    pub fn file_name(&self) -> String {
        format!(
            "{}.mur.zip",
            file_stem(
                self.manifest.name(),
                self.manifest.version(),
                self.platform.as_deref()
            )
        )
    }
}

const SKIP_DIRS: [&str; 5] = ["workdir", ".murmur", ".git", "target", "node_modules"];

fn read_file(path: &Path) -> Result<Vec<u8>, Diagnostic> {
    std::fs::read(path).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            "E-IO-001"
        } else {
            "E-IO-003"
        };
        Diagnostic::error(code, format!("cannot read {}: {e}", path.display()))
    })
}

fn is_exec(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

fn safe_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Packs the folder `dir`. Errors name the folder and file.
pub fn pack_dir(dir: &Path) -> Result<Built, Diagnostic> {
    let manifest_path = dir.join(MANIFEST_ENTRY);
    let text = String::from_utf8(read_file(&manifest_path)?).map_err(|_| {
        Diagnostic::error(
            "E-IO-003",
            format!("{} is not UTF-8 text", manifest_path.display()),
        )
    })?;
    let label = manifest_path.display().to_string();
    if let Ok(v) = serde_norway::from_str::<serde_norway::Value>(&text) {
        if let Some(n) = v
            .get("name")
            .and_then(|n| n.as_str())
            .filter(|n| n.contains('/'))
        {
            return Err(Diagnostic::error(
                "E-BLD-001",
                format!("{label}: artifact name '{n}' has a scope; a packed name is bare, and the scope comes from where it is installed from"),
            )
            .with_hint(format!("name it '{}'", n.rsplit('/').next().unwrap_or(n))));
        }
    }
    let manifest = parse_packed_manifest(&text, &label).map_err(|e| {
        let code = if e.contains("'name'") {
            "E-BLD-001"
        } else {
            "E-MAN-003"
        };
        Diagnostic::error(code, e)
    })?;
    let mut entries: Vec<(String, Vec<u8>, bool)> =
        vec![(MANIFEST_ENTRY.into(), text.clone().into_bytes(), false)];
    let mut platform = None;
    match &manifest {
        PackedManifest::Artifact(m) => {
            let mut files: Vec<String> = m.requires_files.clone();
            if m.runtime == ArtifactRuntime::Skill {
                files.push("skill.md".into());
            } else if m.implementation == Implementation::Native {
                files.push(format!("bin/{}", m.name));
                platform = Some(host_platform());
            } else {
                return Err(Diagnostic::error(
                    "E-BLD-003",
                    format!("{label}: '{}' is a WebAssembly {}; mur packs native tools and hooks (implementation: native) and skills", m.name, m.runtime),
                ));
            }
            files.sort();
            files.dedup();
            for f in files {
                if !safe_relative(&f) || f == MANIFEST_ENTRY {
                    return Err(Diagnostic::error(
                        "E-BLD-002",
                        format!(
                            "{label}: requires_files entry '{f}' must be a relative path inside {}",
                            dir.display()
                        ),
                    ));
                }
                let path = dir.join(&f);
                if path.is_symlink() {
                    return Err(Diagnostic::error(
                        "E-BLD-002",
                        format!(
                            "{} is a symbolic link; pack the file itself",
                            path.display()
                        ),
                    ));
                }
                if !path.is_file() {
                    return Err(Diagnostic::error(
                        "E-BLD-003",
                        format!(
                            "{}: the payload needs {f}, and {} is not a file",
                            dir.display(),
                            path.display()
                        ),
                    ));
                }
                let exec = f.starts_with("bin/") || is_exec(&path);
                entries.push((f, read_file(&path)?, exec));
            }
        }
        PackedManifest::Capsule(_) => walk(dir, dir, &mut entries)?,
    }
    let bytes = zip_entries(entries)
        .map_err(|e| Diagnostic::error("E-IO-003", format!("{}: {e}", dir.display())))?;
    // The packed result must unpack under the same rules every reader applies.
    unpack(&bytes, &dir.display().to_string()).map_err(|e| Diagnostic::error("E-BLD-003", e))?;
    Ok(Built {
        bytes,
        manifest,
        platform,
    })
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>, bool)>) -> Result<(), Diagnostic> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        Diagnostic::error("E-IO-003", format!("cannot read {}: {e}", dir.display()))
    })?;
    let mut items: Vec<_> = rd.flatten().collect();
    items.sort_by_key(|e| e.file_name());
    for e in items {
        let path = e.path();
        let Some(fname) = e.file_name().to_str().map(str::to_string) else {
            return Err(Diagnostic::error(
                "E-BLD-002",
                format!("{} has a name that is not UTF-8", path.display()),
            ));
        };
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let ft = e
            .file_type()
            .map_err(|err| Diagnostic::error("E-IO-003", format!("{}: {err}", path.display())))?;
        if ft.is_dir() {
            if !SKIP_DIRS.contains(&fname.as_str()) {
                walk(root, &path, out)?;
            }
            continue;
        }
        if rel == MANIFEST_ENTRY
            || fname == ".env"
            || fname == "murmur.lock"
            || fname.ends_with(".mur.zip")
        {
            continue;
        }
        if ft.is_symlink() {
            return Err(Diagnostic::error(
                "E-BLD-002",
                format!(
                    "{} is a symbolic link; a .mur.zip holds only regular files",
                    path.display()
                ),
            ));
        }
        if ft.is_file() {
            let exec = is_exec(&path);
            out.push((rel, read_file(&path)?, exec));
        }
    }
    Ok(())
}

/// `mur build DIR [-o OUT]`: prints the path and sha256; returns the exit code.
pub fn run_build(dir: &Path, out: Option<&Path>) -> i32 {
    match build_to(dir, out) {
        Ok((path, built)) => {
            crate::outln!(
                "Built {}@{} ({}) → {}",
                built.manifest.name(),
                built.manifest.version(),
                built.manifest.role(),
                path.display()
            );
            crate::outln!("sha256: {}", sha256_hex(&built.bytes));
            0
        }
        Err(d) => {
            crate::errln!("{d}");
            1
        }
    }
}

/// Packs `dir` and writes it to `out` (default: the standard file name in the current folder),
/// atomically.
pub fn build_to(dir: &Path, out: Option<&Path>) -> Result<(PathBuf, Built), Diagnostic> {
    let built = pack_dir(dir)?;
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(built.file_name()),
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = parent.join(format!(".{}.tmp", uuid::Uuid::now_v7().simple()));
    let write =
        super::store::write_synced(&tmp, &built.bytes).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = write {
        let _ = std::fs::remove_file(&tmp);
        return Err(Diagnostic::error(
            "E-IO-003",
            format!("cannot write {}: {e}", path.display()),
        ));
    }
    Ok((path, built))
}

//! `murmur.lock` (`lock_version: 3`): the pins of every artifact a project runs.
//!
//! One entry per full name: the resolved version, its sha256 (`any` for a platform-independent
//! payload, `platforms` for per-platform ones), who pinned it (`operator` through `mur install`,
//! `runtime` through an in-session pull, with the pulling `session`), and the scope owner's
//! GitHub id when known. The writer emits the exact shape seed 001 shows; the reader accepts
//! any YAML spelling of it. Writes are atomic (temp file, fsync, rename) and serialized across
//! processes with an exclusive `flock` on the project folder: [`update_lock`] re-reads the lock
//! under that lock before merging, so two sessions pinning at the same moment both end up pinned.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde_norway::Value;

use crate::diagnostic::Diagnostic;
use crate::manifest::ArtifactName;

/// The lock file's name, beside `murmur.yaml`.
pub const LOCK_FILE: &str = "murmur.lock";

/// The only lock format read and written.
pub const LOCK_VERSION: u64 = 3;

/// The pinned hash of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinHash {
    /// A platform-independent payload.
    Any(String),
    /// One hash per platform tag, in the order first pinned.
    Platforms(Vec<(String, String)>),
}

impl PinHash {
    /// The hash shape for a payload read with `platform` (`None` = untagged).
    pub fn for_payload(sha256: &str, platform: Option<&str>) -> PinHash {
        match platform {
            Some(p) => PinHash::Platforms(vec![(p.to_string(), sha256.to_string())]),
            None => PinHash::Any(sha256.to_string()),
        }
    }

    /// The hash this pin records for a payload read with `platform`, if any.
    pub fn hash_for(&self, platform: Option<&str>) -> Option<&str> {
        match (self, platform) {
            (PinHash::Any(h), None) => Some(h),
            (PinHash::Platforms(m), Some(p)) => {
                m.iter().find(|(k, _)| k == p).map(|(_, v)| v.as_str())
            }
            _ => None,
        }
    }
}

/// Who pinned an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `mur install`: the operator vetted it.
    Operator,
    /// An in-session pull: untrusted.
    Runtime,
}

impl Origin {
    /// `operator` or `runtime`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Operator => "operator",
            Origin::Runtime => "runtime",
        }
    }

    /// `trusted` or `untrusted`.
    pub fn trust(self) -> &'static str {
        match self {
            Origin::Operator => "trusted",
            Origin::Runtime => "untrusted",
        }
    }
}

/// One pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEntry {
    /// Full name.
    pub name: ArtifactName,
    /// The version pinned.
    pub resolved_version: String,
    /// Its hash.
    pub sha256: PinHash,
    /// Who pinned it.
    pub origin: Origin,
    /// The session that pulled it (runtime pins only).
    pub session: Option<String>,
    /// The scope owner's GitHub id, when known.
    pub owner_id: Option<u64>,
}

/// A whole lock file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lock {
    /// Entries in file order.
    pub entries: Vec<LockEntry>,
}

impl Lock {
    /// The entry for `name`.
    pub fn entry(&self, name: &ArtifactName) -> Option<&LockEntry> {
        self.entries.iter().find(|e| &e.name == name)
    }

    /// Why pinning `name@version` with `hash` would contradict the existing pin, if it would.
    /// A platform with no hash yet is not a conflict.
    pub fn conflict_with(
        &self,
        name: &ArtifactName,
        version: &str,
        hash: &PinHash,
    ) -> Option<String> {
        let e = self.entry(name)?;
        if e.resolved_version != version {
            return Some(format!(
                "pinned {name}@{}, but {name}@{version} was resolved",
                e.resolved_version
            ));
        }
        match (&e.sha256, hash) {
            (PinHash::Any(a), PinHash::Any(b)) if a != b => Some(format!(
                "'{name}' is pinned at sha256 {a}, but {b} was resolved"
            )),
            (PinHash::Platforms(old), PinHash::Platforms(new)) => new.iter().find_map(|(p, h)| {
                old.iter()
                    .find(|(q, _)| q == p)
                    .filter(|(_, o)| o != h)
                    .map(|(_, o)| format!("'{name}' is pinned at sha256 {o} for {p}, but {h} was resolved"))
            }),
            (PinHash::Any(_), PinHash::Platforms(_)) => Some(format!(
                "'{name}' is pinned as a platform-independent payload but resolved as a per-platform one"
            )),
            (PinHash::Platforms(_), PinHash::Any(_)) => Some(format!(
                "'{name}' is pinned as a per-platform payload but resolved as a platform-independent one"
            )),
            _ => None,
        }
    }

    /// An owner id recorded for `scope` that differs from `owner_id`: `(recorded, entry name)`.
    pub fn owner_conflict(&self, scope: &str, owner_id: u64) -> Option<(u64, String)> {
        self.entries
            .iter()
            .filter(|e| e.name.scope() == scope)
            .find_map(|e| {
                e.owner_id
                    .filter(|id| *id != owner_id)
                    .map(|id| (id, e.name.to_string()))
            })
    }

    /// Pins an entry and returns the previous one. Upstream's merge: an operator pin makes the
    /// entry `operator` (dropping `session`); a runtime pin never changes an existing entry's
    /// origin or session; a changed version or hash shape replaces the hash, else a platform
    /// hash is added; an owner id is kept unless a new one is given.
    pub fn upsert(&mut self, pin: LockEntry) -> Option<LockEntry> {
        let Some(i) = self.entries.iter().position(|e| e.name == pin.name) else {
            self.entries.push(pin);
            return None;
        };
        let prev = self.entries[i].clone();
        let e = &mut self.entries[i];
        let same_version = e.resolved_version == pin.resolved_version;
        match (&mut e.sha256, pin.sha256) {
            (PinHash::Platforms(old), PinHash::Platforms(new)) if same_version => {
                for (p, h) in new {
                    match old.iter_mut().find(|(q, _)| *q == p) {
                        Some(slot) => slot.1 = h,
                        None => old.push((p, h)),
                    }
                }
            }
            (slot, new) => *slot = new,
        }
        e.resolved_version = pin.resolved_version;
        if pin.origin == Origin::Operator {
            e.origin = Origin::Operator;
            e.session = None;
        }
        if pin.owner_id.is_some() {
            e.owner_id = pin.owner_id;
        }
        Some(prev)
    }

    /// Deletes the entry for `name`; true when there was one.
    pub fn remove(&mut self, name: &ArtifactName) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| &e.name != name);
        before != self.entries.len()
    }

    /// The lock as YAML, in the shape seed 001 shows.
    pub fn to_yaml(&self) -> String {
        let mut out = format!("lock_version: {LOCK_VERSION}\n");
        if self.entries.is_empty() {
            out.push_str("artifacts: []\n");
            return out;
        }
        out.push_str("artifacts:\n");
        for e in &self.entries {
            out.push_str(&format!("  - name: {}\n", e.name));
            out.push_str(&format!(
                "    resolved_version: {}\n",
                quote(&e.resolved_version)
            ));
            out.push_str("    sha256:\n");
            match &e.sha256 {
                PinHash::Any(h) => out.push_str(&format!("      any: {}\n", quote(h))),
                PinHash::Platforms(m) => {
                    out.push_str("      platforms:\n");
                    for (p, h) in m {
                        out.push_str(&format!("        {}: {}\n", plain_or_quoted(p), quote(h)));
                    }
                }
            }
            out.push_str(&format!("    origin: {}\n", e.origin.as_str()));
            if let Some(s) = &e.session {
                out.push_str(&format!("    session: {}\n", plain_or_quoted(s)));
            }
            if let Some(id) = e.owner_id {
                out.push_str(&format!("    owner_id: {id}\n"));
            }
        }
        out
    }

    /// Parses lock text. The error is the reason, without the file name.
    pub fn parse(text: &str) -> Result<Lock, String> {
        if let Some((line, col, why)) = crate::manifest::depth::too_costly(text) {
            return Err(format!(
                "YAML parse error at line {line}, column {col}: {why}"
            ));
        }
        let value: Value =
            serde_norway::from_str(text).map_err(|e| format!("YAML parse error: {e}"))?;
        let Value::Mapping(map) = &value else {
            return Err("the lock must be a mapping with lock_version and artifacts".into());
        };
        match map.get("lock_version") {
            Some(Value::Number(n)) if n.as_u64() == Some(LOCK_VERSION) => {}
            Some(Value::Number(n)) => {
                return Err(format!(
                    "unsupported lock_version {n} (expected {LOCK_VERSION})"
                ))
            }
            Some(_) => return Err(format!("lock_version must be the number {LOCK_VERSION}")),
            None => return Err("missing lock_version".into()),
        }
        let items = match map.get("artifacts") {
            None | Some(Value::Null) => return Ok(Lock::default()),
            Some(Value::Sequence(items)) => items,
            Some(_) => return Err("'artifacts' must be a list of entries".into()),
        };
        let mut lock = Lock::default();
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let entry = parse_entry(item).map_err(|why| format!("entry {i}: {why}"))?;
            if !seen.insert(entry.name.to_string()) {
                return Err(format!("entry {i}: '{}' is pinned twice", entry.name));
            }
            lock.entries.push(entry);
        }
        Ok(lock)
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parse_entry(item: &Value) -> Result<LockEntry, String> {
    let Value::Mapping(m) = item else {
        return Err("must be a mapping".into());
    };
    let field = |k: &str| m.get(k).and_then(text_of).filter(|s| !s.trim().is_empty());
    let raw_name = field("name").ok_or("has no name")?;
    let name = ArtifactName::parse(&raw_name)
        .map_err(|e| format!("'{raw_name}' is not named <scope>/<name> ({})", e.message))?;
    let resolved_version =
        field("resolved_version").ok_or_else(|| format!("'{name}' has no resolved_version"))?;
    let sha256 = match m.get("sha256") {
        Some(Value::Mapping(h)) => {
            let any = h.get("any");
            let platforms = h.get("platforms");
            match (any, platforms) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "'{name}' pins both sha256.any and sha256.platforms (expected exactly one)"
                    ))
                }
                (Some(a), None) => PinHash::Any(
                    text_of(a)
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| format!("'{name}' has an empty sha256.any"))?,
                ),
                (None, Some(Value::Mapping(p))) if !p.is_empty() => {
                    let mut out = Vec::new();
                    for (k, v) in p {
                        let (Some(k), Some(v)) = (text_of(k), text_of(v).filter(|s| !s.is_empty()))
                        else {
                            return Err(format!("'{name}' has an empty sha256.platforms value"));
                        };
                        out.push((k, v));
                    }
                    PinHash::Platforms(out)
                }
                _ => {
                    return Err(format!(
                        "'{name}' pins no hash (expected either sha256.any or sha256.platforms)"
                    ))
                }
            }
        }
        _ => {
            return Err(format!(
                "'{name}' pins no hash (expected either sha256.any or sha256.platforms)"
            ))
        }
    };
    let origin = match m.get("origin").and_then(text_of).as_deref() {
        None | Some("operator") => Origin::Operator,
        Some("runtime") => Origin::Runtime,
        Some(other) => {
            return Err(format!(
                "'{name}' has unknown origin '{other}' (expected operator or runtime)"
            ))
        }
    };
    let session = match m.get("session") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            text_of(v)
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| format!("'{name}' has an empty session"))?,
        ),
    };
    match (origin, &session) {
        (Origin::Operator, Some(_)) => {
            return Err(format!("'{name}' has origin operator but names a session"))
        }
        (Origin::Runtime, None) => {
            return Err(format!("'{name}' has origin runtime but names no session"))
        }
        _ => {}
    }
    let owner_id = match m.get("owner_id") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => {
            Some(n.as_u64().ok_or_else(|| {
                format!("'{name}' has an owner_id that is not a positive integer")
            })?)
        }
        Some(Value::String(s)) => Some(
            s.parse()
                .map_err(|_| format!("'{name}' has an owner_id that is not a positive integer"))?,
        ),
        Some(_) => {
            return Err(format!(
                "'{name}' has an owner_id that is not a positive integer"
            ))
        }
    };
    Ok(LockEntry {
        name,
        resolved_version,
        sha256,
        origin,
        session,
        owner_id,
    })
}

/// `s` as a YAML double-quoted scalar that reads back as exactly `s`: every character YAML
/// does not print as itself (controls, DEL, the C1 range, line and paragraph separators, the
/// byte-order mark) is escaped. JSON's escaping is not enough: it leaves DEL and C1 raw, which a
/// YAML reader refuses (found by the lock fuzzer).
fn quote(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' '..='~'
            | '\u{a0}'..='\u{2027}'
            | '\u{202a}'..='\u{d7ff}'
            | '\u{e000}'..='\u{fefe}'
            | '\u{ff00}'..='\u{fffd}'
            | '\u{10000}'..='\u{10ffff}' => out.push(c),
            // What is left (C0 and C1 controls, DEL, the line and paragraph separators, the
            // byte-order mark, U+FFFE and U+FFFF) is all within U+FFFF.
            c => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

fn plain_or_quoted(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if plain && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "on" | "off") {
        s.to_string()
    } else {
        quote(s)
    }
}

/// `<project>/murmur.lock`.
pub fn lock_path(project_dir: &Path) -> PathBuf {
    project_dir.join(LOCK_FILE)
}

/// The diagnostic for an unreadable or invalid lock (E-RUN-003), naming the file.
pub fn invalid_lock(path: &Path, why: &str) -> Diagnostic {
    Diagnostic::error(
        "E-RUN-003",
        format!("invalid murmur.lock at {}: {why}", path.display()),
    )
    .with_hint("fix the file, or delete murmur.lock and run `mur install` to regenerate it")
}

/// Reads the project's lock; a missing file is an empty lock. Errors name the file.
pub fn read_lock(project_dir: &Path) -> Result<Lock, Diagnostic> {
    let path = lock_path(project_dir);
    read_lock_at(&path).map_err(|why| invalid_lock(&path, &why))
}

fn read_lock_at(path: &Path) -> Result<Lock, String> {
    match crate::files::read_text(path, crate::files::TEXT_CAP) {
        Ok(text) => Lock::parse(&text),
        Err(e) if e.not_found() => Ok(Lock::default()),
        Err(e) => Err(format!("cannot read it: {e}")),
    }
}

/// Holds an exclusive `flock` on a folder until dropped: closing the descriptor releases it.
struct DirLock {
    _file: std::fs::File,
}

impl DirLock {
    fn acquire(dir: &Path) -> std::io::Result<DirLock> {
        let file = std::fs::File::open(dir)?;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is shared.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Why [`update_lock`] did not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockUpdateError<E = String> {
    /// The lock on disk is unreadable or invalid; it was left as it was.
    Invalid(Diagnostic),
    /// The change itself was refused (the closure's reason); nothing was written.
    Refused(E),
    /// Writing failed; the old lock is still in place.
    Write(String),
}

impl<E: std::fmt::Display> std::fmt::Display for LockUpdateError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockUpdateError::Invalid(d) => write!(f, "{}", d.message),
            LockUpdateError::Refused(s) => write!(f, "{s}"),
            LockUpdateError::Write(s) => write!(f, "failed to write murmur.lock: {s}"),
        }
    }
}

/// Reads the lock under an exclusive `flock` on the project folder, applies `change`, and
/// writes the result atomically (temp + fsync + rename). `change` returning `Err` writes
/// nothing. A change that leaves the lock as it was writes nothing either.
pub fn update_lock<T, E>(
    project_dir: &Path,
    change: impl FnOnce(&mut Lock) -> Result<T, E>,
) -> Result<T, LockUpdateError<E>> {
    let path = lock_path(project_dir);
    let _guard = DirLock::acquire(project_dir).map_err(|e| {
        LockUpdateError::Write(format!("cannot lock {}: {e}", project_dir.display()))
    })?;
    let mut lock =
        read_lock_at(&path).map_err(|why| LockUpdateError::Invalid(invalid_lock(&path, &why)))?;
    let before = lock.clone();
    let out = change(&mut lock).map_err(LockUpdateError::Refused)?;
    if lock != before || !path.exists() {
        write_lock_atomic(&path, &lock).map_err(LockUpdateError::Write)?;
        tracing::debug!("wrote {} ({} pins)", path.display(), lock.entries.len());
    }
    Ok(out)
}

fn write_lock_atomic(path: &Path, lock: &Lock) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".murmur.lock.{nanos}.{}.tmp", std::process::id()));
    let text = lock.to_yaml();
    if let Err(e) = super::store::write_synced(&tmp, text.as_bytes()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", tmp.display()));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", path.display()));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_nested_too_costly_is_refused_before_it_is_parsed() {
        let n = 50_000;
        let text = format!(
            "lock_version: 3\nartifacts: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        );
        let e = Lock::parse(&text).unwrap_err();
        assert!(
            e.starts_with("YAML parse error at line 2, column 112: collections nested deeper than"),
            "{e}"
        );
    }

    fn entry(name: &str, origin: Origin) -> LockEntry {
        LockEntry {
            name: ArtifactName::parse(name).unwrap(),
            resolved_version: "0.2.0".into(),
            sha256: PinHash::Any("ab".into()),
            origin,
            session: (origin == Origin::Runtime).then(|| "ses_1".to_string()),
            owner_id: Some(190196424),
        }
    }

    #[test]
    fn values_that_are_not_plain_words_round_trip() {
        let awkward = [
            "a: b",
            "#x",
            "true",
            "1.0",
            "-x",
            "null",
            "~",
            "'q'",
            "\"dq\"",
            "back\\slash",
            "line\nbreak",
            "tab\there",
            "nul\u{0}",
            "del\u{7f}",
            "c1\u{85}\u{9f}",
            "bom\u{feff}",
            "sep\u{2028}\u{2029}",
            "é ✓ 𝄞",
            " lead",
            "trail ",
            "",
            "[x]",
            "{x}",
            "*a",
            "&a",
            "!t",
        ];
        for v in awkward {
            let mut lock = Lock::default();
            let mut e = entry("murmur/tool-edit", Origin::Runtime);
            e.resolved_version = v.to_string();
            e.session = Some(format!("ses {v}"));
            e.sha256 = PinHash::Platforms(vec![(format!("p{v}"), format!("h{v}"))]);
            lock.upsert(e);
            let mut any = entry("ana/tool-git", Origin::Operator);
            any.sha256 = PinHash::Any(format!("{v}h"));
            lock.upsert(any);
            let text = lock.to_yaml();
            let back = Lock::parse(&text);
            // An empty version is refused on reading, as it would be when a person wrote it.
            if v.trim().is_empty() {
                assert!(back.is_err(), "{text}");
                continue;
            }
            assert_eq!(back.as_ref().ok(), Some(&lock), "{v:?}:\n{text}\n{back:?}");
        }
    }

    #[test]
    fn yaml_round_trips_and_rejects_bad_shapes() {
        let mut lock = Lock::default();
        lock.upsert(entry("murmur/tool-edit", Origin::Runtime));
        let mut p = entry("ana/tool-git", Origin::Operator);
        p.sha256 = PinHash::Platforms(vec![("linux-x86_64".into(), "cd".into())]);
        p.owner_id = None;
        lock.upsert(p);
        let text = lock.to_yaml();
        assert_eq!(Lock::parse(&text).unwrap(), lock);
        assert_eq!(
            Lock::parse("lock_version: 1\nartifacts: []\n").unwrap_err(),
            "unsupported lock_version 1 (expected 3)"
        );
        let bad = text.replace("origin: runtime\n    session: ses_1\n", "origin: runtime\n");
        assert!(Lock::parse(&bad).unwrap_err().contains("names no session"));
    }

    #[test]
    fn operator_pins_adopt_and_runtime_pins_never_demote() {
        let mut lock = Lock::default();
        lock.upsert(entry("murmur/tool-edit", Origin::Runtime));
        let prev = lock
            .upsert(entry("murmur/tool-edit", Origin::Operator))
            .unwrap();
        assert_eq!(prev.origin, Origin::Runtime);
        let e = lock
            .entry(&ArtifactName::parse("murmur/tool-edit").unwrap())
            .unwrap();
        assert_eq!((e.origin, e.session.clone()), (Origin::Operator, None));
        lock.upsert(entry("murmur/tool-edit", Origin::Runtime));
        let e = lock
            .entry(&ArtifactName::parse("murmur/tool-edit").unwrap())
            .unwrap();
        assert_eq!(e.origin, Origin::Operator);
    }

    #[test]
    fn conflicts_name_the_difference() {
        let mut lock = Lock::default();
        lock.upsert(entry("murmur/tool-edit", Origin::Operator));
        let n = ArtifactName::parse("murmur/tool-edit").unwrap();
        assert_eq!(
            lock.conflict_with(&n, "0.3.0", &PinHash::Any("ab".into()))
                .unwrap(),
            "pinned murmur/tool-edit@0.2.0, but murmur/tool-edit@0.3.0 was resolved"
        );
        assert!(lock
            .conflict_with(&n, "0.2.0", &PinHash::Any("ab".into()))
            .is_none());
        assert_eq!(
            lock.owner_conflict("murmur", 5),
            Some((190196424, "murmur/tool-edit".into()))
        );
    }

    fn platforms(pairs: &[(&str, &str)]) -> PinHash {
        PinHash::Platforms(
            pairs
                .iter()
                .map(|(p, h)| (p.to_string(), h.to_string()))
                .collect(),
        )
    }

    #[test]
    fn other_bytes_at_the_pinned_version_are_a_conflict() {
        let n = ArtifactName::parse("murmur/tool-edit").unwrap();
        let mut any = Lock::default();
        any.upsert(entry("murmur/tool-edit", Origin::Operator));
        assert_eq!(
            any.conflict_with(&n, "0.2.0", &PinHash::Any("cd".into())),
            Some("'murmur/tool-edit' is pinned at sha256 ab, but cd was resolved".into())
        );
        assert_eq!(
            any.conflict_with(&n, "0.2.0", &platforms(&[("linux-x86_64", "ab")])),
            Some("'murmur/tool-edit' is pinned as a platform-independent payload but resolved as a per-platform one".into())
        );
        let mut per = Lock::default();
        let mut e = entry("murmur/tool-edit", Origin::Operator);
        e.sha256 = platforms(&[("linux-x86_64", "aa"), ("darwin-aarch64", "bb")]);
        per.upsert(e);
        assert_eq!(
            per.conflict_with(&n, "0.2.0", &platforms(&[("darwin-aarch64", "cc")])),
            Some(
                "'murmur/tool-edit' is pinned at sha256 bb for darwin-aarch64, but cc was resolved"
                    .into()
            )
        );
        // Another platform's hash is no conflict, nor is the same hash again, nor a new platform.
        assert_eq!(
            per.conflict_with(&n, "0.2.0", &platforms(&[("linux-x86_64", "aa")])),
            None
        );
        assert_eq!(
            per.conflict_with(&n, "0.2.0", &platforms(&[("linux-aarch64", "bb")])),
            None
        );
        assert_eq!(
            per.conflict_with(&n, "0.2.0", &PinHash::Any("aa".into())),
            Some("'murmur/tool-edit' is pinned as a per-platform payload but resolved as a platform-independent one".into())
        );
    }

    #[test]
    fn a_second_platform_at_the_same_version_is_merged_and_a_new_version_replaces() {
        let mut lock = Lock::default();
        let mut e = entry("murmur/tool-edit", Origin::Runtime);
        e.sha256 = platforms(&[("linux-x86_64", "aa")]);
        lock.upsert(e.clone());
        e.sha256 = platforms(&[("darwin-aarch64", "bb")]);
        lock.upsert(e.clone());
        let pinned = &lock.entries[0].sha256;
        assert_eq!(
            pinned,
            &platforms(&[("linux-x86_64", "aa"), ("darwin-aarch64", "bb")])
        );
        assert_eq!(pinned.hash_for(Some("linux-x86_64")), Some("aa"));
        assert_eq!(pinned.hash_for(Some("darwin-aarch64")), Some("bb"));
        assert_eq!(pinned.hash_for(Some("linux-aarch64")), None);
        assert_eq!(pinned.hash_for(None), None);
        assert_eq!(PinHash::Any("ab".into()).hash_for(None), Some("ab"));
        assert_eq!(
            PinHash::Any("ab".into()).hash_for(Some("linux-x86_64")),
            None
        );
        e.resolved_version = "0.3.0".into();
        e.sha256 = platforms(&[("darwin-aarch64", "cc")]);
        lock.upsert(e);
        assert_eq!(
            lock.entries[0].sha256,
            platforms(&[("darwin-aarch64", "cc")])
        );
        assert_eq!(lock.entries[0].resolved_version, "0.3.0");
    }

    #[test]
    fn a_pin_without_a_hash_or_an_operator_pin_with_a_session_is_refused() {
        let head = "lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n";
        for (body, why) in [
            ("    origin: operator\n", "'murmur/tool-edit' pins no hash (expected either sha256.any or sha256.platforms)"),
            ("    sha256: {}\n    origin: operator\n", "'murmur/tool-edit' pins no hash (expected either sha256.any or sha256.platforms)"),
            ("    sha256:\n      any: \"\"\n", "'murmur/tool-edit' has an empty sha256.any"),
            ("    sha256:\n      any: ab\n      platforms: {linux-x86_64: cd}\n", "'murmur/tool-edit' pins both sha256.any and sha256.platforms (expected exactly one)"),
            ("    sha256:\n      any: ab\n    origin: operator\n    session: ses_1\n", "'murmur/tool-edit' has origin operator but names a session"),
            ("    sha256:\n      any: ab\n    origin: vendor\n", "'murmur/tool-edit' has unknown origin 'vendor' (expected operator or runtime)"),
            ("    sha256:\n      platforms: {}\n", "'murmur/tool-edit' pins no hash (expected either sha256.any or sha256.platforms)"),
        ] {
            assert_eq!(
                Lock::parse(&format!("{head}{body}")),
                Err(format!("entry 0: {why}")),
                "{body}"
            );
        }
    }

    #[test]
    fn unquoted_versions_read_as_the_text_they_show_and_remove_says_whether_it_did() {
        let text = "lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: 1.5\n    sha256:\n      any: ab\n  - name: murmur/tool-grep\n    resolved_version: 2\n    sha256:\n      platforms: {linux-x86_64: true}\n";
        let mut lock = Lock::parse(text).unwrap();
        assert_eq!(lock.entries[0].resolved_version, "1.5");
        assert_eq!(lock.entries[1].resolved_version, "2");
        assert_eq!(
            lock.entries[1].sha256,
            platforms(&[("linux-x86_64", "true")])
        );
        let edit = ArtifactName::parse("murmur/tool-edit").unwrap();
        assert!(lock.remove(&edit));
        assert!(!lock.remove(&edit));
        assert_eq!(lock.entries.len(), 1);
    }

    #[test]
    fn a_lock_that_exists_but_cannot_be_read_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(LOCK_FILE)).unwrap();
        let err = read_lock(dir.path()).unwrap_err();
        assert_eq!(err.code, "E-RUN-003");
        assert!(
            err.message.contains(": cannot read it: "),
            "{}",
            err.message
        );
        let update = update_lock::<_, String>(dir.path(), |lock| {
            lock.upsert(entry("murmur/tool-edit", Origin::Operator));
            Ok(())
        });
        assert!(
            matches!(update, Err(LockUpdateError::Invalid(_))),
            "{update:?}"
        );
        assert!(
            dir.path().join(LOCK_FILE).is_dir(),
            "nothing was written over it"
        );
        // A missing lock is an empty one.
        assert_eq!(
            read_lock(&dir.path().join("none")).unwrap(),
            Lock::default()
        );
    }

    #[test]
    fn update_lock_writes_a_missing_lock_once_and_never_rewrites_an_unchanged_one() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // No lock yet: even a change that changes nothing leaves one behind.
        update_lock::<_, String>(dir.path(), |_| Ok(())).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "lock_version: 3\nartifacts: []\n"
        );
        // An unchanged lock is not written again (a write renames a new file into place).
        let inode = std::fs::metadata(&path).unwrap().ino();
        update_lock::<_, String>(dir.path(), |_| Ok(())).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        // A change is written.
        update_lock(dir.path(), |lock| {
            lock.upsert(entry("murmur/tool-edit", Origin::Operator));
            Ok::<(), String>(())
        })
        .unwrap();
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("murmur/tool-edit"));
    }

    #[test]
    fn lock_update_errors_display_their_reason() {
        let invalid =
            LockUpdateError::<String>::Invalid(invalid_lock(Path::new("/p/murmur.lock"), "bad"));
        assert_eq!(
            invalid.to_string(),
            "invalid murmur.lock at /p/murmur.lock: bad"
        );
        assert_eq!(LockUpdateError::Refused("no").to_string(), "no");
        assert_eq!(
            LockUpdateError::<String>::Write("disk full".into()).to_string(),
            "failed to write murmur.lock: disk full"
        );
    }
}

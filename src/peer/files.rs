//! The path rules under an export root, applied when a handle is minted and again when it is
//! redeemed (the file is served as it is then, so the check must be made then).
//!
//! A shared path is relative to `exports.peer_files.root`, percent-decoded before it is checked
//! (so `%2e%2e` is `..`), and refused when it is absolute, climbs with `..`, passes through a
//! symlink anywhere below the root (or the root itself is one), is not a regular file, or is
//! larger than `max_bytes`. The final open also refuses to follow a link, so a file swapped
//! for a symlink between the check and the read is still refused.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Why a path was not served. `code()` is the redeem endpoint's error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathRefusal {
    /// Absolute, `..`, empty, or otherwise not under the root.
    OutsideRoot(String),
    /// A symlink on the way.
    Symlink(String),
    /// A directory, device, socket, ….
    NotRegular(String),
    /// Nothing there.
    NotFound(String),
    /// Over `max_bytes`.
    TooLarge(String),
    /// Reading failed.
    Io(String),
}

impl PathRefusal {
    /// The error code of §6.3 (`outside_root`, `symlink_refused`, …).
    pub fn code(&self) -> &'static str {
        match self {
            PathRefusal::OutsideRoot(_) => "outside_root",
            PathRefusal::Symlink(_) => "symlink_refused",
            PathRefusal::NotRegular(_) => "not_a_regular_file",
            PathRefusal::NotFound(_) => "not_found",
            PathRefusal::TooLarge(_) => "too_large",
            PathRefusal::Io(_) => "io_error",
        }
    }

    /// The HTTP status the door answers with.
    pub fn status(&self) -> u16 {
        match self {
            PathRefusal::NotFound(_) => 404,
            PathRefusal::TooLarge(_) => 413,
            PathRefusal::Io(_) => 500,
            _ => 403,
        }
    }

    /// The sentence saying why.
    pub fn reason(&self) -> &str {
        match self {
            PathRefusal::OutsideRoot(r)
            | PathRefusal::Symlink(r)
            | PathRefusal::NotRegular(r)
            | PathRefusal::NotFound(r)
            | PathRefusal::TooLarge(r)
            | PathRefusal::Io(r) => r,
        }
    }
}

/// Decode `%XX` escapes; a stray `%` stays as it is.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The canonical relative form of `asked` (decoded, `.` dropped, `/`-joined), or why not.
pub fn canonical(asked: &str) -> Result<String, PathRefusal> {
    let decoded = percent_decode(asked.trim());
    if decoded.is_empty() {
        return Err(PathRefusal::OutsideRoot("the path is empty".into()));
    }
    if decoded.contains('\0') {
        return Err(PathRefusal::OutsideRoot("the path holds a NUL byte".into()));
    }
    if decoded.starts_with('/') || decoded.starts_with('\\') || decoded.contains(":\\") {
        return Err(PathRefusal::OutsideRoot(
            "absolute paths are refused; give a path relative to the export root".into(),
        ));
    }
    let mut parts = Vec::new();
    for c in Path::new(&decoded.replace('\\', "/")).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(PathRefusal::OutsideRoot(
                    "'..' would leave the export root".into(),
                ))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathRefusal::OutsideRoot(
                    "absolute paths are refused; give a path relative to the export root".into(),
                ))
            }
        }
    }
    if parts.is_empty() {
        return Err(PathRefusal::NotRegular(
            "the export root itself is a folder, not a file".into(),
        ));
    }
    Ok(parts.join("/"))
}

/// Check `rel` (already canonical) under `root`: no symlink anywhere (root included), a regular
/// file, at most `max_bytes`. Returns the full path and the size.
pub fn check(root: &Path, rel: &str, max_bytes: u64) -> Result<(PathBuf, u64), PathRefusal> {
    let mut at = root.to_path_buf();
    let mut steps: Vec<&str> = vec![""];
    steps.extend(rel.split('/'));
    let last = steps.len() - 1;
    for (i, step) in steps.iter().enumerate() {
        if !step.is_empty() {
            at.push(step);
        }
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PathRefusal::NotFound(if i == 0 {
                    "the export root does not exist yet".into()
                } else {
                    "no such file under the export root".into()
                }))
            }
            Err(e) => return Err(PathRefusal::Io(format!("cannot read it: {e}"))),
        };
        if meta.file_type().is_symlink() {
            return Err(PathRefusal::Symlink(if i == 0 {
                "the export root is a symlink".into()
            } else {
                "it is or passes through a symlink".into()
            }));
        }
        if i < last && !meta.is_dir() {
            return Err(PathRefusal::NotFound(
                "no such file under the export root".into(),
            ));
        }
        if i == last {
            if !meta.is_file() {
                return Err(PathRefusal::NotRegular("it is not a regular file".into()));
            }
            if meta.len() > max_bytes {
                return Err(PathRefusal::TooLarge(format!(
                    "it is {} bytes, over the export's max_bytes of {max_bytes}",
                    meta.len()
                )));
            }
            return Ok((at, meta.len()));
        }
    }
    unreachable!("the loop returns at the last step")
}

/// Check and read `rel` under `root`, opening without following a final symlink.
pub fn read(root: &Path, rel: &str, max_bytes: u64) -> Result<Vec<u8>, PathRefusal> {
    use std::os::unix::fs::OpenOptionsExt;
    let (path, _) = check(root, rel, max_bytes)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => PathRefusal::Symlink("it is or passes through a symlink".into()),
            _ if e.kind() == std::io::ErrorKind::NotFound => {
                PathRefusal::NotFound("no such file under the export root".into())
            }
            _ => PathRefusal::Io(format!("cannot open it: {e}")),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| PathRefusal::Io(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(PathRefusal::NotRegular("it is not a regular file".into()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| PathRefusal::Io(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(PathRefusal::TooLarge(format!(
            "it grew over the export's max_bytes of {max_bytes}"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_and_refusals() {
        assert_eq!(canonical("./a//b.txt").unwrap(), "a/b.txt");
        assert_eq!(canonical("a%2Fb.txt").unwrap(), "a/b.txt");
        for bad in ["../x", "a/../../x", "%2e%2e/x", "/etc/passwd", "%2Fetc", ""] {
            let e = canonical(bad).unwrap_err();
            assert_eq!(e.code(), "outside_root", "{bad}");
        }
        assert_eq!(canonical(".").unwrap_err().code(), "not_a_regular_file");
    }

    #[test]
    fn check_refuses_symlinks_folders_and_large_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/ok.txt"), b"hello").unwrap();
        std::fs::write(dir.path().join("secret.txt"), b"secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("up")).unwrap();

        assert_eq!(read(&root, "sub/ok.txt", 5).unwrap(), b"hello");
        assert_eq!(
            check(&root, "sub/ok.txt", 4).unwrap_err().code(),
            "too_large"
        );
        assert_eq!(
            check(&root, "link.txt", 99).unwrap_err().code(),
            "symlink_refused"
        );
        assert_eq!(
            check(&root, "up/secret.txt", 99).unwrap_err().code(),
            "symlink_refused"
        );
        assert_eq!(
            check(&root, "sub", 99).unwrap_err().code(),
            "not_a_regular_file"
        );
        assert_eq!(
            check(&root, "nope.txt", 99).unwrap_err().code(),
            "not_found"
        );
        assert_eq!(
            check(&dir.path().join("missing"), "a", 9)
                .unwrap_err()
                .reason(),
            "the export root does not exist yet"
        );
    }
}

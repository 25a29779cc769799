//! Reading a file a manifest, an archive or the command line names: a regular file, within a cap.
//!
//! Such a path is input like any other: `system_prompt_file: /dev/zero` once grew `mur` past a
//! gigabyte, and a child capsule naming it took its parent down. Every file the runtime reads
//! because something names it goes through [`read_capped`]: it must be a regular file (not a
//! device, a FIFO or a folder), no larger than the cap, and is read with the cap enforced even
//! if it grows while being read.

use std::io::Read;
use std::path::Path;

/// The cap on a manifest, a lock, a task, a system prompt, a script or a `.env` file.
pub const TEXT_CAP: u64 = 8 << 20;

/// The cap on a `.mur.zip` read whole (its entries may hold 256 MiB in all).
pub const ARCHIVE_CAP: u64 = 320 << 20;

/// The cap on a skill's `skill.md`.
pub const SKILL_CAP: u64 = 1 << 20;

/// Why a named file could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or reading failed (missing, no permission).
    Io(std::io::Error),
    /// Not a regular file.
    NotAFile,
    /// Larger than the cap.
    TooLarge(u64),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotAFile => write!(f, "it is not a regular file"),
            ReadError::TooLarge(cap) => write!(f, "it is larger than the {cap} byte limit"),
        }
    }
}

impl ReadError {
    /// True when the file does not exist.
    pub fn not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The bytes of the regular file at `path`, at most `cap` of them.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile);
    }
    if meta.len() > cap {
        return Err(ReadError::TooLarge(cap));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge(cap));
    }
    Ok(bytes)
}

/// [`read_capped`] as UTF-8 text (invalid bytes replaced).
pub fn read_text(path: &Path, cap: u64) -> Result<String, ReadError> {
    read_capped(path, cap).map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused() {
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), 10),
            Err(ReadError::NotAFile)
        ));
        assert!(matches!(
            read_capped(Path::new("/"), 10),
            Err(ReadError::NotAFile)
        ));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), b"0123456789");
        assert!(matches!(read_capped(&f, 9), Err(ReadError::TooLarge(9))));
        assert!(read_capped(&dir.path().join("none"), 9)
            .unwrap_err()
            .not_found());
    }
}

//! Small text and digest helpers every part of the kernel uses. A leaf: it imports nothing of
//! the kernel, so any module may use it without joining an import circle.

use sha2::{Digest, Sha256};

/// Cut `s` to at most `max` bytes on a char boundary (trace fields, refusal quotes).
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Lowercase hex SHA-256 of `bytes` (the trace's `*_sha` fields).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A path as the trace and the model read it: the text itself when it is UTF-8 (no copy, no
/// formatting: `Path::display` checks it byte by byte through the formatter, about 2,000
/// instructions for a child's folder, several per delegation), else the lossy display.
pub fn path_text(path: &std::path::Path) -> std::borrow::Cow<'_, str> {
    match path.to_str() {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => std::borrow::Cow::Owned(path.display().to_string()),
    }
}

/// The runtime's token estimate for `bytes` of request or reply: one token per four bytes,
/// rounded up, used where the provider sends no count.
pub fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_reads_as_its_display() {
        use std::os::unix::ffi::OsStrExt;
        let plain = std::path::Path::new("/w/.murmur/ses_1/children/ses_2");
        assert_eq!(path_text(plain), plain.display().to_string());
        assert!(matches!(path_text(plain), std::borrow::Cow::Borrowed(_)));
        let odd = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/w/caf\xe9/x"));
        assert_eq!(path_text(odd), odd.display().to_string());
        assert_eq!(path_text(odd), "/w/caf\u{fffd}/x");
    }

    #[test]
    fn truncate_keeps_whole_characters() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
    }
}

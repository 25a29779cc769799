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

/// The runtime's token estimate for `bytes` of request or reply: one token per four bytes,
/// rounded up, used where the provider sends no count.
pub fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! `mur explain CODE`: the local index of diagnostic codes, as `rustc --explain` has.
//!
//! The index is docs/errors.md, compiled in, so the explanation a user reads is the one the
//! docs hold, offline and for the version of `mur` that printed the code.

/// docs/errors.md.
pub const INDEX: &str = include_str!("../docs/errors.md");

/// The entry of `code` (case-insensitive): its `## CODE` section without the heading.
pub fn entry(code: &str) -> Option<&'static str> {
    let mut sections = INDEX.split("\n## ").skip(1);
    sections.find_map(|s| {
        let (head, body) = s.split_once('\n')?;
        head.trim()
            .eq_ignore_ascii_case(code.trim())
            .then(|| body.trim_end())
    })
}

/// Every code the index explains, in its order.
pub fn codes() -> Vec<&'static str> {
    INDEX
        .split("\n## ")
        .skip(1)
        .filter_map(|s| s.lines().next().map(str::trim))
        .collect()
}

/// `mur explain CODE`: prints the entry; an unknown code is a usage error (exit 2).
pub fn run(code: &str) -> i32 {
    match entry(code) {
        Some(text) => {
            crate::outln!("{}\n\n{text}", code.trim().to_ascii_uppercase());
            0
        }
        None => {
            crate::errln!(
                "error: '{code}' is not a mur diagnostic code\n  hint: the codes are {}",
                codes().join(", ")
            );
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_code_and_end_at_the_next_one() {
        let e = entry("e-run-008").unwrap();
        assert!(e.starts_with("Declared artifacts are in neither"), "{e}");
        assert!(!e.contains("## E-RUN-040"));
        assert_eq!(entry("no-such-code"), None);
        assert!(codes().contains(&"W-SEC-019"));
    }
}

//! A tiny parser with a bug for the coding-agent example to fix.

/// Split `input` into words; a leading `#` marks a comment line, which yields nothing.
pub fn parse(input: &str) -> Vec<&str> {
    let first = input.as_bytes()[0];
    if first == b'#' {
        return Vec::new();
    }
    input.split_whitespace().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_words() {
        assert_eq!(parse("a bc d"), vec!["a", "bc", "d"]);
    }

    #[test]
    fn parse_comment() {
        assert!(parse("# note").is_empty());
    }

    #[test]
    fn parse_empty_input() {
        assert!(parse("").is_empty());
    }
}

//! Splitting a `shell` step's command line into argv.
//!
//! A plan's shell step is executed directly, never through an interpreter, so the command line is
//! split the way a non-interpreter shell tool splits its arguments: at unquoted whitespace, with
//! '…' and "…" grouping and a backslash taking the next character literally (outside single
//! quotes). Nothing is expanded: `$HOME`, `*` and `~` reach the binary as written. An unclosed
//! quote runs to the end of the line.

/// The words of `command`; empty when it holds none.
pub fn split(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('"'), '"') => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                in_word = true;
                quote = Some(c);
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn quotes_group_and_nothing_expands() {
        assert_eq!(
            split(r#"grep -n "two words" 'it''s' a\ b $HOME *"#),
            vec!["grep", "-n", "two words", "its", "a b", "$HOME", "*"]
        );
        assert_eq!(split(r#"echo "" x"#), vec!["echo", "", "x"]);
        assert!(split("  \t ").is_empty());
        assert_eq!(split("echo 'open"), vec!["echo", "open"]);
    }
}

//! Bounds on what a YAML text may cost, checked before the parser sees it.
//!
//! The YAML parser refuses values nested deeper than its recursion limit, but its scanner
//! spends time quadratic in the nesting of flow collections (`[[[[…`, `{a: {a: …`) before it
//! gets there: 40,000 levels, 80 KB, took seconds. And it holds every event of a document in
//! memory before building a value (about 250 bytes per value in all): a megabyte of `[[]]`
//! made a million values and 250 MiB. Manifests, locks and the manifests inside a pulled
//! `.mur.zip` are untrusted input, so every YAML the runtime reads is first scanned once, in
//! linear time, and refused at the first flow collection deeper than [`MAX_FLOW_DEPTH`] or once
//! it holds more than [`MAX_VALUES`] values (counted from above: lines, flow collections and
//! the commas between flow items).

/// The deepest flow nesting a YAML text may have (the parser's own recursion limit is 128).
pub const MAX_FLOW_DEPTH: usize = 100;

/// The most values a YAML text may hold. The parser costs about 330 bytes per value, so this is
/// about 40 MiB; a lock of 15,000 pins holds about 105,000 lines.
pub const MAX_VALUES: usize = 120_000;

/// Where `text` opens a flow collection deeper than [`MAX_FLOW_DEPTH`], or passes
/// [`MAX_VALUES`] values: 1-based line and column, and the sentence to show; `None` when it
/// does neither.
pub fn too_costly(text: &str) -> Option<(usize, usize, String)> {
    let mut depth = 0usize;
    let mut values = 0usize;
    let too_many = |line, col| {
        Some((
            line,
            col,
            format!("more than {MAX_VALUES} values; no manifest, lock or artifact needs that"),
        ))
    };
    let (mut line, mut col) = (1usize, 0usize);
    // The indentation of the line that opened a block scalar (`key: |`), while inside it.
    let mut block_scalar: Option<usize> = None;
    let mut chars = text.chars().peekable();
    let mut at_line_start = true;
    let mut indent = 0usize;
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            at_line_start = true;
            indent = 0;
            prev = ' ';
            continue;
        }
        if at_line_start {
            if c == ' ' {
                indent += 1;
                continue;
            }
            at_line_start = false;
            if let Some(open) = block_scalar {
                if indent > open {
                    // A line of the block scalar's text: skip it.
                    skip_line(&mut chars);
                    continue;
                }
                block_scalar = None;
            }
            values += 1;
            if values > MAX_VALUES {
                return too_many(line, col);
            }
        }
        match c {
            '#' if prev == ' ' || prev == '\t' || col == 1 => {
                // A comment: to the end of the line.
                skip_line(&mut chars);
                continue;
            }
            '"' | '\'' if depth > 0 || matches!(prev, ' ' | ':' | '-' | ',' | '[' | '{') => {
                // A quoted scalar: brackets inside it are text.
                let quote = c;
                let mut escaped = false;
                for n in chars.by_ref() {
                    col += 1;
                    if n == '\n' {
                        line += 1;
                        col = 0;
                    }
                    if quote == '"' && !escaped && n == '\\' {
                        escaped = true;
                        continue;
                    }
                    if n == quote && !escaped {
                        break;
                    }
                    escaped = false;
                }
            }
            '[' | '{' if depth > 0 || matches!(prev, ' ' | ':' | '-' | '?') => {
                depth += 1;
                values += 1;
                if values > MAX_VALUES {
                    return too_many(line, col);
                }
                if depth > MAX_FLOW_DEPTH {
                    return Some((
                        line,
                        col,
                        format!(
                            "collections nested deeper than {MAX_FLOW_DEPTH} levels; no manifest, lock or artifact needs that"
                        ),
                    ));
                }
            }
            ']' | '}' if depth > 0 => depth -= 1,
            ',' if depth > 0 => {
                values += 1;
                if values > MAX_VALUES {
                    return too_many(line, col);
                }
            }
            '|' | '>' if depth == 0 && matches!(prev, ' ' | ':') => {
                // `key: |` (or `>`, with optional indicators) opens a block scalar when only
                // indicators follow on the line.
                let rest: String = chars.clone().take_while(|n| *n != '\n').collect();
                let rest = rest.split('#').next().unwrap_or("").trim();
                if rest.chars().all(|r| matches!(r, '+' | '-' | '0'..='9')) {
                    block_scalar = Some(indent);
                }
            }
            _ => {}
        }
        prev = c;
    }
    None
}

/// Skip to the end of the line, leaving its `\n` for the caller's line counting.
fn skip_line(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars.next_if(|c| *c != '\n').is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_where_it_goes_too_deep() {
        let n = MAX_FLOW_DEPTH + 1;
        let text = format!("name: x\nconfig: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(
            too_costly(&text).map(|(l, c, _)| (l, c)),
            Some((2, 9 + MAX_FLOW_DEPTH))
        );
        let ok = format!(
            "config: {}{}\n",
            "[".repeat(MAX_FLOW_DEPTH),
            "]".repeat(MAX_FLOW_DEPTH)
        );
        assert_eq!(too_costly(&ok), None);
        let maps = format!("config: {}1{}\n", "{a: ".repeat(n), "}".repeat(n));
        assert!(too_costly(&maps).is_some());
    }

    #[test]
    fn brackets_in_text_are_not_nesting() {
        let many = "[".repeat(500);
        for text in [
            format!("prompt: \"{many}\"\n"),
            format!("prompt: '{many}'\n"),
            format!("prompt: x{many}\n"),
            format!("# {many}\nname: x\n"),
            format!("prompt: |\n  {many}\n  more {many}\nname: x\n"),
            format!("prompt: >-\n    {many}\nname: x\n"),
        ] {
            assert_eq!(too_costly(&text), None, "{text}");
        }
    }

    #[test]
    fn more_values_than_the_bound_are_refused_where_they_pass_it() {
        // Flow items: the collections and the commas between their items.
        let at_bound = format!("x: [{}]\n", "a,".repeat(MAX_VALUES - 2));
        assert_eq!(too_costly(&at_bound), None);
        let past = format!("x: [{}]\n", "a,".repeat(MAX_VALUES - 1));
        assert_eq!(
            too_costly(&past),
            Some((
                1,
                4 + 2 * (MAX_VALUES - 1),
                format!("more than {MAX_VALUES} values; no manifest, lock or artifact needs that")
            ))
        );
        // Empty collections count too: a megabyte of `[[]]` is a million values.
        assert!(too_costly(&"x: [[]]\n".repeat(MAX_VALUES / 2)).is_some());
        // Block lines count, block scalar text does not.
        assert_eq!(too_costly(&"- a\n".repeat(MAX_VALUES)), None);
        assert_eq!(
            too_costly(&"- a\n".repeat(MAX_VALUES + 1)).map(|r| r.0),
            Some(MAX_VALUES + 1)
        );
        let prompt = format!("p: |\n{}n: x\n", "  line\n".repeat(MAX_VALUES + 10));
        assert_eq!(too_costly(&prompt), None);
    }
}

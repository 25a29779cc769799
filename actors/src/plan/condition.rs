//! The `if` grammar of a plan step.
//!
//! ```text
//! condition  := and ( "||" and )*
//! and        := comparison ( "&&" comparison )*
//! comparison := operand op operand        op: the first of == != > < found, outside quotes
//! operand    := '…' | "…" | $<step>.output | $<step>.status
//! ```
//!
//! Comparisons are on strings (so `'10' < '9'`), as upstream. An empty or absent condition is
//! true. Anything else is `unsupported condition expression '<clause>'`, which fails the step and
//! stops the plan: a condition that cannot be read must not silently skip or run a step.

use super::error::PlanError;
use super::refs::{self, Settled};

const OPERATORS: [&str; 4] = ["==", "!=", ">", "<"];

/// Evaluate `condition` against the results settled so far.
pub fn evaluate(condition: Option<&str>, settled: &Settled) -> Result<bool, PlanError> {
    let Some(expr) = condition.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(true);
    };
    for alternative in split_outside_quotes(expr, "||") {
        let mut all = true;
        for clause in split_outside_quotes(alternative, "&&") {
            if !compare(clause, settled)? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The `$…` operands of `condition`, for validation; an unreadable condition yields none (it
/// fails when evaluated instead).
pub fn references(condition: &str) -> Vec<String> {
    let mut out = Vec::new();
    for alternative in split_outside_quotes(condition.trim(), "||") {
        for clause in split_outside_quotes(alternative, "&&") {
            if let Some((left, _, right)) = split_comparison(clause) {
                for operand in [left, right] {
                    if operand.starts_with('$') {
                        out.push(operand.to_string());
                    }
                }
            }
        }
    }
    out
}

fn compare(clause: &str, settled: &Settled) -> Result<bool, PlanError> {
    let Some((left, op, right)) = split_comparison(clause) else {
        return Err(PlanError::UnsupportedCondition(clause.to_string()));
    };
    let left = operand(left, settled)?;
    let right = operand(right, settled)?;
    Ok(match op {
        "==" => left == right,
        "!=" => left != right,
        ">" => left > right,
        _ => left < right,
    })
}

/// `(left, operator, right)`, trimmed, for the first operator (in [`OPERATORS`] order) found
/// outside quotes.
fn split_comparison(clause: &str) -> Option<(&str, &'static str, &str)> {
    OPERATORS.iter().find_map(|op| {
        let at = find_outside_quotes(clause, op)?;
        Some((clause[..at].trim(), *op, clause[at + op.len()..].trim()))
    })
}

fn operand(token: &str, settled: &Settled) -> Result<String, PlanError> {
    let quoted = token.len() >= 2
        && (token.starts_with('\'') || token.starts_with('"'))
        && token.ends_with(&token[..1]);
    if quoted {
        return Ok(token[1..token.len() - 1].to_string());
    }
    if token.starts_with('$') {
        return refs::resolve(token, settled);
    }
    Err(PlanError::UnsupportedOperand(token.to_string()))
}

/// Byte offset of the first `needle` in `hay` that is not inside '…' or "…".
fn find_outside_quotes(hay: &str, needle: &str) -> Option<usize> {
    let bytes = hay.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if bytes[i..].starts_with(needle.as_bytes()) => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

fn split_outside_quotes<'a>(expr: &'a str, sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut rest = expr;
    while let Some(at) = find_outside_quotes(rest, sep) {
        parts.push(rest[..at].trim());
        rest = &rest[at + sep.len()..];
    }
    parts.push(rest.trim());
    parts
}

#[cfg(test)]
mod tests {
    use super::super::model::{StepResult, StepStatus};
    use super::*;

    fn settled() -> Settled {
        let mut s = Settled::new();
        let ok = StepResult {
            step_id: "a".into(),
            status: StepStatus::Success,
            output: Some("42".into()),
            error: None,
        };
        s.insert("a".into(), ok);
        s.insert("b".into(), StepResult::failed("b", "x"));
        s
    }

    #[test]
    fn comparisons_and_connectives() {
        let s = settled();
        let t = |c: &str| evaluate(Some(c), &s).unwrap();
        assert!(t("$a.status == 'success'"));
        assert!(t("$a.output==\"42\" && $b.status != 'success'"));
        assert!(!t("$a.output == 'nope' || $b.status == 'success'"));
        assert!(t("$a.output == 'nope' || $b.status == 'failed'"));
        assert!(t("$a.output > '100'"), "string comparison: '42' > '100'");
        assert!(t("$a.output < '5'"));
        assert!(t("'a||b' == 'a||b'"), "operators inside quotes are text");
        assert!(
            t("'é' != 'ü' && 'ß' == 'ß'"),
            "multibyte text is compared, not sliced"
        );
        assert!(evaluate(None, &s).unwrap());
        assert!(evaluate(Some("   "), &s).unwrap());
    }

    #[test]
    fn unreadable_conditions_are_errors() {
        let s = settled();
        assert_eq!(
            evaluate(Some("$a.output"), &s).unwrap_err().to_string(),
            "unsupported condition expression '$a.output'"
        );
        assert_eq!(
            evaluate(Some("$a.status == 'success' && yes"), &s)
                .unwrap_err()
                .to_string(),
            "unsupported condition expression 'yes'"
        );
        assert_eq!(
            evaluate(Some("$a.output == 42"), &s)
                .unwrap_err()
                .to_string(),
            "unsupported condition operand '42'"
        );
        assert_eq!(
            evaluate(Some("$c.status == 'success'"), &s)
                .unwrap_err()
                .to_string(),
            "reference '$c.status' is not ready"
        );
    }

    #[test]
    fn references_are_the_dollar_operands() {
        assert_eq!(
            references("$a.status=='success' || 'x' != $b.output && $c.output"),
            vec!["$a.status", "$b.output"]
        );
    }
}

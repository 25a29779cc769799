//! `nodes:` in `~/.murmur/config.yaml`: the nodes `mur run` places children on when
//! `--nodes` is not given.

use std::path::Path;

use serde_norway::Value;

use super::ClusterError;

/// The `nodes:` list of `<home>/config.yaml`; empty when the file or the key is absent.
pub fn nodes(home: &Path) -> Result<Vec<String>, ClusterError> {
    let path = home.join("config.yaml");
    let label = path.display().to_string();
    let text = match crate::files::read_text(&path, crate::files::TEXT_CAP) {
        Ok(t) => t,
        Err(e) if e.not_found() => return Ok(Vec::new()),
        Err(e) => {
            return Err(ClusterError::Config {
                path: label,
                why: e.to_string(),
            })
        }
    };
    parse(&text, &label)
}

/// The `nodes:` list of config text.
pub fn parse(text: &str, label: &str) -> Result<Vec<String>, ClusterError> {
    let fail = |why: String| ClusterError::Config {
        path: label.to_string(),
        why,
    };
    if let Some((line, col, why)) = crate::manifest::depth::too_costly(text) {
        return Err(fail(format!(
            "YAML syntax error at line {line}, column {col}: {why}"
        )));
    }
    let value: Value =
        serde_norway::from_str(text).map_err(|e| fail(format!("YAML syntax error: {e}")))?;
    match value.get("nodes") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| fail("nodes must be a list of HOST:PORT addresses".into()))
            })
            .collect(),
        Some(_) => Err(fail("nodes must be a list of HOST:PORT addresses".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_is_a_list_of_addresses() {
        assert_eq!(parse("nodes: [a:1, 'b:2']\n", "c").unwrap(), ["a:1", "b:2"]);
        assert!(parse("registry: {}\n", "c").unwrap().is_empty());
        assert!(matches!(
            parse("nodes: a:1\n", "c"),
            Err(ClusterError::Config { .. })
        ));
    }
}

//! Reading `inference.driver.config`: a mapping of driver-specific keys, checked up front.

use serde_json::{Map, Value};

/// A checked view of the driver config mapping.
pub(crate) struct Options<'a> {
    artifact: &'a str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Options<'a> {
    /// Checks that `config` is a mapping (or absent) holding only `allowed` keys.
    pub(crate) fn new(
        artifact: &'a str,
        config: Option<&'a Value>,
        allowed: &[&str],
    ) -> Result<Options<'a>, String> {
        let map = match config {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                return Err(format!(
                    "{artifact}: inference.driver.config must be a mapping"
                ))
            }
        };
        if let Some(m) = map {
            let unknown: Vec<&str> = m
                .keys()
                .map(String::as_str)
                .filter(|k| !allowed.contains(k))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "{artifact}: unrecognised inference.driver.config key(s): {} (known: {})",
                    unknown.join(", "),
                    allowed.join(", ")
                ));
            }
        }
        Ok(Options { artifact, map })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, want: &str) -> String {
        format!(
            "{}: inference.driver.config.{key} must be {want}",
            self.artifact
        )
    }

    /// `enabled`/`disabled` or a boolean.
    pub(crate) fn switch(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "enabled" => Ok(Some(true)),
            Some(Value::String(s)) if s == "disabled" => Ok(Some(false)),
            Some(_) => Err(self.bad(key, "enabled, disabled, true or false")),
        }
    }

    /// A whole number above zero.
    pub(crate) fn positive(&self, key: &str) -> Result<Option<u32>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(self.bad(key, "a whole number above 0")),
            },
        }
    }

    /// A non-empty string.
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(_) => Err(self.bad(key, "a non-empty string")),
        }
    }

    /// A string or a list of strings, joined with `,`.
    pub(crate) fn string_or_list(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => {
                let parts: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                match parts {
                    Some(p) if !p.is_empty() => Ok(Some(p.join(","))),
                    _ => Err(self.bad(key, "a string or a list of strings")),
                }
            }
            Some(_) => self.string(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let cfg = json!({"thinking": "enabled", "temprature": 1});
        let e = Options::new("murmur/driver-x", Some(&cfg), &["thinking"])
            .err()
            .unwrap();
        assert_eq!(
            e,
            "murmur/driver-x: unrecognised inference.driver.config key(s): temprature (known: thinking)"
        );
        let cfg = json!({"thinking": "maybe"});
        let o = Options::new("d", Some(&cfg), &["thinking"]).unwrap();
        assert_eq!(
            o.switch("thinking").unwrap_err(),
            "d: inference.driver.config.thinking must be enabled, disabled, true or false"
        );
        let e = Options::new("d", Some(&json!([1])), &[]).err().unwrap();
        assert!(e.contains("must be a mapping"));
    }
}

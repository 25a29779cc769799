//! `gateway:` on an artifact entry: where a driver (or tool) sends its requests and which
//! credential it binds.
//!
//! The key itself is never read here: `api_key` is kept as written (`${NAME}` or a literal) and
//! resolved at launch by [`super::env`], so a manifest can be validated on a machine without
//! the key. The endpoint is checked now because a typo there should not wait for the first call.

use reqwest::Url;
use serde_norway::Value;

use super::names::ArtifactName;
use super::reader::{as_string, kind, Area, Block, Ctx};

/// A credential gateway: endpoint plus how requests are authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gateway {
    /// The endpoint URL as written (e.g. `https://api.anthropic.com`).
    pub endpoint: String,
    /// The credential bound to it.
    pub credential: Credential,
}

/// The credential a gateway binds.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `api_key:` as written: `${NAME}` (resolved at launch) or a literal key.
    ApiKey(String),
    /// `keyless: true`: the endpoint needs no key (e.g. a local server).
    Keyless,
}

impl std::fmt::Debug for Credential {
    // Never print a literal key, even in debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::ApiKey(raw) if super::env::env_reference(raw).is_some() => {
                write!(f, "ApiKey({raw:?})")
            }
            Credential::ApiKey(_) => f.write_str("ApiKey(<literal>)"),
            Credential::Keyless => f.write_str("Keyless"),
        }
    }
}

/// The endpoint as shown in messages: without any user:password part.
pub fn masked_endpoint(endpoint: &str) -> String {
    match Url::parse(endpoint) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        _ => endpoint.to_string(),
    }
}

/// Why an endpoint is unusable, or `Ok`.
pub fn check_endpoint(endpoint: &str) -> Result<(), String> {
    if endpoint.contains("${") {
        return Err("which is never interpolated: write the URL itself".into());
    }
    let url = Url::parse(endpoint).map_err(|e| format!("which is not a URL ({e})"))?;
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(format!("which uses '{scheme}'; expected http or https"));
    }
    let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
        return Err("which names no host".into());
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err("which carries a user name or password; bind the key with api_key".into());
    }
    if url.query().is_some() {
        return Err("which has a query string".into());
    }
    if url.fragment().is_some() {
        return Err("which has a fragment".into());
    }
    if scheme == "http" && !is_loopback(host) {
        return Err(
            "which is plain http to a host other than this machine; use https (http is allowed \
             only to localhost or a loopback address)"
                .into(),
        );
    }
    Ok(())
}

/// True for `localhost` and loopback IP literals (`127.0.0.0/8`, `[::1]`).
pub fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Parses `artifacts[index].gateway`; errors are reported into `ctx`.
pub(crate) fn parse_gateway(
    ctx: &mut Ctx,
    index: usize,
    name: &ArtifactName,
    value: &Value,
) -> Option<Gateway> {
    let Value::Mapping(map) = value else {
        let why = format!(
            "artifact '{name}' declares 'gateway:' as {} but it must be a mapping with \
             'gateway.endpoint'",
            kind(value)
        );
        ctx.invalid_artifact("E-MAN-003", index, why);
        return None;
    };
    let path = format!("artifacts[{index}].gateway");
    ctx.unknown_keys(map, &path, &["endpoint", "api_key", "keyless"]);
    let block = Block::new(map, &path, Area::Manifest);
    let endpoint = match block.get("endpoint").map(as_string) {
        None => {
            let why = format!("artifact '{name}' declares 'gateway:' without 'gateway.endpoint'");
            ctx.invalid_artifact("E-MAN-003", index, why);
            return None;
        }
        Some(Err(why)) => {
            ctx.invalid_artifact("E-MAN-003", index, format!("gateway.endpoint {why}"));
            return None;
        }
        Some(Ok(s)) => s.trim().to_string(),
    };
    if let Err(why) = check_endpoint(&endpoint) {
        let shown = masked_endpoint(&endpoint);
        let why = format!("artifact '{name}' declares gateway.endpoint '{shown}', {why}");
        ctx.invalid_artifact("E-MAN-003", index, why);
        return None;
    }
    let api_key = match block.get("api_key").map(as_string) {
        Some(Err(why)) => {
            ctx.invalid_artifact("E-MAN-003", index, format!("gateway.api_key {why}"));
            return None;
        }
        Some(Ok(k)) if !k.trim().is_empty() => Some(k.trim().to_string()),
        _ => None,
    };
    let keyless = match block.get("keyless") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            let why = format!(
                "artifact '{name}' declares gateway.keyless as {}; it must be true or false",
                kind(other)
            );
            ctx.invalid_artifact("E-MAN-003", index, why);
            return None;
        }
    };
    let shown = masked_endpoint(&endpoint);
    let credential = match (api_key, keyless) {
        (Some(_), true) => {
            let why = format!(
                "artifact '{name}' declares gateway.endpoint '{shown}' with both api_key and \
                 keyless: true; bind exactly one"
            );
            ctx.invalid_artifact("E-MAN-003", index, why);
            return None;
        }
        (Some(key), false) => {
            if super::env::env_reference(&key).is_none() {
                let msg = format!(
                    "artifact '{name}' writes gateway.api_key as a literal key in {}: anyone who \
                     can read the file can read the key. Write api_key: ${{NAME}} and set NAME in \
                     the environment or in .env beside the manifest",
                    ctx.label
                );
                ctx.warnings
                    .push(crate::diagnostic::Diagnostic::warning("W-SEC-004", msg));
            }
            Credential::ApiKey(key)
        }
        (None, true) => Credential::Keyless,
        (None, false) => {
            let why = format!(
                "artifact '{name}' declares gateway.endpoint '{shown}' but binds no credential"
            );
            ctx.invalid_artifact("E-CAP-018", index, why);
            if let Some(d) = ctx.errors.last_mut() {
                d.hint = Some(
                    "add gateway.api_key: ${YOUR_KEY_VARIABLE}, or keyless: true for an endpoint \
                     that needs no key"
                        .into(),
                );
            }
            return None;
        }
    };
    Some(Gateway {
        endpoint,
        credential,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_https_or_loopback_http() {
        assert!(check_endpoint("https://api.anthropic.com").is_ok());
        assert!(check_endpoint("https://api.openai.com/v1").is_ok());
        assert!(check_endpoint("http://127.0.0.1:8080").is_ok());
        assert!(check_endpoint("http://localhost:11434/v1").is_ok());
        assert!(check_endpoint("http://[::1]:9000").is_ok());
        assert!(check_endpoint("http://example.com").is_err());
        assert!(check_endpoint("ftp://example.com").is_err());
        assert!(check_endpoint("https://${HOST}").is_err());
        assert!(check_endpoint("https://u:p@example.com").is_err());
        assert!(check_endpoint("https://example.com/?k=1").is_err());
        assert!(check_endpoint("not a url").is_err());
    }

    #[test]
    fn masking_drops_credentials_from_the_url() {
        assert_eq!(
            masked_endpoint("https://u:secret@example.com/v1"),
            "https://example.com/v1"
        );
        assert_eq!(
            masked_endpoint("https://example.com"),
            "https://example.com"
        );
    }

    #[test]
    fn literal_keys_never_show_in_debug_output() {
        let lit = format!("{:?}", Credential::ApiKey("sk-secret".into()));
        assert!(!lit.contains("sk-secret"));
        let var = format!("{:?}", Credential::ApiKey("${OPENAI_API_KEY}".into()));
        assert!(var.contains("OPENAI_API_KEY"));
    }
}

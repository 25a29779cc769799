//! The plain configuration an HTTP driver is built from, and the endpoint rules.
//!
//! The constructors take this struct rather than the manifest type so that the drivers do not
//! depend on how `murmur.yaml` is parsed; the launcher fills it from the driver's artifact entry
//! (`gateway.endpoint`, the resolved `gateway.api_key`) and `inference.retry`.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// `inference.retry`: how transient failures are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying). Default 6.
    pub max_retries: u32,
    /// Base of the exponential backoff, in ms. Default 1000.
    pub initial_delay_ms: u64,
    /// Cap of one wait, in ms; a provider asking for longer stops retrying. Default 60000.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 6,
            initial_delay_ms: 1000,
            max_delay_ms: 60_000,
        }
    }
}

/// Default time allowed to open a connection (TCP + TLS).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time allowed for one attempt, from sending the request to the last byte of the reply.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything an HTTP driver needs. `Debug` never shows the key.
#[derive(Clone)]
pub struct HttpDriverConfig {
    /// The driver's artifact name (`murmur/driver-anthropic`), used in messages.
    pub artifact: String,
    /// `gateway.endpoint`: a bare origin for Anthropic, `…/v1` for OpenAI.
    pub endpoint: String,
    /// The resolved key; `None` for `keyless: true`.
    pub api_key: Option<String>,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Whole-attempt timeout (streamed replies included).
    pub request_timeout: Duration,
    /// `inference.driver.config`, a mapping of driver-specific options (or `None`).
    pub driver_config: Option<Value>,
}

impl HttpDriverConfig {
    /// A config with default retry policy and timeouts and no driver options.
    pub fn new(artifact: &str, endpoint: &str, api_key: Option<String>) -> Self {
        HttpDriverConfig {
            artifact: artifact.to_string(),
            endpoint: endpoint.to_string(),
            api_key,
            retry: RetryPolicy::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            driver_config: None,
        }
    }
}

impl fmt::Debug for HttpDriverConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpDriverConfig")
            .field("artifact", &self.artifact)
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("retry", &self.retry)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("driver_config", &self.driver_config)
            .finish()
    }
}

/// Checks `gateway.endpoint` and returns it without a trailing `/`.
///
/// `https://` with a host, or plain `http://` only to `localhost` or a loopback address (so a
/// key never crosses a network in clear). No credentials, query or fragment in the URL.
pub fn validate_endpoint(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim();
    let url = reqwest::Url::parse(trimmed)
        .map_err(|e| format!("gateway.endpoint '{trimmed}' is not a valid URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "gateway.endpoint '{}' must not carry credentials; put the key in gateway.api_key",
            url.host_str().unwrap_or("")
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "gateway.endpoint '{trimmed}' must not have a query or fragment"
        ));
    }
    let Some(host) = url.host_str() else {
        return Err(format!("gateway.endpoint '{trimmed}' has no host"));
    };
    match url.scheme() {
        "https" => {}
        "http" => {
            if !crate::manifest::gateway::is_loopback(host) {
                return Err(format!(
                    "gateway.endpoint '{trimmed}' uses plain http:// to a non-loopback host \
                     '{host}'; use https://, or http:// only to localhost/127.0.0.1/[::1]"
                ));
            }
        }
        other => {
            return Err(format!(
                "gateway.endpoint '{trimmed}' has scheme '{other}'; use https:// (or http:// to loopback)"
            ))
        }
    }
    Ok(trimmed.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_http_is_allowed_and_trailing_slash_dropped() {
        assert_eq!(
            validate_endpoint("http://127.0.0.1:8080/v1/").unwrap(),
            "http://127.0.0.1:8080/v1"
        );
        assert!(validate_endpoint("http://localhost:11434/v1").is_ok());
        assert!(validate_endpoint("http://[::1]:9/").is_ok());
        assert!(validate_endpoint("http://127.8.9.10").is_ok());
        assert!(validate_endpoint("https://api.anthropic.com").is_ok());
    }

    #[test]
    fn plain_http_elsewhere_and_odd_urls_are_refused() {
        let e = validate_endpoint("http://10.0.0.5:8000/v1").unwrap_err();
        assert!(e.contains("non-loopback host '10.0.0.5'"), "{e}");
        assert!(validate_endpoint("http://0.0.0.0:8000").is_err());
        assert!(validate_endpoint("http://example.com").is_err());
        let e = validate_endpoint("https://user:pw@api.example.com").unwrap_err();
        assert!(!e.contains("pw"), "{e}");
        assert!(validate_endpoint("https://api.example.com/v1?x=1").is_err());
        assert!(validate_endpoint("ftp://api.example.com").is_err());
        assert!(validate_endpoint("not a url").is_err());
    }

    #[test]
    fn debug_hides_the_key() {
        let cfg = HttpDriverConfig::new(
            "murmur/driver-openai",
            "https://x",
            Some("sk-secret".into()),
        );
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("[redacted]"));
    }
}

//! The HTTP plumbing shared by the drivers: one reqwest client per driver, auth header, status
//! classification, error messages that never carry the key.
//!
//! Errors name the URL and what the provider said; any occurrence of the key in them (a proxy or
//! fake echoing it back, say) is replaced by `[redacted]` before it reaches a retry note, an
//! `InferError` or a log. The auth header is marked sensitive so reqwest never prints it either.

use std::time::Duration;

use mur_actors::model::InferErrorKind;
use reqwest::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::Value;

use super::config::{validate_endpoint, HttpDriverConfig};
use super::request_body::RequestBody;
use super::retry::{retry_after_ms, status_is_retryable, Failure};

/// How the key is presented to the provider.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AuthStyle {
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
    /// `authorization: Bearer <key>` (OpenAI and compatibles).
    Bearer,
}

/// A request URL: its text, for messages, and its parsed form, so that reqwest does not parse
/// the text again on every request (a URL parse, IDNA included, is a few µs of every turn).
#[derive(Debug)]
pub(crate) struct Target {
    text: String,
    /// `None` if the text does not parse; reqwest then reports it on the request, as before.
    parsed: Option<reqwest::Url>,
}

impl Target {
    /// The URL as text.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

/// A configured client for one driver.
pub(crate) struct Transport {
    client: reqwest::Client,
    endpoint: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    secret: Option<String>,
    keyless: bool,
    artifact: String,
    request_timeout: Duration,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("endpoint", &self.endpoint)
            .field("keyless", &self.keyless)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Builds the client; fails with a sentence naming the problem (bad endpoint, bad key).
    pub(crate) fn new(
        cfg: &HttpDriverConfig,
        auth: AuthStyle,
        extra: &[(&'static str, String)],
    ) -> Result<Transport, String> {
        let endpoint =
            validate_endpoint(&cfg.endpoint).map_err(|e| format!("{}: {e}", cfg.artifact))?;
        let secret = cfg
            .api_key
            .as_ref()
            .filter(|k| !k.trim().is_empty())
            .cloned();
        let mut headers = Vec::new();
        if let Some(key) = &secret {
            let (name, value) = match auth {
                AuthStyle::XApiKey => ("x-api-key", key.clone()),
                AuthStyle::Bearer => ("authorization", format!("Bearer {key}")),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!(
                    "{}: the API key contains characters that cannot be sent in an HTTP header",
                    cfg.artifact
                )
            })?;
            value.set_sensitive(true);
            headers.push((HeaderName::from_static(name), value));
        }
        for (name, value) in extra {
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("{}: invalid value for header {name}", cfg.artifact))?;
            headers.push((HeaderName::from_static(name), value));
        }
        let client = crate::tls::client_builder(&endpoint)
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("mur/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("{}: cannot build the HTTP client: {e}", cfg.artifact))?;
        Ok(Transport {
            client,
            endpoint,
            headers,
            keyless: secret.is_none(),
            secret,
            artifact: cfg.artifact.clone(),
            request_timeout: cfg.request_timeout,
            connect_timeout: cfg.connect_timeout,
        })
    }

    /// `endpoint + path`, parsed once.
    pub(crate) fn target(&self, path: &str) -> Target {
        let text = format!("{}{path}", self.endpoint);
        let parsed = reqwest::Url::parse(&text).ok();
        Target { text, parsed }
    }

    /// Replaces every occurrence of the key in `text` by `[redacted]`.
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.secret {
            Some(k) if text.contains(k.as_str()) => text.replace(k.as_str(), "[redacted]"),
            _ => text.to_string(),
        }
    }

    /// Redacts the message of a failure.
    pub(crate) fn redact_failure(&self, failure: Failure) -> Failure {
        match failure {
            Failure::Transient {
                reason,
                status,
                message,
                retry_after_ms,
            } => Failure::Transient {
                reason,
                status,
                message: self.redact(&message),
                retry_after_ms,
            },
            Failure::Fatal(mut e) => {
                e.message = self.redact(&e.message);
                Failure::Fatal(e)
            }
        }
    }

    /// POSTs a JSON body; returns the response when its status is 2xx, else the classified
    /// failure (401/403 final, retryable statuses transient, others final).
    pub(crate) async fn post(
        &self,
        target: &Target,
        body: &RequestBody,
    ) -> Result<reqwest::Response, Failure> {
        let url = target.as_str();
        let req = match &target.parsed {
            Some(parsed) => self.client.post(parsed.clone()),
            None => self.client.post(url),
        };
        let mut req = req
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_reqwest());
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        let resp = req.send().await.map_err(|e| self.send_failure(url, &e))?;
        let status = resp.status().as_u16();
        if resp.status().is_success() {
            return Ok(resp);
        }
        let retry_after = retry_after_ms(resp.headers());
        let body = read_capped(resp, 64 * 1024).await;
        let said = provider_message(&body);
        Err(self.status_failure(url, status, &said, retry_after))
    }

    fn status_failure(
        &self,
        url: &str,
        status: u16,
        said: &str,
        retry_after: Option<u64>,
    ) -> Failure {
        if status == 401 || status == 403 {
            let message = if self.keyless {
                format!(
                    "{url} answered HTTP {status}: the provider wants a key but this gateway is \
                     keyless (set gateway.api_key): {said}"
                )
            } else {
                format!(
                    "the provider rejected the API key for {} (HTTP {status} from {url}): {said}",
                    self.artifact
                )
            };
            let mut e =
                mur_actors::model::InferError::new(InferErrorKind::CredentialRejected, message);
            e.provider_status = Some(status);
            return Failure::Fatal(e);
        }
        let message = format!("HTTP {status} from {url}: {said}");
        if status_is_retryable(status) {
            Failure::Transient {
                reason: "status",
                status: Some(status),
                message,
                retry_after_ms: retry_after,
            }
        } else {
            let mut e = mur_actors::model::InferError::new(InferErrorKind::Driver, message);
            e.provider_status = Some(status);
            Failure::Fatal(e)
        }
    }

    /// Classifies a failure to get a reply head.
    fn send_failure(&self, url: &str, err: &reqwest::Error) -> Failure {
        let cause = root_cause(err);
        if err.is_timeout() {
            let limit = if err.is_connect() {
                self.connect_timeout
            } else {
                self.request_timeout
            };
            return Failure::connection(format!(
                "no reply from {url} within {} (timed out)",
                human(limit)
            ));
        }
        if err.is_connect() {
            // Nothing listening on this machine is a local model server still starting:
            // worth the retries inference.retry allows. Refused elsewhere (or DNS, TLS) is
            // final, as upstream has it.
            if refused(err) && is_loopback_url(&self.endpoint) {
                return Failure::connection(format!(
                    "could not connect to {url}: {cause} (a local server not listening yet)"
                ));
            }
            return Failure::fatal(
                InferErrorKind::Driver,
                format!("could not connect to {url}: {cause}"),
            );
        }
        Failure::connection(format!(
            "the connection to {url} closed before a reply arrived: {cause}"
        ))
    }

    /// Classifies a failure while reading the body of a 2xx reply.
    pub(crate) fn read_failure(&self, url: &str, err: &reqwest::Error) -> Failure {
        if err.is_timeout() {
            return Failure::connection(format!(
                "the reply from {url} did not complete within {} (timed out)",
                human(self.request_timeout)
            ));
        }
        Failure::connection(format!(
            "the connection to {url} dropped in the middle of the reply: {}",
            root_cause(err)
        ))
    }
}

/// Reads at most `cap` bytes of a body, ignoring read errors (used for error replies).
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < cap {
        match resp.chunk().await {
            Ok(Some(c)) => out.extend_from_slice(&c),
            _ => break,
        }
    }
    out.truncate(cap);
    out
}

/// What the provider said in an error body: `error.type: error.message` when it is JSON in
/// the Anthropic/OpenAI shape, `error` when that is a string (Ollama), else the text, shortened.
pub(crate) fn provider_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        match v.get("error") {
            Some(Value::Object(_)) => {
                let e = &v["error"];
                let msg = text(e, "message").unwrap_or_else(|| e.to_string());
                return match text(e, "type").or_else(|| text(e, "code")) {
                    Some(t) => format!("{t}: {msg}"),
                    None => msg,
                };
            }
            Some(Value::String(s)) => return s.clone(),
            _ => {}
        }
        if let Some(m) = text(&v, "message").or_else(|| text(&v, "detail")) {
            return m;
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        "(empty body)".to_string()
    } else {
        excerpt(text, 300)
    }
}

/// The first `max` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The innermost cause of an error chain, as text (e.g. `Connection refused (os error 111)`).
/// True when the error chain holds a refused connection.
fn refused(err: &reqwest::Error) -> bool {
    let mut cause: Option<&dyn std::error::Error> = Some(err);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// True for a URL whose host is this machine (`localhost`, `127.0.0.0/8`, `[::1]`).
pub(crate) fn is_loopback_url(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(crate::manifest::gateway::is_loopback))
        .unwrap_or(false)
}

fn root_cause(err: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn human(d: Duration) -> String {
    if d.as_millis() % 1000 == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_are_this_machine() {
        for url in [
            "http://127.0.0.1:8089/v1",
            "http://localhost:11434/v1",
            "http://LOCALHOST",
            "http://[::1]:8080/v1",
            "http://127.1.2.3/x",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.2:8080",
            "http://localhost.example.com/",
            "http://[2001:db8::1]:80/",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

    #[test]
    fn provider_messages_in_every_shape() {
        assert_eq!(
            provider_message(
                br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#
            ),
            "rate_limit_error: slow down"
        );
        assert_eq!(
            provider_message(
                br#"{"error":{"message":"bad model","type":"invalid_request_error","code":null}}"#
            ),
            "invalid_request_error: bad model"
        );
        assert_eq!(
            provider_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            provider_message(b"  <html>oops</html> "),
            "<html>oops</html>"
        );
        assert_eq!(provider_message(b""), "(empty body)");
        assert_eq!(
            provider_message("é".repeat(400).as_bytes()).chars().count(),
            301
        );
    }
}

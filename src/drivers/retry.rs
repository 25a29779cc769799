//! The retry loop shared by the HTTP drivers: which failures are retried, how long to wait.
//!
//! Transient failures (408, 429, 5xx other than 501/505, a dropped connection, a timeout) are
//! retried with capped exponential backoff and jitter: retry `n` (0-based) waits a uniform random
//! time in `[d/2, d]` with `d = min(max_delay_ms, initial_delay_ms * 2^n)`. A provider's
//! `retry-after-ms` / `retry-after` replaces the backoff; if it asks for more than `max_delay_ms`
//! the driver stops retrying (`retry_stopped: "retry_after"`). Every retry is reported through the
//! kernel's `RetrySink` before the wait, so the trace shows it even if the task is canceled during
//! the wait. The same request bytes are sent on every attempt.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use mur_actors::model::{InferError, InferErrorKind, InferReply, RetryNote, RetrySink};

use super::config::RetryPolicy;

/// Why one attempt failed, as the retry loop needs to know it.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Worth another attempt.
    Transient {
        /// `status`, `connection` or `driver` (the trace's `inference_retry.reason`).
        reason: &'static str,
        /// HTTP status, when a reply head arrived.
        status: Option<u16>,
        /// What went wrong (already redacted).
        message: String,
        /// What the provider asked us to wait, in ms.
        retry_after_ms: Option<u64>,
    },
    /// Final: returned as is (with the attempt count filled in).
    Fatal(InferError),
}

impl Failure {
    /// A final failure of the given kind.
    pub(crate) fn fatal(kind: InferErrorKind, message: impl Into<String>) -> Failure {
        Failure::Fatal(InferError::new(kind, message))
    }

    /// A final "could not understand the reply" failure.
    pub(crate) fn malformed(message: impl Into<String>) -> Failure {
        Failure::fatal(InferErrorKind::Malformed, message)
    }

    /// A transient failure of the connection (no status).
    pub(crate) fn connection(message: impl Into<String>) -> Failure {
        Failure::Transient {
            reason: "connection",
            status: None,
            message: message.into(),
            retry_after_ms: None,
        }
    }
}

/// Whether an HTTP status is worth retrying: 408, 429, and 5xx except 501 and 505.
pub(crate) fn status_is_retryable(status: u16) -> bool {
    matches!(status, 408 | 429) || ((500..600).contains(&status) && status != 501 && status != 505)
}

/// Reads `retry-after-ms` (integer ms) or `retry-after` (seconds or an HTTP date) from headers.
pub(crate) fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms.ceil() as u64);
        }
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).ceil() as u64);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}

/// The backoff before retry `n` (0-based): uniform in `[d/2, d]`, `d = min(max, initial*2^n)`.
pub(crate) fn backoff_ms(policy: &RetryPolicy, n: u32, random: u64) -> u64 {
    let d = policy
        .initial_delay_ms
        .saturating_mul(1u64.checked_shl(n.min(63)).unwrap_or(u64::MAX))
        .min(policy.max_delay_ms);
    let low = d / 2;
    low + random % (d - low + 1)
}

/// A random u64 from the standard library's per-hasher random keys (no extra crate needed).
fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Runs `attempt` until it succeeds, fails for good, or the policy says stop.
///
/// `attempt` gets the 1-based attempt number. Each retry is reported to `sink` before waiting.
pub(crate) async fn with_retries<F, Fut>(
    policy: &RetryPolicy,
    sink: &dyn RetrySink,
    mut attempt: F,
) -> Result<InferReply, InferError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<InferReply, Failure>>,
{
    let mut n: u32 = 1;
    loop {
        match attempt(n).await {
            Ok(mut reply) => {
                reply.attempts = n;
                return Ok(reply);
            }
            Err(Failure::Fatal(mut err)) => {
                err.attempts = n;
                return Err(err);
            }
            Err(Failure::Transient {
                reason,
                status,
                message,
                retry_after_ms,
            }) => {
                let retries_done = n - 1;
                let stop = if retries_done >= policy.max_retries {
                    Some("max_retries")
                } else if retry_after_ms.is_some_and(|ms| ms > policy.max_delay_ms) {
                    Some("retry_after")
                } else {
                    None
                };
                if let Some(stop) = stop {
                    let why = match stop {
                        "max_retries" if n == 1 => String::new(),
                        "max_retries" => format!(" (gave up after {n} attempts)"),
                        _ => format!(
                            " (the provider asked to wait {} ms, more than inference.retry.max_delay_ms {} ms)",
                            retry_after_ms.unwrap_or(0),
                            policy.max_delay_ms
                        ),
                    };
                    return Err(InferError {
                        kind: InferErrorKind::Driver,
                        message: format!("{message}{why}"),
                        provider_status: status,
                        attempts: n,
                        retry_stopped: Some(stop.to_string()),
                    });
                }
                let delay_ms = retry_after_ms
                    .unwrap_or_else(|| backoff_ms(policy, retries_done, random_u64()));
                tracing::info!(
                    "model call attempt {n} failed ({message}); retrying in {delay_ms} ms ({} of {} retries)",
                    n,
                    policy.max_retries
                );
                sink.retrying(RetryNote {
                    attempt: n,
                    max_retries: policy.max_retries,
                    reason,
                    provider_status: status,
                    error: message,
                    delay_ms,
                    retry_after_ms,
                });
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 504, 529, 599] {
            assert!(status_is_retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422, 501, 505] {
            assert!(!status_is_retryable(s), "{s}");
        }
    }

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let p = RetryPolicy {
            max_retries: 6,
            initial_delay_ms: 10,
            max_delay_ms: 35,
        };
        assert_eq!(backoff_ms(&p, 0, 0), 5);
        assert_eq!(backoff_ms(&p, 0, 5), 10);
        assert_eq!(backoff_ms(&p, 1, 0), 10);
        assert_eq!(backoff_ms(&p, 1, 10), 20);
        assert_eq!(backoff_ms(&p, 5, 0), 17);
        assert!((17..=35).contains(&backoff_ms(&p, 40, u64::MAX)));
        for r in 0..1000u64 {
            let d = backoff_ms(&p, 2, r.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            assert!((17..=35).contains(&d), "{d}");
        }
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h), Some(2000));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after_ms(&h), Some(150), "retry-after-ms wins");
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_ms(&h), Some(0), "a past date means now");
        let mut h = HeaderMap::new();
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        let ms = retry_after_ms(&h).unwrap();
        assert!((1000..=3000).contains(&ms), "a date 3 s ahead: {ms}");
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after_ms(&h), None);
    }
}

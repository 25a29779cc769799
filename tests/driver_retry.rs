//! Retries, backoff and faults: both drivers against the real fake provider, every fault it can
//! produce, with tiny delays. Retry notes are what the Session writes as `inference_retry` lines.

mod driver_common;

use std::time::{Duration, Instant};

use driver_common::*;
use fake_provider::builders::{anthropic, openai};
use fake_provider::{FakeProvider, Reply, SseEvent};
use mur::drivers::{self, RetryPolicy};
use mur_actors::model::{InferError, InferErrorKind, InferReply, ModelDriver, StopReason};
use serde_json::json;

fn anthropic_driver(fake: &FakeProvider, retry: RetryPolicy) -> std::sync::Arc<dyn ModelDriver> {
    let mut cfg = config("murmur/driver-anthropic", &fake.endpoint());
    cfg.retry = retry;
    drivers::anthropic(cfg).unwrap()
}

fn fast(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        initial_delay_ms: 10,
        max_delay_ms: 2000,
    }
}

async fn run(fake: &FakeProvider, retry: RetryPolicy) -> (Result<InferReply, InferError>, Notes) {
    let notes = Notes::default();
    let r = bounded(anthropic_driver(fake, retry).infer(&simple("claude-haiku-4-5", "hi"), &notes))
        .await;
    (r, notes)
}

fn ok() -> Reply {
    Reply::json(anthropic::text("done"))
}

#[tokio::test]
async fn a_429_with_retry_after_ms_is_retried_after_exactly_that_wait_with_identical_bytes() {
    let fake = FakeProvider::start([
        Reply::status_with_headers(
            429,
            &[("retry-after-ms", "120")],
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        ),
        ok(),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(3)).await;
    let reply = r.unwrap();
    assert_eq!(reply.attempts, 2);
    assert_eq!(
        reply.content,
        vec![mur_actors::model::ContentBlock::text("done")]
    );
    let notes = notes.all();
    assert_eq!(notes.len(), 1);
    let n = &notes[0];
    assert_eq!((n.attempt, n.max_retries, n.reason), (1, 3, "status"));
    assert_eq!(n.provider_status, Some(429));
    assert_eq!((n.delay_ms, n.retry_after_ms), (120, Some(120)));
    assert_eq!(
        n.error,
        format!(
            "HTTP 429 from {}/v1/messages: rate_limit_error: slow down",
            fake.endpoint()
        )
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].raw_body, reqs[1].raw_body,
        "the same bytes on every attempt"
    );
    assert!(reqs[1].arrived - reqs[0].arrived >= Duration::from_millis(120));
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let fake = FakeProvider::start([
        Reply::status_with_headers(503, &[("retry-after", "1")], json!({"error": "busy"})),
        ok(),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(3)).await;
    assert_eq!(r.unwrap().attempts, 2);
    assert_eq!(notes.all()[0].delay_ms, 1000);
    assert_eq!(notes.all()[0].retry_after_ms, Some(1000));
    let reqs = fake.requests();
    assert!(reqs[1].arrived - reqs[0].arrived >= Duration::from_millis(1000));
}

#[tokio::test]
async fn backoff_doubles_with_jitter_between_5xx_replies() {
    let fake = FakeProvider::start([
        anthropic::error(500, "api_error", "internal"),
        anthropic::error(529, "overloaded_error", "Overloaded"),
        Reply::garbage(502, "<html>bad gateway</html>"),
        ok(),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(6)).await;
    assert_eq!(r.unwrap().attempts, 4);
    let notes = notes.all();
    let statuses: Vec<_> = notes.iter().map(|n| n.provider_status).collect();
    assert_eq!(statuses, vec![Some(500), Some(529), Some(502)]);
    assert!(
        (5..=10).contains(&notes[0].delay_ms),
        "{}",
        notes[0].delay_ms
    );
    assert!(
        (10..=20).contains(&notes[1].delay_ms),
        "{}",
        notes[1].delay_ms
    );
    assert!(
        (20..=40).contains(&notes[2].delay_ms),
        "{}",
        notes[2].delay_ms
    );
    assert!(
        notes[2].error.ends_with(": <html>bad gateway</html>"),
        "{}",
        notes[2].error
    );
    assert!(notes.iter().all(|n| n.retry_after_ms.is_none()));
}

#[tokio::test]
async fn giving_up_after_max_retries_says_so() {
    let fake = FakeProvider::start(
        (0..3).map(|_| anthropic::error(503, "overloaded_error", "Overloaded")),
    )
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(2)).await;
    let e = r.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Driver);
    assert_eq!(e.attempts, 3);
    assert_eq!(e.provider_status, Some(503));
    assert_eq!(e.retry_stopped.as_deref(), Some("max_retries"));
    assert_eq!(
        e.message,
        format!(
            "HTTP 503 from {}/v1/messages: overloaded_error: Overloaded (gave up after 3 attempts)",
            fake.endpoint()
        )
    );
    assert_eq!(notes.all().len(), 2);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn max_retries_zero_makes_one_attempt() {
    let fake = FakeProvider::start([anthropic::error(429, "rate_limit_error", "no")])
        .await
        .unwrap();
    let (r, notes) = run(&fake, fast(0)).await;
    let e = r.unwrap_err();
    assert_eq!(e.retry_stopped.as_deref(), Some("max_retries"));
    assert_eq!(e.attempts, 1);
    assert!(notes.all().is_empty());
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_retry_after_beyond_max_delay_stops_retrying() {
    let fake = FakeProvider::start([Reply::status_with_headers(
        429,
        &[("retry-after", "30")],
        json!({}),
    )])
    .await
    .unwrap();
    let started = Instant::now();
    let (r, notes) = run(&fake, fast(5)).await;
    let e = r.unwrap_err();
    assert_eq!(e.retry_stopped.as_deref(), Some("retry_after"));
    assert!(
        e.message.ends_with(
            "(the provider asked to wait 30000 ms, more than inference.retry.max_delay_ms 2000 ms)"
        ),
        "{}",
        e.message
    );
    assert!(notes.all().is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn credential_rejections_fail_at_once_and_never_show_the_key() {
    for status in [401, 403] {
        let fake = FakeProvider::start([anthropic::error(
            status,
            "authentication_error",
            &format!("invalid x-api-key {KEY}"),
        )])
        .await
        .unwrap();
        let (r, notes) = run(&fake, fast(5)).await;
        let e = r.unwrap_err();
        assert_eq!(e.kind, InferErrorKind::CredentialRejected);
        assert_eq!(e.provider_status, Some(status));
        assert_eq!(e.attempts, 1);
        assert_eq!(e.retry_stopped, None);
        assert_eq!(
            e.message,
            format!(
                "the provider rejected the API key for murmur/driver-anthropic (HTTP {status} from {}/v1/messages): \
                 authentication_error: invalid x-api-key [redacted]",
                fake.endpoint()
            )
        );
        assert!(!format!("{e:?}").contains(KEY));
        assert!(notes.all().is_empty());
        assert_eq!(fake.requests().len(), 1);
    }
}

#[tokio::test]
async fn an_echoed_key_is_redacted_from_retry_notes_too() {
    let fake = FakeProvider::start([
        anthropic::error(500, "api_error", &format!("upstream said {KEY}")),
        ok(),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(2)).await;
    r.unwrap();
    let note = &notes.all()[0];
    assert!(
        !note.error.contains(KEY) && note.error.contains("upstream said [redacted]"),
        "{}",
        note.error
    );
}

#[tokio::test]
async fn client_errors_and_501_are_not_retried() {
    for (status, kind, msg) in [
        (400, "invalid_request_error", "prompt is too long"),
        (404, "not_found_error", "model: x"),
        (501, "api_error", "nope"),
    ] {
        let fake = FakeProvider::start([anthropic::error(status, kind, msg)])
            .await
            .unwrap();
        let (r, notes) = run(&fake, fast(5)).await;
        let e = r.unwrap_err();
        assert_eq!(e.kind, InferErrorKind::Driver);
        assert_eq!(e.provider_status, Some(status));
        assert_eq!(e.retry_stopped, None);
        assert_eq!(
            e.message,
            format!(
                "HTTP {status} from {}/v1/messages: {kind}: {msg}",
                fake.endpoint()
            )
        );
        assert!(notes.all().is_empty());
        assert_eq!(fake.requests().len(), 1);
    }
}

#[tokio::test]
async fn dropped_connections_and_cut_bodies_are_retried_as_connection_failures() {
    let mut cut_stream = vec![anthropic::message_start(3)];
    cut_stream.extend(anthropic::text_block(0, &["never ", "finished"]));
    let fake = FakeProvider::start([
        Reply::Drop,
        Reply::Partial {
            status: 200,
            body: "{\"id\": \"msg_1\", \"con".into(),
        },
        Reply::Sse {
            events: cut_stream,
            pause: None,
            cut_after: Some(3),
        },
        Reply::sse(anthropic::text_stream(&["made it"])),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(5)).await;
    let reply = r.unwrap();
    assert_eq!(reply.attempts, 4);
    assert_eq!(
        reply.content,
        vec![mur_actors::model::ContentBlock::text("made it")]
    );
    let notes = notes.all();
    assert_eq!(notes.len(), 3);
    for n in &notes {
        assert_eq!(n.reason, "connection");
        assert_eq!(n.provider_status, None);
    }
    let url = format!("{}/v1/messages", fake.endpoint());
    assert!(
        notes[0].error.starts_with(&format!(
            "the connection to {url} closed before a reply arrived"
        )),
        "{}",
        notes[0].error
    );
    assert!(
        notes[1].error.starts_with(&format!(
            "the connection to {url} dropped in the middle of the reply"
        )),
        "{}",
        notes[1].error
    );
    assert!(
        notes[2].error.starts_with(&format!(
            "the connection to {url} dropped in the middle of the reply"
        )),
        "{}",
        notes[2].error
    );
}

#[tokio::test]
async fn a_hung_provider_times_out_and_is_retried() {
    let fake = FakeProvider::start([Reply::Hang, Reply::Hang])
        .await
        .unwrap();
    let mut cfg = config("murmur/driver-anthropic", &fake.endpoint());
    cfg.retry = fast(1);
    cfg.request_timeout = Duration::from_millis(300);
    let d = drivers::anthropic(cfg).unwrap();
    let notes = Notes::default();
    let started = Instant::now();
    let e = bounded(d.infer(&simple("m", "x"), &notes))
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(e.kind, InferErrorKind::Driver);
    assert_eq!(e.retry_stopped.as_deref(), Some("max_retries"));
    assert_eq!(
        e.message,
        format!(
            "no reply from {}/v1/messages within 300 ms (timed out) (gave up after 2 attempts)",
            fake.endpoint()
        )
    );
    assert_eq!(notes.all()[0].reason, "connection");
    assert_eq!(fake.requests().len(), 2);
}

/// A free port on loopback with nothing listening on it.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_refused_connection_to_this_machine_is_retried_as_the_policy_says() {
    let port = closed_port();
    let mut cfg = config(
        "murmur/driver-openai",
        &format!("http://127.0.0.1:{port}/v1"),
    );
    cfg.retry = fast(2);
    let d = drivers::openai(cfg).unwrap();
    let notes = Notes::default();
    let e = bounded(d.infer(&simple("m", "x"), &notes))
        .await
        .unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Driver);
    assert!(
        e.message.starts_with(&format!(
            "could not connect to http://127.0.0.1:{port}/v1/chat/completions: "
        )) && e.message.ends_with("(gave up after 3 attempts)"),
        "{}",
        e.message
    );
    assert!(
        e.message.to_lowercase().contains("refused"),
        "{}",
        e.message
    );
    let notes = notes.all();
    assert_eq!(notes.len(), 2);
    assert!(notes
        .iter()
        .all(|n| n.reason == "connection" && n.provider_status.is_none()));
}

/// Starts the fake provider on `port` when the first retry is announced: a local model server
/// that comes up while the runtime waits.
struct StartsOnRetry {
    port: u16,
    server: std::sync::Arc<std::sync::Mutex<Option<FakeProvider>>>,
    started: std::sync::atomic::AtomicBool,
    notes: Notes,
}

impl mur_actors::model::RetrySink for StartsOnRetry {
    fn retrying(&self, note: mur_actors::model::RetryNote) {
        self.notes.retrying(note);
        if !self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let (port, server) = (self.port, self.server.clone());
            // Listening before the retry's wait ends in all but the slowest case; a later
            // attempt refused again is simply retried once more.
            tokio::spawn(async move {
                let f = FakeProvider::start_on(
                    &format!("127.0.0.1:{port}"),
                    [Reply::json(openai::chat_text("up now"))],
                    None,
                )
                .await
                .unwrap();
                *server.lock().unwrap() = Some(f);
            });
        }
    }
}

#[tokio::test]
async fn a_local_server_that_comes_up_while_the_runtime_retries_answers_the_call() {
    let port = closed_port();
    let mut cfg = config(
        "murmur/driver-openai",
        &format!("http://127.0.0.1:{port}/v1"),
    );
    cfg.retry = RetryPolicy {
        max_retries: 20,
        initial_delay_ms: 20,
        max_delay_ms: 200,
    };
    let d = drivers::openai(cfg).unwrap();
    let sink = StartsOnRetry {
        port,
        server: Default::default(),
        started: Default::default(),
        notes: Notes::default(),
    };
    let reply = bounded(d.infer(&simple("m", "x"), &sink)).await.unwrap();
    assert_eq!(
        reply.content,
        vec![mur_actors::model::ContentBlock::text("up now")]
    );
    assert!(reply.attempts >= 2);
    assert_eq!(sink.notes.all().len() as u32, reply.attempts - 1);
}

#[tokio::test]
async fn an_overloaded_error_inside_a_stream_is_retried() {
    let fake = FakeProvider::start([
        Reply::sse(vec![
            anthropic::message_start(3),
            SseEvent::named("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ]),
        ok(),
    ])
    .await
    .unwrap();
    let (r, notes) = run(&fake, fast(2)).await;
    assert_eq!(r.unwrap().attempts, 2);
    let n = &notes.all()[0];
    assert_eq!(n.reason, "driver");
    assert!(
        n.error
            .ends_with("reported an error: overloaded_error: Overloaded"),
        "{}",
        n.error
    );
}

#[tokio::test]
async fn openai_retries_a_429_then_reads_the_stream() {
    let fake = FakeProvider::start([
        Reply::status_with_headers(
            429,
            &[("retry-after-ms", "20")],
            json!({"error": {"message": "Rate limit", "type": "requests"}}),
        ),
        Reply::sse(openai::chat_text_stream(&["fine"])),
    ])
    .await
    .unwrap();
    let mut cfg = config("murmur/driver-openai", &fake.openai_endpoint());
    cfg.retry = fast(2);
    let d = drivers::openai(cfg).unwrap();
    let notes = Notes::default();
    let reply = bounded(d.infer(&simple("gpt-4.1", "x"), &notes))
        .await
        .unwrap();
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(reply.attempts, 2);
    assert_eq!(notes.all()[0].delay_ms, 20);
    assert_eq!(
        notes.all()[0].error,
        format!(
            "HTTP 429 from {}/chat/completions: requests: Rate limit",
            fake.openai_endpoint()
        )
    );
}

//! The accept loop and the per-request handler: record, pick the reply, send it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use serde_json::Value;

use crate::record::{record_header, RecordedRequest};
use crate::reply::{Fallback, Reply, SseEvent};
use crate::Shared;

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Returned by the service to make hyper close the connection without writing a reply.
#[derive(Debug)]
struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted connection drop")
    }
}

impl std::error::Error for DropConnection {}

/// Accepts connections until the listener task is aborted; one task per connection.
pub(crate) async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut release = shared.release.subscribe();
            let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = release.wait_for(|r| *r) => {}
            }
        });
    }
}

/// Records one request and answers it with the next scripted reply (or the fallback).
async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let arrived = Instant::now();
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                record_header(k.as_str(), v.as_bytes()),
            )
        })
        .collect();
    let raw = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(DropConnection),
    };
    let keep = shared
        .keep_bodies
        .load(std::sync::atomic::Ordering::Relaxed);
    let (raw_body, body) = if keep {
        let body: Option<Value> = serde_json::from_slice(&raw).ok();
        (String::from_utf8_lossy(&raw).into_owned(), body)
    } else {
        (String::new(), None)
    };
    let (index, reply) = {
        let mut requests = shared.requests.lock().unwrap();
        let index = requests.len();
        let reply = shared.script.lock().unwrap().pop_front();
        let reply = reply.unwrap_or_else(|| {
            let fallback = shared.fallback.lock().unwrap().clone();
            // A body not kept is parsed only when a fallback reply needs to look at it.
            let parsed: Option<Value> = match &body {
                None if !keep => serde_json::from_slice(&raw).ok(),
                _ => None,
            };
            fallback_reply(
                fallback.as_ref(),
                index,
                &path,
                body.as_ref().or(parsed.as_ref()),
            )
        });
        requests.push(RecordedRequest {
            index,
            method,
            path,
            headers,
            raw_body,
            body,
            arrived,
            handled: Duration::ZERO,
        });
        (index, reply)
    };
    let handled = arrived.elapsed();
    if let Some(r) = shared.requests.lock().unwrap().get_mut(index) {
        r.handled = handled;
    }
    respond(&shared, reply).await
}

/// Turns a reply into a hyper response (or a dropped connection).
async fn respond(shared: &Shared, reply: Reply) -> Result<Response<Body>, DropConnection> {
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => Ok(build(
            status,
            "application/json",
            &headers,
            full(body.to_string()),
        )),
        Reply::Text {
            status,
            content_type,
            headers,
            body,
        } => Ok(build(status, &content_type, &headers, full(body))),
        Reply::Sse {
            events,
            pause,
            cut_after,
        } => Ok(build(
            200,
            "text/event-stream",
            &[],
            sse_body(events, pause, cut_after),
        )),
        Reply::Drop => Err(DropConnection),
        Reply::Partial { status, body } => {
            let declared = body.len() + 4096;
            // The pause lets hyper flush the head and the partial body before the cut.
            let stream = futures::stream::unfold(Some(body), |body| async move {
                match body {
                    Some(b) => Some((Ok(Frame::data(Bytes::from(b))), None)),
                    None => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Some((Err(cut()), None))
                    }
                }
            });
            let mut resp = build(
                status,
                "application/json",
                &[("content-length".into(), declared.to_string())],
                StreamBody::new(stream).boxed_unsync(),
            );
            resp.headers_mut().remove("transfer-encoding");
            Ok(resp)
        }
        Reply::Hang => {
            let mut release = shared.release.subscribe();
            let _ = release.wait_for(|r| *r).await;
            Err(DropConnection)
        }
        Reply::Delay(wait, inner) => {
            tokio::time::sleep(wait).await;
            Box::pin(respond(shared, *inner)).await
        }
    }
}

fn cut() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted cut")
}

fn full(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|e: Infallible| match e {})
        .boxed_unsync()
}

fn build(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    body: Body,
) -> Response<Body> {
    let mut builder = Response::builder()
        .status(status)
        .header("content-type", content_type);
    for (k, v) in headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(body).unwrap_or_else(|_| {
        let mut r = Response::new(full("fake-provider: bad scripted header".into()));
        *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// A chunked event-stream body: one frame per event, optional pause, optional cut.
fn sse_body(
    events: Vec<SseEvent>,
    pause: Option<(usize, Duration)>,
    cut_after: Option<usize>,
) -> Body {
    let stream = futures::stream::unfold(0usize, move |i| {
        let events = events.clone();
        async move {
            if cut_after == Some(i) {
                // Let hyper flush what was sent so far, then break the connection.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Some((Err(cut()), usize::MAX));
            }
            let ev = events.get(i)?;
            if let Some((after, wait)) = pause {
                if i == after && i > 0 {
                    tokio::time::sleep(wait).await;
                }
            }
            Some((Ok(Frame::data(Bytes::from(ev.to_wire()))), i + 1))
        }
    });
    StreamBody::new(stream).boxed_unsync()
}

/// The reply for a request past the script.
fn fallback_reply(
    fallback: Option<&Fallback>,
    index: usize,
    path: &str,
    body: Option<&Value>,
) -> Reply {
    use crate::builders::{anthropic, openai};
    let Some(Fallback::Text(text)) = fallback else {
        return Reply::Text {
            status: 418,
            content_type: "text/plain".into(),
            headers: Vec::new(),
            body: format!("fake-provider: no scripted reply for request #{index} ({path})"),
        };
    };
    let stream = body
        .and_then(|b| b.get("stream"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/messages") {
        if stream {
            Reply::sse(anthropic::text_stream(&[text]))
        } else {
            Reply::json(anthropic::text(text))
        }
    } else if path.ends_with("/chat/completions") {
        if stream {
            Reply::sse(openai::chat_text_stream(&[text]))
        } else {
            Reply::json(openai::chat_text(text))
        }
    } else if path.ends_with("/responses") {
        if stream {
            Reply::sse(openai::responses_text_stream(&[text]))
        } else {
            Reply::json(openai::responses_text(text))
        }
    } else {
        Reply::Text {
            status: 404,
            content_type: "text/plain".into(),
            headers: Vec::new(),
            body: format!("fake-provider: no such endpoint {path}"),
        }
    }
}

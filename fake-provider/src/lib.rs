//! A scripted stand-in for the Anthropic and OpenAI HTTP APIs, listening on loopback.
//!
//! `mur`'s drivers are tested against real sockets rather than a mocked transport, so that the
//! bytes they put on the wire, their SSE parsing and their retry logic are exercised exactly as
//! they would be against a provider. A test starts a [`FakeProvider`] with a script of
//! [`Reply`]s (one per request, in order), points a driver at [`FakeProvider::endpoint`], and
//! afterwards reads [`FakeProvider::requests`] to assert what was sent. Faults a real provider or
//! network produces (429 with `retry-after`, 5xx, a dropped connection, a body cut short, garbage,
//! a hang) are replies like any other.
//!
//! The server is built on hyper (the engine under axum) rather than an axum `Router`, because a
//! connection-level fault such as "close the socket without answering" cannot be expressed by an
//! axum handler, which must always produce a response.

pub mod builders;
mod record;
mod reply;
mod server;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use record::{secret_digest, RecordedRequest};
pub use reply::{Fallback, Reply, SseEvent};

/// State shared between the handle a test holds and the connection tasks.
pub(crate) struct Shared {
    /// Replies not yet used, in order.
    pub(crate) script: Mutex<VecDeque<Reply>>,
    /// What to answer once the script is used up; `None` answers 418 naming the request.
    pub(crate) fallback: Mutex<Option<Fallback>>,
    /// Every request received, in arrival order.
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    /// Whether records keep the body (see [`FakeProvider::keep_bodies`]).
    pub(crate) keep_bodies: AtomicBool,
    /// Flipped to true to release every [`Reply::Hang`] and end the server.
    pub(crate) release: tokio::sync::watch::Sender<bool>,
}

/// A running fake provider. Dropping it stops the listener and releases hung replies.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl FakeProvider {
    /// Starts a server on `127.0.0.1:0` that answers the n-th request with the n-th reply.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> std::io::Result<FakeProvider> {
        FakeProvider::start_on("127.0.0.1:0", script, None).await
    }

    /// Starts a server on `addr` with a script and an optional fallback for requests past it.
    pub async fn start_on(
        addr: &str,
        script: impl IntoIterator<Item = Reply>,
        fallback: Option<Fallback>,
    ) -> std::io::Result<FakeProvider> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (release, _) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into_iter().collect()),
            fallback: Mutex::new(fallback),
            requests: Mutex::new(Vec::new()),
            keep_bodies: AtomicBool::new(true),
            release,
        });
        let accept = tokio::spawn(server::accept_loop(listener, shared.clone()));
        Ok(FakeProvider {
            addr,
            shared,
            accept,
        })
    }

    /// The Anthropic-style endpoint, a bare origin: `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OpenAI-style endpoint, which includes the API version: `http://127.0.0.1:<port>/v1`.
    pub fn openai_endpoint(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The port the server listens on (golden files replace it with `<port>`).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Appends a reply to the end of the script.
    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    /// Sets what requests past the end of the script get.
    pub fn set_fallback(&self, fallback: Option<Fallback>) {
        *self.shared.fallback.lock().unwrap() = fallback;
    }

    /// How many scripted replies have not been used yet.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }

    /// A snapshot of every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Whether each record keeps the request body (`raw_body`, `body`); on by default.
    ///
    /// Benches that send hundreds of long requests turn it off: the server then reads each
    /// body whole and drops it, parsing it only if a fallback reply must look at it. Kept, a
    /// 300-turn session's bodies and their parsed trees grow the process by ~100 MB, and that
    /// work and growth (fresh pages, a colder cache on the two cores the client shares) show up
    /// in the client's figures, where the server's own time is meant to be netted out.
    pub fn keep_bodies(&self, keep: bool) {
        self.shared.keep_bodies.store(keep, Ordering::Relaxed);
    }

    /// Releases every hung reply: each closes its connection without answering, and a
    /// [`Reply::Hang`] used from now on closes at once.
    pub fn release_hangs(&self) {
        self.shared.release.send_replace(true);
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.shared.release.send_replace(true);
        self.accept.abort();
    }
}

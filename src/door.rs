//! The door: the process's one loopback HTTP listener.
//!
//! One listener per `mur` process, whatever the number of sessions: each session is addressed on
//! it by its id (`GET /<ses_id>`), and `GET /` answers for the root session, which is what the
//! `murmur: url localhost:<port>` line of `mur run` points at. The Supervisor owns it: the
//! listener stops when the Supervisor stops. Later routes (peer-file redemption) hang off the
//! same router.

use std::net::SocketAddr;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mur_actors::session::SessionMsg;
use mur_actors::supervisor::{Door, SupervisorMsg};
use ractor::ActorRef;
use serde_json::json;

/// Bind `127.0.0.1:0` and serve the door for `supervisor`; hand the Supervisor ownership.
pub async fn open(supervisor: ActorRef<SupervisorMsg>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/", get(root))
        .route("/{session_id}", get(session))
        .with_state(supervisor.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await;
    });
    let _ = supervisor.send_message(SupervisorMsg::AttachDoor(Door {
        addr,
        stop: Box::new(move || {
            let _ = stop_tx.send(());
        }),
    }));
    Ok(addr)
}

async fn root(State(sup): State<ActorRef<SupervisorMsg>>) -> Response {
    describe(sup, None).await
}

async fn session(
    State(sup): State<ActorRef<SupervisorMsg>>,
    Path(session_id): Path<String>,
) -> Response {
    describe(sup, Some(session_id)).await
}

async fn describe(sup: ActorRef<SupervisorMsg>, id: Option<String>) -> Response {
    let wanted = id.clone();
    let found = ractor::call!(sup, |reply| SupervisorMsg::Lookup {
        session_id: wanted,
        reply
    });
    let session = match found {
        Ok(Some(s)) => s,
        _ => {
            return (
                StatusCode::NOT_FOUND,
                Json(json!({"error": format!("no live session {}", id.unwrap_or_else(|| "(root)".into()))})),
            )
                .into_response()
        }
    };
    match ractor::call!(session, SessionMsg::Describe) {
        Ok(status) => Json(status).into_response(),
        Err(_) => (
            StatusCode::GONE,
            Json(json!({"error": "the session has ended"})),
        )
            .into_response(),
    }
}

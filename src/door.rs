//! The door: the process's one loopback HTTP listener.
//!
//! One listener per `mur` process, whatever the number of sessions: each session is addressed on
//! it by its id (`GET /<ses_id>`), and `GET /` answers for the root session, which is what the
//! `murmur: url localhost:<port>` line of `mur run` points at. The Supervisor owns it: the
//! listener stops when the Supervisor stops. Peer-file handles minted by a session are redeemed
//! on the same listener at `GET /<ses_id>/resources/peer/<handle>` (see [`crate::peer`]).

use std::net::SocketAddr;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
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
    crate::peer::registry::set_door_port(addr.port());
    let app = Router::new()
        .route("/", get(root))
        .route("/{session_id}", get(session))
        .route(
            "/{session_id}/resources/peer/{handle}",
            get(redeem).fallback(method_not_allowed),
        )
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

/// `GET /<ses_id>/resources/peer/<handle>`: serve the file a handle names to the audience it was
/// minted for, or the JSON error of reference §6.3.
async fn redeem(
    Path((session_id, handle)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let audience = headers
        .get("x-murmur-audience")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let answer = tokio::task::spawn_blocking(move || {
        crate::peer::redeem::redeem(&session_id, &handle, audience.as_deref())
    })
    .await;
    match answer {
        Ok(Ok(served)) => (
            [
                ("content-type", "application/octet-stream".to_string()),
                ("etag", served.etag),
                ("x-murmur-handle-id", served.handle_id),
            ],
            served.bytes,
        )
            .into_response(),
        Ok(Err(refused)) => (
            StatusCode::from_u16(refused.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(json!({"error": refused.code, "message": refused.message})),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "io_error", "message": e.to_string()})),
        )
            .into_response(),
    }
}

async fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [("allow", "GET")],
        Json(json!({"error": "method_not_allowed", "message": "peer files are redeemed with GET only"})),
    )
        .into_response()
}

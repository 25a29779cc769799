//! The minter's door and both peer tools, in one process: a real door on 127.0.0.1:0, real
//! files under a real export root, handles minted with the session's own key, and every refusal
//! of the redeem endpoint as a peer would see it over HTTP.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mur::peer::fetch::FetchPeerFile;
use mur::peer::handle::{self, Key, Payload};
use mur::peer::registry::{self, Export};
use mur::peer::share::ShareFile;
use mur_actors::provided;
use mur_actors::supervisor::{Supervisor, SupervisorArgs};
use mur_actors::tool::{ExecErrorKind, ExecRequest, ToolExecutor};
use mur_actors::trace::TraceEvent;
use ractor::Actor;
use serde_json::{json, Value};

const MINTER: &str = "ses_0192f0c3a1b27c3d8e9f00112233aa01";
const RECEIVER: &str = "ses_0192f0c3a1b27c3d8e9f00112233aa02";

type Lines = Arc<Mutex<Vec<TraceEvent>>>;

/// One door per process is the design, and the tools read its port: tests take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct World {
    _dir: tempfile::TempDir,
    work: std::path::PathBuf,
    port: u16,
    share: ShareFile,
    key: Key,
    lines: Lines,
}

/// A door, and a minting session whose export root is `<work>/shared` (max 64 bytes).
async fn world() -> World {
    assert!(SERIAL.try_lock().is_err(), "hold SERIAL first");
    let (sup, _) = Actor::spawn(None, Supervisor, SupervisorArgs::default())
        .await
        .unwrap();
    let addr = mur::door::open(sup).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("minter");
    std::fs::create_dir_all(work.join("shared/notes")).unwrap();
    std::fs::write(work.join("shared/notes/report.md"), "Q3: 42\n").unwrap();
    std::fs::write(work.join("shared/big.bin"), vec![b'x'; 65]).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "do not share\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), work.join("shared/link.txt"))
        .unwrap();
    let key = Key::random().unwrap();
    let share = ShareFile::new(Export {
        session_id: MINTER.into(),
        name: "outbox".into(),
        root: work.join("shared"),
        max_bytes: 64,
        max_ttl: Duration::from_secs(600),
        key: key.clone(),
        trace: Mutex::new(None),
    });
    World {
        _dir: dir,
        work,
        port: addr.port(),
        share,
        key,
        lines: Arc::new(Mutex::new(Vec::new())),
    }
}

impl World {
    fn audience(&self) -> String {
        format!("inbox@localhost:{}/{RECEIVER}", self.port)
    }

    fn mint(&self, path: &str, exp: u64, audience: &str) -> String {
        handle::mint(
            &self.key,
            &Payload {
                v: 1,
                iss: MINTER.into(),
                p: path.into(),
                exp,
                n: "ab".repeat(16),
            },
            audience,
        )
    }

    fn url(&self, session: &str, token: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{session}/resources/peer/{token}",
            self.port
        )
    }

    fn request(
        &self,
        tool: mur_actors::tool::ToolDecl,
        input: Value,
        workdir: &Path,
    ) -> ExecRequest {
        let lines = self.lines.clone();
        ExecRequest {
            session_id: MINTER.into(),
            tool: Arc::new(tool),
            input,
            workdir: workdir.to_path_buf(),
            records_dir: workdir.to_path_buf(),
            trace: Arc::new(move |e| lines.lock().unwrap().push(e)),
        }
    }

    fn lines_of(&self, kind: &str) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.event_type.as_str() == kind)
            .map(|e| Value::Object(e.fields()))
            .collect()
    }
}

fn later() -> u64 {
    mur_actors::ids::now_ms() + 60_000
}

async fn get(url: &str, audience: Option<&str>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut rq = reqwest::Client::new().get(url);
    if let Some(a) = audience {
        rq = rq.header("x-murmur-audience", a);
    }
    let r = rq.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap().to_vec())
}

async fn refused(url: &str, audience: Option<&str>) -> (u16, String) {
    let (status, _, body) = get(url, audience).await;
    let v: Value = serde_json::from_slice(&body).unwrap();
    (status, v["error"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_serves_a_handle_to_its_audience_and_refuses_everything_else() {
    let _turn = SERIAL.lock().await;
    let w = world().await;
    let aud = w.audience();
    let good = w.mint("notes/report.md", later(), &aud);

    let (status, headers, body) = get(&w.url(MINTER, &good), Some(&aud)).await;
    assert_eq!(status, 200);
    assert_eq!(body, b"Q3: 42\n");
    let want = format!(
        "\"sha256:{}\"",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"Q3: 42\n"))
    );
    assert_eq!(headers["etag"], want.as_str());
    assert_eq!(
        headers["x-murmur-handle-id"],
        handle::handle_id(&good).as_str()
    );
    // Not single-use: the same handle serves again, and the audience is case-insensitive.
    assert_eq!(
        get(&w.url(MINTER, &good), Some(&aud.to_uppercase()))
            .await
            .0,
        200
    );

    let cases = [
        (
            w.url(RECEIVER, &good),
            Some(aud.clone()),
            404,
            "no_peer_plane",
        ),
        (
            w.url(MINTER, "mh1.nope"),
            Some(aud.clone()),
            400,
            "malformed_handle",
        ),
        (w.url(MINTER, &good), None, 400, "missing_audience"),
        (
            w.url(MINTER, &good),
            Some(format!("mallory@localhost:{}/{RECEIVER}", w.port)),
            403,
            "handle_not_valid",
        ),
        (
            w.url(MINTER, &w.mint("notes/report.md", 1_000, &aud)),
            Some(aud.clone()),
            410,
            "handle_expired",
        ),
        (
            w.url(MINTER, &w.mint("../secret.txt", later(), &aud)),
            Some(aud.clone()),
            403,
            "outside_root",
        ),
        (
            w.url(MINTER, &w.mint("/etc/passwd", later(), &aud)),
            Some(aud.clone()),
            403,
            "outside_root",
        ),
        (
            w.url(MINTER, &w.mint("link.txt", later(), &aud)),
            Some(aud.clone()),
            403,
            "symlink_refused",
        ),
        (
            w.url(MINTER, &w.mint("notes", later(), &aud)),
            Some(aud.clone()),
            403,
            "not_a_regular_file",
        ),
        (
            w.url(MINTER, &w.mint("gone.md", later(), &aud)),
            Some(aud.clone()),
            404,
            "not_found",
        ),
        (
            w.url(MINTER, &w.mint("big.bin", later(), &aud)),
            Some(aud.clone()),
            413,
            "too_large",
        ),
    ];
    for (url, audience, status, code) in cases {
        assert_eq!(
            refused(&url, audience.as_deref()).await,
            (status, code.to_string()),
            "{url}"
        );
    }

    // A tampered payload keeps the shape but fails the MAC.
    let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
    let forged = Payload {
        v: 1,
        iss: MINTER.into(),
        p: "big.bin".into(),
        exp: later(),
        n: "00".repeat(16),
    };
    parts[1] = base64_url(&serde_json::to_vec(&forged).unwrap());
    let tampered = parts.join(".");
    assert_eq!(
        refused(&w.url(MINTER, &tampered), Some(&aud)).await,
        (403, "handle_not_valid".into())
    );

    // GET only.
    let post = reqwest::Client::new()
        .post(w.url(MINTER, &good))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status().as_u16(), 405);
    let v: Value = post.json().await.unwrap();
    assert_eq!(v["error"], "method_not_allowed");

    // The file is served as it is at redeem time: swapped for a symlink, it is refused.
    std::fs::remove_file(w.work.join("shared/notes/report.md")).unwrap();
    std::os::unix::fs::symlink(
        w.work.join("../secret.txt"),
        w.work.join("shared/notes/report.md"),
    )
    .unwrap();
    assert_eq!(
        refused(&w.url(MINTER, &good), Some(&aud)).await,
        (403, "symlink_refused".into())
    );
    let url = w.url(MINTER, &good);
    drop(w);
    // The session ended: its handles died with it.
    assert_eq!(
        refused(&url, Some(&aud)).await,
        (404, "no_peer_plane".into())
    );
    assert!(registry::global().lookup(MINTER).is_none());
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_file_refuses_paths_outside_the_root_before_contacting_the_peer() {
    let _turn = SERIAL.lock().await;
    let w = world().await;
    let peer = format!("localhost:{}/{RECEIVER}", w.port);
    let cases = [
        ("../secret.txt", "'..' would leave the export root"),
        (
            "/etc/passwd",
            "absolute paths are refused; give a path relative to the export root",
        ),
        ("%2e%2e/secret.txt", "'..' would leave the export root"),
        ("link.txt", "it is or passes through a symlink"),
        ("notes", "it is not a regular file"),
        (
            "big.bin",
            "it is 65 bytes, over the export's max_bytes of 64",
        ),
        ("nothing.md", "no such file under the export root"),
    ];
    for (path, why) in cases {
        let rq = w.request(
            provided::share_file(),
            json!({"path": path, "peer": peer}),
            &w.work,
        );
        let err = w.share.execute(rq).await.unwrap_err();
        assert_eq!(err.kind, ExecErrorKind::NotAllowed);
        assert_eq!(
            err.message,
            format!("'share-file' refused '{path}': {why}. Only files under the declared exports.peer_files.root may be shared."),
        );
    }
    let mint = w.lines_of("peer_handle_mint");
    assert_eq!(mint.len(), cases.len());
    assert_eq!(mint[0]["outcome"], "outside_root");
    assert_eq!(mint[3]["outcome"], "symlink_refused");
    assert_eq!(mint[5]["outcome"], "too_large");

    let bad_ttl = w.request(
        provided::share_file(),
        json!({"path": "notes/report.md", "peer": peer, "ttl": "soon"}),
        &w.work,
    );
    assert_eq!(
        w.share.execute(bad_ttl).await.unwrap_err().message,
        "'share-file' was given an unusable ttl: 'soon' is not a duration (use e.g. 90, 90s, 10m, 1h or 1d)"
    );
    // No session RECEIVER is live on this door: there is nobody to bind the handle to.
    let nobody = w.request(
        provided::share_file(),
        json!({"path": "notes/report.md", "peer": peer}),
        &w.work,
    );
    let err = w.share.execute(nobody).await.unwrap_err().message;
    assert!(
        err.starts_with(&format!(
            "peer_unreachable: localhost:{}/{RECEIVER} has no live session there",
            w.port
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_peer_file_stores_under_peer_in_and_reports_refusals() {
    let _turn = SERIAL.lock().await;
    let w = world().await;
    let port = registry::door_port().unwrap();
    let aud = format!("inbox@localhost:{port}/{RECEIVER}");
    let fetch = FetchPeerFile {
        session_id: RECEIVER.into(),
        name: "Inbox".into(),
        allow: vec!["localhost".into()],
    };
    let inbox = w.work.parent().unwrap().join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let peer = format!("localhost:{port}/{MINTER}");
    let token = w.mint("notes/report.md", later(), &aud);
    let id = handle::handle_id(&token);
    let rq = w.request(
        provided::fetch_peer_file(&fetch.allow),
        json!({"peer": peer, "handle": token}),
        &inbox,
    );
    let out = fetch.execute(rq).await.unwrap();
    let stored = format!("peer-in/{id}-report.md");
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"Q3: 42\n"));
    assert_eq!(
        out.text,
        format!(
            "Stored 7 bytes from {peer} at {stored}\n{}",
            json!({"path": stored, "bytes": 7, "sha256": sha, "peer": peer})
        )
    );
    assert!(
        !out.text.contains("Q3: 42"),
        "the contents never reach the model"
    );
    assert_eq!(
        std::fs::read_to_string(inbox.join(&stored)).unwrap(),
        "Q3: 42\n"
    );
    let fetched = w.lines_of("peer_file_fetch");
    assert_eq!(fetched[0]["outcome"], "ok");
    assert_eq!(fetched[0]["handle_id"], id.as_str());
    assert!(!serde_json::to_string(&fetched).unwrap().contains(&token));

    // Not in the allow list: refused before anything connects.
    let strict = FetchPeerFile {
        allow: vec!["localhost:1".into()],
        ..fetch_clone(&fetch)
    };
    let rq = w.request(
        provided::fetch_peer_file(&strict.allow),
        json!({"peer": peer, "handle": token}),
        &inbox,
    );
    assert_eq!(
        strict.execute(rq).await.unwrap_err().message,
        format!("network policy: '{peer}' not in capabilities.peer_fetch.allow")
    );
    // The minter's refusal comes back with its code.
    let expired = w.mint("notes/report.md", 1_000, &aud);
    let rq = w.request(
        provided::fetch_peer_file(&fetch.allow),
        json!({"peer": peer, "handle": expired}),
        &inbox,
    );
    assert_eq!(
        fetch.execute(rq).await.unwrap_err().message,
        format!("'fetch-peer-file' failed: {peer} refused the handle: handle_expired")
    );
    // Minted for someone else: this session's own audience does not match.
    let theirs = w.mint("notes/report.md", later(), "someone@localhost:1/ses_x");
    let rq = w.request(
        provided::fetch_peer_file(&fetch.allow),
        json!({"peer": peer, "handle": theirs}),
        &inbox,
    );
    assert_eq!(
        fetch.execute(rq).await.unwrap_err().message,
        format!("'fetch-peer-file' failed: {peer} refused the handle: handle_not_valid")
    );
    let outcomes: Vec<Value> = w
        .lines_of("peer_file_fetch")
        .iter()
        .map(|l| l["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            json!("ok"),
            json!("peer_not_allowed"),
            json!("handle_expired"),
            json!("handle_not_valid")
        ]
    );
}

fn fetch_clone(f: &FetchPeerFile) -> FetchPeerFile {
    FetchPeerFile {
        session_id: f.session_id.clone(),
        name: f.name.clone(),
        allow: f.allow.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_registers_its_export_while_it_runs_and_leaves_nothing_when_it_ends() {
    let _turn = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: lifecycle\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\nexports:\n  peer_files:\n    root: shared\ncapabilities:\n  shell:\n    allow: [bash, sleep]\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "turns:\n  - call: [{tool: bash, input: {command: 'sleep 0.5'}}]\n  - say: done\n",
    )
    .unwrap();
    let loaded = mur::manifest::load(&dir.path().join("murmur.yaml")).unwrap();
    let place = mur::capsule::Placement::root(dir.path(), None);
    let id = place.session_id.clone();
    let (spec, _) = mur::capsule::session_spec(&loaded, "go".into(), place).unwrap();
    assert!(
        registry::global().lookup(&id).is_some(),
        "registered when built"
    );
    let header = mur::launch::Header::default();
    let watch = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        registry::global().lookup(&id).is_some()
    };
    let (report, live_while_running) = tokio::join!(
        mur::launch::launch(spec, &header, SupervisorArgs::default()),
        watch
    );
    assert!(live_while_running, "live while running");
    let report = report.unwrap();
    assert_eq!(report.exit_status.as_str(), "ok");
    // The session's actors release the export as they stop, just after the report.
    let gone = async {
        while registry::global().lookup(&id).is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(5), gone)
            .await
            .is_ok(),
        "the export is gone once the session ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_match_its_etag_is_not_stored() {
    let _turn = SERIAL.lock().await;
    let w = world().await;
    // A misbehaving peer: its own listener, answering every redeem with a lying etag.
    let liar = axum::Router::new().route(
        "/{sid}/resources/peer/{handle}",
        axum::routing::get(|| async { ([("etag", "\"sha256:00\"")], "tampered") }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let liar_port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, liar).await });
    let fetch = FetchPeerFile {
        session_id: RECEIVER.into(),
        name: "inbox".into(),
        allow: vec!["localhost".into()],
    };
    let inbox = w.work.parent().unwrap().join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let peer = format!("localhost:{liar_port}/{MINTER}");
    let rq = w.request(
        provided::fetch_peer_file(&fetch.allow),
        json!({"peer": peer, "handle": w.mint("notes/report.md", later(), "x")}),
        &inbox,
    );
    assert_eq!(
        fetch.execute(rq).await.unwrap_err().message,
        format!(
            "'fetch-peer-file' failed: {peer} served an etag that does not describe its own body"
        )
    );
    assert!(!inbox.join("peer-in").exists());
    assert_eq!(w.lines_of("peer_file_fetch")[0]["outcome"], "etag_mismatch");
}

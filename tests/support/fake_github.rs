//! A fake GitHub API for artifact tests: axum on 127.0.0.1:0, on its own thread and runtime,
//! serving repositories (owner id), releases (latest and by tag), and release assets, with
//! faults (404, 500, truncated asset) and a request counter. Also helpers that make real
//! `.mur.zip` payloads and publish them with an `artifacts-index.json`, as a scope's source does.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{header, Request, Response, StatusCode};
use serde_json::{json, Value};

/// What a request for an asset (by file name) or a path should get instead of the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    NotFound,
    ServerError,
    /// The asset body is cut in half (the release still reports the full size).
    Truncated,
}

#[derive(Clone)]
struct Asset {
    id: u64,
    name: String,
    bytes: Vec<u8>,
}

#[derive(Clone)]
struct Release {
    tag: String,
    assets: Vec<Asset>,
}

#[derive(Default)]
struct Repo {
    owner_id: u64,
    releases: Vec<Release>,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, Repo>,
    faults: Vec<(String, Fault)>,
    next_id: u64,
    requests: Vec<String>,
    auth: Vec<Option<String>>,
}

/// A running fake.
pub struct FakeGithub {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn respond(status: StatusCode, body: Vec<u8>, ctype: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .unwrap()
}

fn not_found() -> Response<Body> {
    respond(
        StatusCode::NOT_FOUND,
        br#"{"message":"Not Found"}"#.to_vec(),
        "application/json",
    )
}

fn release_json(r: &Release) -> Value {
    json!({
        "tag_name": r.tag,
        "assets": r.assets.iter().map(|a| json!({"id": a.id, "name": a.name, "size": a.bytes.len()})).collect::<Vec<_>>()
    })
}

fn handle(state: &Mutex<State>, path: &str, auth: Option<String>) -> Response<Body> {
    let mut st = state.lock().unwrap();
    st.requests.push(path.to_string());
    st.auth.push(auth);
    for (needle, fault) in &st.faults {
        if path.contains(needle.as_str()) {
            match fault {
                Fault::NotFound => return not_found(),
                Fault::ServerError => {
                    return respond(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        b"boom".to_vec(),
                        "text/plain",
                    )
                }
                Fault::Truncated => {}
            }
        }
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if parts.len() < 3 || parts[0] != "repos" {
        return not_found();
    }
    let key = format!("{}/{}", parts[1], parts[2]).to_ascii_lowercase();
    let Some(repo) = st.repos.get(&key) else {
        return not_found();
    };
    match &parts[3..] {
        [] => respond(
            StatusCode::OK,
            json!({"full_name": key, "owner": {"id": repo.owner_id, "login": parts[1]}})
                .to_string()
                .into_bytes(),
            "application/json",
        ),
        ["releases", "latest"] => match repo.releases.last() {
            Some(r) => respond(
                StatusCode::OK,
                release_json(r).to_string().into_bytes(),
                "application/json",
            ),
            None => not_found(),
        },
        ["releases", "tags", tag] => match repo.releases.iter().find(|r| r.tag == *tag) {
            Some(r) => respond(
                StatusCode::OK,
                release_json(r).to_string().into_bytes(),
                "application/json",
            ),
            None => not_found(),
        },
        ["releases", "assets", id] => {
            let asset = repo
                .releases
                .iter()
                .flat_map(|r| &r.assets)
                .find(|a| a.id.to_string() == *id);
            match asset {
                Some(a) => {
                    let truncated = st
                        .faults
                        .iter()
                        .any(|(n, f)| *f == Fault::Truncated && a.name.contains(n.as_str()));
                    let body = if truncated {
                        a.bytes[..a.bytes.len() / 2].to_vec()
                    } else {
                        a.bytes.clone()
                    };
                    respond(StatusCode::OK, body, "application/octet-stream")
                }
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

impl FakeGithub {
    /// Starts the fake on 127.0.0.1 with an ephemeral port.
    pub fn start() -> FakeGithub {
        let state = Arc::new(Mutex::new(State {
            next_id: 1,
            ..State::default()
        }));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let app = axum::Router::new().fallback(move |req: Request<Body>| {
                    let st = st.clone();
                    let auth = req
                        .headers()
                        .get(header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    async move { handle(&st, req.uri().path(), auth) }
                });
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr = addr_rx.recv().unwrap();
        FakeGithub {
            base: format!("http://{addr}"),
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Adds (or re-owns) a repository.
    pub fn repo(&self, repo: &str, owner_id: u64) {
        let mut st = self.state.lock().unwrap();
        st.repos
            .entry(repo.to_ascii_lowercase())
            .or_default()
            .owner_id = owner_id;
    }

    /// Adds a release (the newest one is "latest") with assets `(file name, bytes)`.
    pub fn release(&self, repo: &str, tag: &str, assets: Vec<(String, Vec<u8>)>) {
        let mut st = self.state.lock().unwrap();
        let mut list = Vec::new();
        for (name, bytes) in assets {
            let id = st.next_id;
            st.next_id += 1;
            list.push(Asset { id, name, bytes });
        }
        st.repos
            .entry(repo.to_ascii_lowercase())
            .or_default()
            .releases
            .push(Release {
                tag: tag.into(),
                assets: list,
            });
    }

    /// Every request whose path contains `needle` gets `fault` from now on.
    pub fn fault(&self, needle: &str, fault: Fault) {
        self.state
            .lock()
            .unwrap()
            .faults
            .push((needle.into(), fault));
    }

    /// The Authorization header of every request so far.
    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().auth.clone()
    }

    /// Replaces the bytes of every asset named `file` (the index keeps the old digest).
    pub fn replace_asset(&self, file: &str, bytes: Vec<u8>) {
        let mut st = self.state.lock().unwrap();
        for repo in st.repos.values_mut() {
            for rel in &mut repo.releases {
                for a in rel.assets.iter_mut().filter(|a| a.name == file) {
                    a.bytes = bytes.clone();
                }
            }
        }
    }

    /// Paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Publishes artifacts of `scope` on `repo`: one release `tag` holding every payload and an
    /// `artifacts-index.json` listing them.
    pub fn publish(&self, repo: &str, scope: &str, tag: &str, artifacts: &[Published]) {
        let mut by_name: Vec<(String, Value)> = Vec::new();
        let mut assets = Vec::new();
        for a in artifacts {
            let file = match &a.platform {
                Some(p) => format!("{}-{}-{p}.mur.zip", a.name, a.version),
                None => format!("{}-{}.mur.zip", a.name, a.version),
            };
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&a.bytes));
            let version = json!({"version": a.version, "release": tag, "built_at_level": 1, "interfaces": a.interfaces,
                "assets": [{"file": file, "platform": a.platform, "sha256": sha}]});
            match by_name.iter_mut().find(|(n, _)| *n == a.name) {
                Some((_, v)) => v["versions"].as_array_mut().unwrap().insert(0, version),
                None => by_name.push((a.name.clone(), json!({"name": a.name, "runtime": a.runtime, "description": a.description, "tags": [], "versions": [version]}))),
            }
            assets.push((file, a.bytes.clone()));
        }
        by_name.sort_by(|a, b| a.0.cmp(&b.0));
        let index = json!({"schema_version": 2, "scope": scope, "artifacts": by_name.into_iter().map(|(_, v)| v).collect::<Vec<_>>()});
        assets.push((
            "artifacts-index.json".into(),
            serde_json::to_vec_pretty(&index).unwrap(),
        ));
        self.release(repo, tag, assets);
    }
}

/// One payload to publish.
pub struct Published {
    pub name: String,
    pub version: String,
    pub runtime: String,
    pub description: String,
    pub platform: Option<String>,
    /// The index's `interfaces` (a `murmur:` one marks a WebAssembly component).
    pub interfaces: Vec<String>,
    pub bytes: Vec<u8>,
}

/// The program of the test native tool: answers `{"status":"passed", …}`.
pub const TOOL_SCRIPT: &str = "#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"passed\",\"summary\":\"ok\",\"data\":\"edited\"}'\n";

/// The description of tool-edit in seed 001.
pub const TOOL_EDIT_DESCRIPTION: &str = "Replaces text in a file. Edits apply in order, each to the result of the one before; each old must match exactly once. All or nothing: if one fails, the file is unchanged and the error names its position, from 1. path is relative to the work folder; an absolute path is refused.\n";

/// A native tool payload (platform-independent shell script at `bin/<name>`).
pub fn tool_zip(name: &str, version: &str, description: &str) -> Vec<u8> {
    let manifest = format!(
        "name: {name}\nversion: \"{version}\"\nruntime: tool\nimplementation: native\ndescription: {}\ninput_schema: '{{\"type\":\"object\",\"properties\":{{\"path\":{{\"type\":\"string\"}}}}}}'\n",
        serde_json::Value::from(description)
    );
    mur::artifact::payload::zip_entries(vec![
        ("murmur.yaml".into(), manifest.into_bytes(), false),
        (format!("bin/{name}"), TOOL_SCRIPT.as_bytes().to_vec(), true),
    ])
    .unwrap()
}

/// A skill payload.
pub fn skill_zip(name: &str, version: &str, text: &str) -> Vec<u8> {
    let manifest = format!("name: {name}\nversion: \"{version}\"\nruntime: skill\n");
    mur::artifact::payload::zip_entries(vec![
        ("murmur.yaml".into(), manifest.into_bytes(), false),
        ("skill.md".into(), text.as_bytes().to_vec(), false),
    ])
    .unwrap()
}

/// A native hook payload.
pub fn hook_zip(name: &str, version: &str) -> Vec<u8> {
    let manifest = format!("name: {name}\nversion: \"{version}\"\nruntime: hook\nimplementation: native\nbinding: [on-tool-call]\ncommit_policy: deny\n");
    mur::artifact::payload::zip_entries(vec![
        ("murmur.yaml".into(), manifest.into_bytes(), false),
        (
            format!("bin/{name}"),
            b"#!/bin/sh\necho '{\"decision\":\"none\"}'\n".to_vec(),
            true,
        ),
    ])
    .unwrap()
}

/// A published tool.
pub fn published_tool(name: &str, version: &str, description: &str) -> Published {
    Published {
        name: name.into(),
        version: version.into(),
        runtime: "tool".into(),
        description: description.into(),
        platform: None,
        interfaces: Vec::new(),
        bytes: tool_zip(name, version, description),
    }
}

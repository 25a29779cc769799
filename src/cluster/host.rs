//! The node's host actor: starts child sessions for remote parents and sends their ends back.
//!
//! Each child runs as the root of its own actor tree (a kernel Supervisor of its own, as
//! `mur run` starts one), so it is staged, contained, traced and flushed exactly as a session
//! of this machine, and a crash of one child is that tree's alone. The capsule arrives as the
//! parent's `.mur.zip`; it runs only if its bytes hash to the pin the parent sent, and only if
//! its grants stay within the parent's (the parent checked both already; the node does not
//! trust it to have). Starting runs off the mailbox: many parents may start children at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mur_actors::delegation::{CapsuleResolver, ChildRequest};
use mur_actors::session::{ExitStatus, SessionReport};
use mur_actors::spec::SessionPaths;
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg, CRASHED_PREFIX};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::parent_store::ParentStore;
use super::wire::{
    to_json, EdgeMsg, EndReport, Hello, HostMsg, StartAnswer, StartRequest, TracePart,
    MAX_TRACE_BYTES, PROTOCOL_VERSION,
};

/// How the host is configured (`mur node`'s flags).
#[derive(Clone)]
pub struct HostArgs {
    /// The node's name.
    pub name: String,
    /// Most live children.
    pub capacity: u32,
    /// Where children's records, work folders and extracted capsules go.
    pub dir: PathBuf,
    /// How long a child's end waits for its parent to be reachable, and how long a parent may
    /// be gone before its children are canceled.
    pub grace: Duration,
    /// The book of live children, shared with the node's connection watcher.
    pub book: HostBook,
}

/// One hosted child, from the moment its slot is reserved.
struct Hosted {
    /// The parent's edge group (to cancel the children of a parent that is gone).
    edge_group: String,
    /// Its own tree's Supervisor (cancel it through it), once it started.
    supervisor: Option<ActorRef<SupervisorMsg>>,
    /// A cancel that came while it was starting: applied as soon as it runs.
    cancel: Option<String>,
}

impl Hosted {
    /// Cancel it now, or as soon as it has started.
    fn cancel(&mut self, reason: String) {
        match &self.supervisor {
            Some(sup) => {
                let _ = sup.send_message(SupervisorMsg::Shutdown { reason });
            }
            None => self.cancel = Some(reason),
        }
    }
}

/// What the host's tasks share: live children (started or starting), and one store per
/// parent (the capsules its children run and delegate to).
#[derive(Default)]
struct Book {
    live: HashMap<String, Hosted>,
    stores: HashMap<String, Arc<ParentStore>>,
}

/// The host actor.
pub struct Host;

/// The host's state.
pub struct HostState {
    args: HostArgs,
}

impl HostState {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.args.book.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[ractor::async_trait]
impl Actor for Host {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = HostArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<HostMsg>,
        args: HostArgs,
    ) -> Result<HostState, ActorProcessingErr> {
        ractor::pg::join(super::wire::HOST_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(HostState { args })
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        msg: HostMsg,
        state: &mut HostState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            HostMsg::Hello(_, reply) => {
                let live = state.book().live.len() as u32;
                let _ = reply.send(to_json(&Hello {
                    protocol: PROTOCOL_VERSION,
                    name: state.args.name.clone(),
                    capacity: state.args.capacity,
                    live,
                }));
            }
            HostMsg::Start(request, artifact, reply) => {
                let (args, book) = (state.args.clone(), state.args.book.0.clone());
                // The slot is booked here, before the next message: a cancel the parent sends
                // right behind its start (Ctrl-C, its deadline) then finds the child, and is
                // applied as soon as it runs. Booked in the start's own task, it could come too
                // early and be dropped, and the child would run with no one to stop it.
                match reserve(&args, &book, &request) {
                    Ok(req) => drop(tokio::spawn(start(args, book, req, artifact, reply))),
                    Err(refusal) => {
                        let _ = reply.send(to_json(&refusal));
                    }
                }
            }
            HostMsg::Cancel(session_id, reason) => {
                if let Some(h) = state.book().live.get_mut(&session_id) {
                    h.cancel(reason);
                }
            }
        }
        Ok(())
    }
}

/// The host's shared book, handed to the host at start and kept by the node's connection
/// watcher (to cancel the children of a parent that is gone).
#[derive(Clone, Default)]
pub struct HostBook(Arc<Mutex<Book>>);

impl HostBook {
    /// Cancel every child of the parent whose edge group is `edge_group`.
    pub fn cancel_children_of(&self, edge_group: &str) {
        let mut book = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for h in book.live.values_mut() {
            if h.edge_group == edge_group {
                h.cancel("the delegating parent's node connection was lost".into());
            }
        }
    }

    /// The edge groups of the parents with live children here.
    pub fn parents(&self) -> Vec<String> {
        let book = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut groups: Vec<String> = book.live.values().map(|h| h.edge_group.clone()).collect();
        groups.sort();
        groups.dedup();
        groups
    }
}

async fn start(
    args: HostArgs,
    book: Arc<Mutex<Book>>,
    req: StartRequest,
    artifact: Vec<u8>,
    reply: RpcReplyPort<String>,
) {
    let answer = match start_child(&args, &book, req, artifact).await {
        Ok(records) => StartAnswer::Started {
            records_dir: records.display().to_string(),
        },
        Err(refusal) => refusal,
    };
    let _ = reply.send(to_json(&answer));
}

/// Read a start request and book its child's slot (live from now on: a cancel finds it).
fn reserve(
    args: &HostArgs,
    book: &Arc<Mutex<Book>>,
    request: &str,
) -> Result<StartRequest, StartAnswer> {
    let req: StartRequest = serde_json::from_str(request).map_err(|e| {
        StartAnswer::Refused(format!(
            "node {}: a malformed start request: {e}",
            args.name
        ))
    })?;
    if req.protocol != PROTOCOL_VERSION {
        return Err(StartAnswer::Refused(format!(
            "node {} speaks mur cluster protocol {PROTOCOL_VERSION}, the parent {}",
            args.name, req.protocol
        )));
    }
    {
        let mut b = book.lock().unwrap_or_else(|p| p.into_inner());
        if b.live.len() >= args.capacity as usize {
            return Err(StartAnswer::Full(format!(
                "node {} is at capacity ({} live children, --capacity {})",
                args.name,
                b.live.len(),
                args.capacity
            )));
        }
        b.live.insert(
            req.session_id.clone(),
            Hosted {
                edge_group: req.edge_group.clone(),
                supervisor: None,
                cancel: None,
            },
        );
    }
    Ok(req)
}

/// Extract, resolve and start one booked child ([`reserve`]); the records folder on success.
async fn start_child(
    args: &HostArgs,
    book: &Arc<Mutex<Book>>,
    req: StartRequest,
    artifact: Vec<u8>,
) -> Result<PathBuf, StartAnswer> {
    let release = |book: &Arc<Mutex<Book>>, session_id: &str| {
        book.lock()
            .unwrap_or_else(|p| p.into_inner())
            .live
            .remove(session_id);
    };
    match launch_child(args, book, &req, artifact).await {
        Ok((supervisor, records, rx)) => {
            if let Some(h) = book
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .live
                .get_mut(&req.session_id)
            {
                h.supervisor = Some(supervisor.clone());
                if let Some(reason) = h.cancel.take() {
                    h.cancel(reason);
                }
            }
            let (args, book, req, dir) = (args.clone(), book.clone(), req.clone(), records.clone());
            tokio::spawn(async move {
                let report = rx.await.ok();
                send_end(&args, &req, report, &dir).await;
                supervisor.stop(None);
                release(&book, &req.session_id);
            });
            Ok(records)
        }
        Err(why) => {
            release(book, &req.session_id);
            Err(StartAnswer::Refused(why))
        }
    }
}

type Launched = (
    ActorRef<SupervisorMsg>,
    PathBuf,
    tokio::sync::oneshot::Receiver<SessionReport>,
);

/// Extract the capsule, build the child's spec (the grants checked again), and start it as
/// the root of a tree of its own.
async fn launch_child(
    args: &HostArgs,
    book: &Arc<Mutex<Book>>,
    req: &StartRequest,
    artifact: Vec<u8>,
) -> Result<Launched, String> {
    let what = format!("{}@{}", req.capsule, req.version);
    let store = {
        let mut b = book.lock().unwrap_or_else(|p| p.into_inner());
        b.stores
            .entry(req.edge_group.clone())
            .or_insert_with(|| {
                Arc::new(ParentStore::new(
                    &args.name,
                    &req.edge_group,
                    args.dir.join("capsules"),
                ))
            })
            .clone()
    };
    // The store checks the bytes against the pin as it files the capsule.
    store
        .add(&req.capsule, &req.version, &req.sha256, artifact)
        .await?;
    let records = session_dir(&args.dir, &req.session_id);
    let request = ChildRequest {
        capsule: req.capsule.clone(),
        version: req.version.clone(),
        task: req.task.clone(),
        session_id: req.session_id.clone(),
        delegation_id: req.delegation_id.clone(),
        parent_session_id: req.parent_session_id.clone(),
        parent_grants: req.parent_grants.clone(),
        paths: SessionPaths {
            workdir: records.join("work"),
            records_dir: records.clone(),
        },
        depth: req.depth,
    };
    let spec = store
        .resolve(&request)
        .await
        .map_err(|why| format!("node {}: {why}", args.name))?;
    let r = records.clone();
    tokio::task::spawn_blocking(move || std::fs::create_dir_all(&r))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| {
            format!(
                "node {}: cannot create {}: {e}",
                args.name,
                records.display()
            )
        })?;
    // The child delegates as it would at home: its capsules come from the same parent, its
    // tree has the root's bounds.
    let tree = SupervisorArgs {
        resolver: Some(store),
        max_depth: req.max_depth,
        max_children: req.max_children,
        placer: None,
    };
    let (sup, _) = Actor::spawn(None, Supervisor, tree)
        .await
        .map_err(|e| format!("node {}: cannot start a supervisor: {e}", args.name))?;
    let started = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(spec),
        reply
    });
    match started {
        Ok(Ok(rx)) => Ok((sup, records, rx)),
        Ok(Err(why)) => {
            sup.stop(None);
            Err(format!(
                "the sub-capsule '{what}' could not start on node {}: {why}",
                args.name
            ))
        }
        Err(e) => {
            sup.stop(None);
            Err(format!(
                "node {}: the runtime did not answer: {e}",
                args.name
            ))
        }
    }
}

/// Where a hosted child's records go on the node.
pub fn session_dir(dir: &Path, session_id: &str) -> PathBuf {
    dir.join("sessions").join(session_id)
}

/// The traces of a hosted child's records folder `dir`, one after another: its own, then each
/// session it delegated to here (`children/<ses>/trace.jsonl`, and theirs below), parents
/// before their children. A trace that cannot be read is left out.
fn read_traces(dir: &Path) -> (Vec<TracePart>, Vec<u8>) {
    let mut parts = Vec::new();
    let mut bytes = Vec::new();
    let mut folders = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, rel)) = folders.pop() {
        if let Ok(trace) = std::fs::read(folder.join("trace.jsonl")) {
            parts.push(TracePart {
                path: format!("{rel}trace.jsonl"),
                len: trace.len() as u64,
            });
            bytes.extend_from_slice(&trace);
        }
        let Ok(entries) = std::fs::read_dir(folder.join("children")) else {
            continue;
        };
        let mut kids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("ses_"))
            .collect();
        kids.sort_unstable_by(|a, b| b.cmp(a));
        for k in kids {
            folders.push((
                folder.join("children").join(&k),
                format!("{rel}children/{k}/"),
            ));
        }
    }
    (parts, bytes)
}

/// Send a child's end, with its trace, to the parent's edge; wait for the parent to be
/// reachable for up to the grace period.
async fn send_end(args: &HostArgs, req: &StartRequest, report: Option<SessionReport>, dir: &Path) {
    let report = report.unwrap_or_else(|| SessionReport {
        session_id: req.session_id.clone(),
        exit_status: ExitStatus::Failed,
        result: format!("{CRASHED_PREFIX}its tree stopped without a report"),
        totals: Default::default(),
        duration_ms: 0,
        trace_error: None,
    });
    let crashed = (report.exit_status == ExitStatus::Failed)
        .then(|| {
            report
                .result
                .strip_prefix(CRASHED_PREFIX)
                .map(str::to_string)
        })
        .flatten();
    let mut end = EndReport::of(&report, crashed);
    let path = dir.join("trace.jsonl");
    let d = dir.to_path_buf();
    let (parts, trace) = tokio::task::spawn_blocking(move || read_traces(&d))
        .await
        .unwrap_or_default();
    let trace = if trace.len() > MAX_TRACE_BYTES {
        end.trace_left_at = Some(format!("{}:{}", args.name, path.display()));
        Vec::new()
    } else {
        end.traces = parts;
        trace
    };
    let deadline = tokio::time::Instant::now() + args.grace;
    loop {
        if let Some(edge) = ractor::pg::get_members(&req.edge_group).into_iter().next() {
            let edge: ActorRef<EdgeMsg> = edge.into();
            if edge
                .send_message(EdgeMsg::Ended(to_json(&end), trace.clone()))
                .is_ok()
            {
                return;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "the parent of {} is unreachable; its trace stays at {}",
                req.session_id,
                path.display()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

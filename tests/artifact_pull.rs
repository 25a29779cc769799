//! The in-session pull service against real stores, a real murmur.lock and the fake GitHub:
//! seed 001 step 5 and 6 literally, every refusal prefix, and concurrency.

#[path = "support/fake_github.rs"]
mod fake_github;

use std::path::PathBuf;

use fake_github::*;
use mur::artifact::config::{SourcesConfig, MURMUR_SCOPE_REPO};
use mur::artifact::{unpack, PullService, Store};
use mur::manifest::{ArtifactName, ArtifactRuntime};
use mur_actors::artifact_error::ArtifactErrorKind;
use mur_actors::registry::{ArtifactRequest, ArtifactSource, PullOutcome};
use mur_actors::tool::{ToolKind, ToolOrigin, RUNTIME_ORIGIN_MARKER};
use serde_json::{json, Value};

const SES: &str = "ses_019ed2af76b57c42912b612f07dd4d51";

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
    records: PathBuf,
    fake: FakeGithub,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("coding-agent");
    let home = tmp.path().join("home");
    let records = project.join("workdir").join(SES);
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&records).unwrap();
    std::fs::write(
        project.join("murmur.yaml"),
        "name: coding-agent\nversion: \"0.1.0\"\n",
    )
    .unwrap();
    let fake = FakeGithub::start();
    fake.repo(MURMUR_SCOPE_REPO, 190196424);
    fake.publish(
        MURMUR_SCOPE_REPO,
        "murmur",
        "v0.25.0",
        &[published_tool("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION)],
    );
    Env {
        _tmp: tmp,
        project,
        home,
        records,
        fake,
    }
}

fn sources(e: &Env) -> SourcesConfig {
    SourcesConfig {
        api_base: e.fake.base.clone(),
        sources: Vec::new(),
        murmur_token: None,
    }
}

fn install_cap(block: &str) -> Option<mur::manifest::InstallCap> {
    let text = format!("name: t\nversion: \"0.1.0\"\ncapabilities:\n  install:\n{block}");
    let (m, _) = mur::manifest::parse_str(&text).unwrap_or_else(|e| panic!("{e:?}"));
    m.capabilities.install
}

fn service(e: &Env, block: &str) -> PullService {
    PullService::new(install_cap(block), &e.project, &e.home, sources(e))
}

const SEED_GRANT: &str = "    tool: [\"murmur/tool-*\"]\n    from: [stores, sources]\n";
const STORES_GRANT: &str = "    tool: [\"murmur/tool-*\"]\n";

fn req(e: &Env, artifact: &str) -> ArtifactRequest {
    ArtifactRequest {
        session_id: SES.into(),
        records_dir: e.records.clone(),
        input: json!({"artifact": artifact}),
    }
}

fn put(store: &Store, scope: &str, bytes: &[u8], platform: Option<&str>) {
    let p = unpack(bytes, "test").unwrap();
    let name = ArtifactName::from_parts(scope, p.manifest.name()).unwrap();
    store.put(&name, bytes, &p, platform, None).unwrap();
}

fn lock_text(e: &Env) -> Option<String> {
    std::fs::read_to_string(e.project.join("murmur.lock")).ok()
}

fn sha(bytes: &[u8]) -> String {
    mur::artifact::store::sha256_hex(bytes)
}

/// The text of a refused pull; a refusal of an upstream class leads with its kind's code.
async fn refused(svc: &PullService, r: ArtifactRequest) -> String {
    match svc.pull(r).await {
        Err(e) => {
            let text = e.to_string();
            if e.kind.is_prefixed() {
                assert!(text.starts_with(&format!("{}: ", e.kind.code())), "{text}");
            }
            text
        }
        Ok(o) => panic!("expected a refusal, got {o:?}"),
    }
}

#[tokio::test]
async fn seed_001_list_pull_pin_and_remove_literally() {
    let e = env();
    let svc = service(&e, SEED_GRANT);

    // The listing: exactly the seed's JSON, and nothing written.
    let PullOutcome::Listing(listing) = svc.pull(req(&e, "murmur/tool-*")).await.unwrap() else {
        panic!("not a listing")
    };
    let seed_listing = r#"{"pattern": "murmur/tool-*", "matches": [{"artifact": "murmur/tool-edit", "runtime": "tool", "description": "Replaces text in a file. Edits apply in order, each to the result of the one before; each old must match exactly once. All or nothing: if one fails, the file is unchanged and the error names its position, from 1. path is relative to the work folder; an absolute path is refused.\n", "versions": ["0.2.0"], "newest_fitting": "0.2.0", "held_in": ["github:murmur-nexus/default-artifacts"]}], "omitted": 0, "notes": []}"#;
    let seed: Value = serde_json::from_str(seed_listing).unwrap();
    assert_eq!(listing.to_string(), seed.to_string());
    assert!(lock_text(&e).is_none(), "a listing writes nothing");
    assert!(!e.records.join("tools").exists());

    // The pull by name: newest fitting version, from the source.
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "murmur/tool-edit")).await.unwrap() else {
        panic!("not a pull")
    };
    assert_eq!(
        p.result.to_string(),
        r#"{"artifact":"murmur/tool-edit","fetched_from":"github:murmur-nexus/default-artifacts","runtime":"tool","tool_name":"tool-edit","version":"0.2.0"}"#
    );
    assert_eq!(
        (p.owner_id, p.origin.as_str()),
        (Some(190196424), "runtime")
    );
    assert_eq!(p.tool.origin, ToolOrigin::Pulled);
    assert!(p
        .tool
        .spec()
        .description
        .unwrap()
        .starts_with(&format!("{RUNTIME_ORIGIN_MARKER} Replaces text")));
    let staged = e.records.join("tools/tool-edit");
    assert_eq!(
        p.tool.kind,
        ToolKind::Native {
            entrypoint: staged.join("bin/tool-edit"),
            deadline: std::time::Duration::from_secs(600)
        }
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(staged.join("bin/tool-edit"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the staged program is executable");
    assert!(std::fs::read_to_string(staged.join("murmur.yaml"))
        .unwrap()
        .contains("name: tool-edit"));
    // The staged program really runs.
    let out = std::process::Command::new(staged.join("bin/tool-edit"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"passed\""));

    // from: [stores, sources] writes to no store.
    assert!(!e.project.join(".murmur/artifacts").exists());
    assert!(!e.home.join("artifacts").exists());

    // Step 6: the pin, byte for byte.
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    let seed_pin = "  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"<sha256>\"\n    origin: runtime\n    session: ses_019ed2af76b57c42912b612f07dd4d51\n    owner_id: 190196424\n";
    let expected = format!(
        "lock_version: 3\nartifacts:\n{}",
        seed_pin.replace("<sha256>", &sha(&zip))
    );
    assert_eq!(lock_text(&e).unwrap(), expected);

    // Removal by tool name.
    let removed = svc.remove(req(&e, "tool-edit")).await.unwrap();
    assert_eq!(
        removed.result.to_string(),
        r#"{"artifact":"murmur/tool-edit","removed":true}"#
    );
    assert_eq!(removed.tool_name, "tool-edit");
    assert_eq!(lock_text(&e).unwrap(), "lock_version: 3\nartifacts: []\n");
    assert!(!staged.exists(), "the staged folder is deleted");
}

#[tokio::test]
async fn stores_only_grant_never_touches_the_network() {
    let e = env();
    let project_store = Store::project(&e.project);
    put(
        &project_store,
        "murmur",
        &tool_zip("tool-edit", "0.1.0", "old"),
        None,
    );
    put(
        &project_store,
        "murmur",
        &tool_zip("tool-edit", "0.2.0", "new"),
        None,
    );
    put(
        &Store::global(&e.home),
        "murmur",
        &tool_zip("tool-grep", "1.0.0", "grep"),
        None,
    );
    e.fake.fault("/", Fault::ServerError);
    let svc = service(&e, STORES_GRANT);

    let PullOutcome::Listing(l) = svc.pull(req(&e, "murmur/*")).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        l.to_string(),
        r#"{"pattern":"murmur/*","matches":[{"artifact":"murmur/tool-edit","runtime":"tool","description":"new","versions":["0.2.0","0.1.0"],"newest_fitting":"0.2.0","held_in":["project store"]},{"artifact":"murmur/tool-grep","runtime":"tool","description":"grep","versions":["1.0.0"],"newest_fitting":"1.0.0","held_in":["global store"]}],"omitted":0,"notes":[]}"#
    );
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "murmur/tool-edit@0.1.0")).await.unwrap() else {
        panic!()
    };
    assert_eq!(p.result["fetched_from"], "project store");
    assert_eq!(p.result["version"], "0.1.0");
    let PullOutcome::Pulled(g) = svc.pull(req(&e, "murmur/tool-grep")).await.unwrap() else {
        panic!()
    };
    assert_eq!(g.result["fetched_from"], "global store");
    assert_eq!(g.owner_id, None);
    assert!(
        e.fake.requests().is_empty(),
        "from: [stores] must not touch the network: {:?}",
        e.fake.requests()
    );
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-x")).await,
        "not-found: no version of 'murmur/tool-x' is in the project store or the global store, and capabilities.install.from is [stores], so this capsule fetches from no source"
    );
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-edit@9.9.9")).await,
        "not-found: 'murmur/tool-edit@9.9.9' is in neither the project store nor the global store, and capabilities.install.from is [stores], so this capsule fetches from no source"
    );
}

#[tokio::test]
async fn with_the_source_down_stores_still_answer_and_the_listing_notes_it() {
    let e = env();
    put(
        &Store::project(&e.project),
        "murmur",
        &tool_zip("tool-edit", "0.1.0", "held"),
        None,
    );
    e.fake.fault("/releases", Fault::ServerError);
    let svc = service(&e, SEED_GRANT);
    let PullOutcome::Listing(l) = svc.pull(req(&e, "murmur/tool-*")).await.unwrap() else {
        panic!()
    };
    assert_eq!(l["matches"][0]["held_in"], json!(["project store"]));
    let note = l["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("github:murmur-nexus/default-artifacts could not be consulted: "),
        "{note}"
    );
    assert!(note.contains("HTTP 500"), "{note}");
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "murmur/tool-edit")).await.unwrap() else {
        panic!()
    };
    assert_eq!(p.result["fetched_from"], "project store");
}

/// Asserts a refusal wrote nothing: lock bytes as before, no staged folder, no store.
fn assert_nothing_written(e: &Env, lock_before: &Option<String>) {
    assert_eq!(&lock_text(e), lock_before, "the lock must be untouched");
    let tools = e.records.join("tools");
    let staged: Vec<_> = std::fs::read_dir(&tools)
        .map(|r| r.flatten().map(|d| d.file_name()).collect())
        .unwrap_or_default();
    assert!(staged.is_empty(), "nothing staged: {staged:?}");
}

#[tokio::test]
async fn every_refusal_has_its_prefix_and_writes_nothing() {
    let e = env();
    std::fs::write(e.project.join("murmur.lock"), "lock_version: 3\nartifacts:\n  - name: ana/tool-x\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"aa\"\n    origin: operator\n").unwrap();
    let before = lock_text(&e);
    let store = Store::project(&e.project);
    put(&store, "murmur", &hook_zip("hook-guard", "1.0.0"), None);
    put(
        &store,
        "murmur",
        &skill_zip("style", "1.0.0", "# Style\nbe terse"),
        None,
    );
    let host = mur::artifact::version::host_platform();
    let other = mur::artifact::version::SUPPORTED_PLATFORMS
        .iter()
        .find(|p| **p != host)
        .unwrap();
    put(
        &store,
        "murmur",
        &tool_zip("tool-other", "1.0.0", "x"),
        Some(other),
    );
    let no_payload = format!("does-not-fit: 'murmur/tool-other@1.0.0' has no payload for {host}");
    let mut hook = published_tool("hook-net", "1.0.0", "net guard");
    hook.runtime = "hook".into();
    e.fake.publish(
        MURMUR_SCOPE_REPO,
        "murmur",
        "v0.26.0",
        &[
            published_tool("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION),
            hook,
        ],
    );
    let none = PullService::new(None, &e.project, &e.home, sources(&e));
    let svc = service(
        &e,
        "    tool: [\"murmur/*\"]\n    from: [stores, sources]\n",
    )
    .with_declared(vec![(
        ArtifactName::parse("ana/tool-held").unwrap(),
        ArtifactRuntime::Tool,
    )]);

    let cases: Vec<(&PullService, &str, &str)> = vec![
        (&none, "murmur/tool-edit", "not-granted: this capsule declares no capabilities.install, so pulling 'murmur/tool-edit' is refused"),
        (&none, "murmur/tool-*", "not-granted: this capsule declares no capabilities.install, so listing 'murmur/tool-*' is refused"),
        (&svc, "tool-edit", "not-granted: 'tool-edit' is not a full artifact name: an artifact is named <scope>/<name>; name it with its scope: 'murmur/tool-edit' for a Murmur default artifact, '<owner>/tool-edit' for one published from github.com/<owner>, or 'local/tool-edit' for one installed from a .mur.zip file"),
        (&svc, "murmur/x@../y", "not-granted: '../y' is not an artifact version (it must be one path segment); capabilities.install reaches only what the session's registry holds under 'murmur/x'"),
        (&svc, "ana/tool-y", "not-granted: 'ana/tool-y' matches no capabilities.install entry (skill: <none>; tool: murmur/*)"),
        (&svc, "ana/*", "not-granted: 'ana/*' reaches no name capabilities.install grants (skill: <none>; tool: murmur/*)"),
        (&svc, "murmur/tool-held", "not-granted: 'murmur/tool-held' has the tool name 'tool-held', which 'ana/tool-held' already holds in this session; remove that one first or pull another artifact"),
        (&svc, "murmur/hook-guard", "not-granted: 'murmur/hook-guard' is a 'hook' artifact (native payload); capabilities.install grants only skills and tools"),
        (&svc, "murmur/hook-net", "not-granted: 'murmur/hook-net' is a 'hook' artifact (github:murmur-nexus/default-artifacts's index); capabilities.install grants only skills and tools"),
        (&svc, "murmur/style", "not-granted: 'murmur/style' is a skill, and capabilities.install.skill does not name it (skill: <none>)"),
        (&svc, "murmur/pull-artifact", "not-granted: [E-CAP-013] artifact 'murmur/pull-artifact' has the tool name 'pull-artifact', which collides with a tool the runtime provides itself; the reserved names are share-file, fetch-peer-file, delegate-task, submit-plan, pull-artifact, remove-artifact"),
        (&svc, "murmur/tool-edit@0.9.0", "not-found: 'murmur/tool-edit@0.9.0' is in neither store, and the index of github:murmur-nexus/default-artifacts lists murmur/tool-edit at 0.2.0"),
        (&svc, "murmur/tool-zzz@1.0.0", "not-found: 'murmur/tool-zzz@1.0.0' is in neither store, and the index of github:murmur-nexus/default-artifacts lists no artifact 'tool-zzz'"),
        (&svc, "murmur/tool-other@1.0.0", &no_payload),
    ];
    for (s, input, want) in cases {
        assert_eq!(refused(s, req(&e, input)).await, want, "input {input}");
        assert_nothing_written(&e, &before);
    }
    // Bad inputs.
    let mut r = req(&e, "x");
    r.input = json!("murmur/tool-edit");
    assert_eq!(
        refused(&svc, r).await,
        "'pull-artifact' expects a JSON object as its input"
    );
    let mut r = req(&e, "x");
    r.input = json!({"artifact": ""});
    assert_eq!(
        refused(&svc, r).await,
        "'pull-artifact' requires a non-empty 'artifact'"
    );
    // A reserved name is refused before anything is resolved: no request reached the source.
    let fresh = env();
    let s2 = service(&fresh, "    tool: [\"*\"]\n    from: [stores, sources]\n");
    assert!(refused(&s2, req(&fresh, "murmur/delegate-task"))
        .await
        .starts_with("not-granted: [E-CAP-013]"));
    assert!(fresh.fake.requests().is_empty());
}

#[tokio::test]
async fn hash_mismatch_truncation_and_server_errors_are_not_fetched() {
    let e = env();
    let store = Store::project(&e.project);
    put(&store, "murmur", &tool_zip("tool-a", "1.0.0", "a"), None);
    std::fs::write(
        store.root.join("murmur/tool-a/1.0.0/tool-a-1.0.0.sha256"),
        "00".repeat(32),
    )
    .unwrap();
    let svc = service(&e, SEED_GRANT);
    let r = refused(&svc, req(&e, "murmur/tool-a@1.0.0")).await;
    assert!(r.starts_with("not-fetched: artifact integrity check failed for murmur/tool-a@1.0.0: the reported hash does not match the bytes"), "{r}");

    e.fake.fault("tool-edit-0.2.0.mur.zip", Fault::Truncated);
    let r = refused(&svc, req(&e, "murmur/tool-edit@0.2.0")).await;
    assert!(
        r.starts_with("not-fetched: artifact integrity check failed for murmur/tool-edit@0.2.0"),
        "{r}"
    );
    assert!(r.contains("truncated"), "{r}");

    let e2 = env();
    e2.fake.fault("/releases/latest", Fault::ServerError);
    let r = refused(&service(&e2, SEED_GRANT), req(&e2, "murmur/tool-edit")).await;
    assert_eq!(r, "not-fetched: github:murmur-nexus/default-artifacts did not answer (latest release): HTTP 500");
    let e3 = env();
    e3.fake.fault("/releases/tags/", Fault::NotFound);
    let r = refused(&service(&e3, SEED_GRANT), req(&e3, "murmur/tool-edit")).await;
    assert_eq!(
        r,
        "not-fetched: github:murmur-nexus/default-artifacts has no release v0.25.0 (HTTP 404)"
    );
    for env in [&e, &e2, &e3] {
        assert_nothing_written(env, &None);
    }
}

#[tokio::test]
async fn an_owner_that_differs_from_the_pin_is_refused() {
    let e = env();
    e.fake.repo("Ana/tools", 222);
    e.fake.publish(
        "Ana/tools",
        "ana",
        "v1",
        &[published_tool("tool-fmt", "1.0.0", "fmt")],
    );
    let lock = "lock_version: 3\nartifacts:\n  - name: ana/tool-old\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"aa\"\n    origin: operator\n    owner_id: 111\n";
    std::fs::write(e.project.join("murmur.lock"), lock).unwrap();
    let mut src = sources(&e);
    src.sources = mur::artifact::config::SourcesConfig::parse(
        "registry:\n  sources:\n    - repo: Ana/tools\n",
        "c",
    )
    .unwrap()
    .sources;
    let svc = PullService::new(
        install_cap("    tool: [\"ana/*\"]\n    from: [stores, sources]\n"),
        &e.project,
        &e.home,
        src,
    );
    let r = refused(&svc, req(&e, "ana/tool-fmt")).await;
    assert!(
        r.starts_with("not-fetched: [E-REG-010] ana/tool-fmt@1.0.0 (github:Ana/tools) records GitHub account id 222 as the owner of scope 'ana', and murmur.lock records owner id 111 for it (entry ana/tool-old); hint: "),
        "{r}"
    );
    assert_eq!(lock_text(&e).unwrap(), lock);
    // Refused before the payload was fetched: its release was never asked for.
    assert!(
        !e.fake
            .requests()
            .iter()
            .any(|p| p.contains("/releases/tags/v1")),
        "{:?}",
        e.fake.requests()
    );

    // The murmur scope must be owned by murmur-nexus's account.
    let e2 = env();
    e2.fake.repo(MURMUR_SCOPE_REPO, 5);
    let r = refused(&service(&e2, SEED_GRANT), req(&e2, "murmur/tool-edit")).await;
    assert!(r.starts_with("not-fetched: [E-REG-010] murmur/tool-edit@0.2.0 (github:murmur-nexus/default-artifacts) records GitHub account id 5"), "{r}");
}

#[tokio::test]
async fn an_invalid_lock_refuses_the_pull_and_is_left_as_it_was() {
    let e = env();
    std::fs::write(
        e.project.join("murmur.lock"),
        "lock_version: 1\nartifacts: []\n",
    )
    .unwrap();
    let r = refused(&service(&e, SEED_GRANT), req(&e, "murmur/tool-edit")).await;
    assert!(
        r.starts_with("failed to read murmur.lock: invalid murmur.lock at "),
        "{r}"
    );
    assert!(
        r.ends_with("murmur.lock: unsupported lock_version 1 (expected 3)"),
        "{r}"
    );
    assert_eq!(lock_text(&e).unwrap(), "lock_version: 1\nartifacts: []\n");
}

#[tokio::test]
async fn removal_refusals_and_unknown_names() {
    let e = env();
    std::fs::write(e.project.join("murmur.lock"), "lock_version: 3\nartifacts:\n  - name: murmur/tool-op\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"aa\"\n    origin: operator\n").unwrap();
    let before = lock_text(&e);
    let svc = service(&e, SEED_GRANT).with_declared(vec![
        (
            ArtifactName::parse("murmur/tool-decl").unwrap(),
            ArtifactRuntime::Tool,
        ),
        (
            ArtifactName::parse("murmur/guard").unwrap(),
            ArtifactRuntime::Hook,
        ),
    ]);
    let cases = [
        ("murmur/tool-decl", "not-removable: 'murmur/tool-decl' is declared in murmur.yaml; an artifact the operator declared stays for the life of the session"),
        ("tool-decl", "not-removable: 'murmur/tool-decl' is declared in murmur.yaml; an artifact the operator declared stays for the life of the session"),
        ("murmur/guard", "not-removable: 'murmur/guard' is a hook; hooks and drivers are fixed at launch and cannot be removed while the session runs"),
        ("murmur/tool-op", "not-removable: murmur.lock pins 'murmur/tool-op' with origin: operator; only an artifact this capsule pulled (origin: runtime) can be removed"),
        ("murmur/tool-none", "not-removable: murmur.lock has no entry for 'murmur/tool-none', so nothing records that this capsule pulled it"),
    ];
    for (input, want) in cases {
        match svc.remove(req(&e, input)).await {
            Err(e) => {
                assert_eq!(e.kind, ArtifactErrorKind::NotRemovable);
                assert_eq!(e.to_string(), want);
            }
            Ok(r) => panic!("{input}: expected refusal, got {:?}", r.result),
        }
        assert_eq!(lock_text(&e), before);
    }
    let r = svc.remove(req(&e, "tool-nothing")).await.unwrap();
    assert_eq!(
        r.result.to_string(),
        r#"{"artifact":"tool-nothing","removed":false}"#
    );
}

#[tokio::test]
async fn a_pull_of_an_operator_pinned_version_keeps_operator() {
    let e = env();
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    put(&Store::project(&e.project), "murmur", &zip, None);
    let lock = format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n", sha(&zip));
    std::fs::write(e.project.join("murmur.lock"), &lock).unwrap();
    let PullOutcome::Pulled(p) = service(&e, STORES_GRANT)
        .pull(req(&e, "murmur/tool-edit"))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(p.origin, "operator");
    assert_eq!(p.tool.origin, ToolOrigin::Operator);
    assert_eq!(lock_text(&e).unwrap(), lock);
    // A different version than the pin is a conflict and writes nothing.
    put(
        &Store::project(&e.project),
        "murmur",
        &tool_zip("tool-edit", "0.3.0", "n"),
        None,
    );
    let e_records = e.records.join("tools/tool-edit");
    std::fs::remove_dir_all(&e_records).unwrap();
    let r = refused(
        &service(&e, STORES_GRANT),
        req(&e, "murmur/tool-edit@0.3.0"),
    )
    .await;
    assert_eq!(r, "murmur.lock conflict for 'murmur/tool-edit': pinned murmur/tool-edit@0.2.0, but murmur/tool-edit@0.3.0 was resolved — refusing to override a pinned artifact at runtime");
    assert!(!e_records.exists());
}

#[test]
fn two_processes_pulling_different_tools_at_once_are_both_pinned() {
    let e = env();
    let store = Store::project(&e.project);
    let names: Vec<String> = (0..8).map(|i| format!("tool-{i}")).collect();
    for n in &names {
        put(&store, "murmur", &tool_zip(n, "1.0.0", n), None);
    }
    // Each thread has its own service and runtime and opens the lock on its own: the only
    // thing that serializes them is the flock, as between two processes.
    std::thread::scope(|s| {
        for (i, n) in names.iter().enumerate() {
            let (project, home, base) = (e.project.clone(), e.home.clone(), e.fake.base.clone());
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let svc = PullService::new(
                    install_cap(STORES_GRANT),
                    &project,
                    &home,
                    SourcesConfig {
                        api_base: base,
                        sources: vec![],
                        murmur_token: None,
                    },
                );
                let r = ArtifactRequest {
                    session_id: format!("ses_{i:032}"),
                    records_dir: project.join(format!("workdir/s{i}")),
                    input: json!({"artifact": format!("murmur/{n}")}),
                };
                rt.block_on(svc.pull(r)).unwrap();
            });
        }
    });
    let lock = mur::artifact::lock::read_lock(&e.project).unwrap();
    let mut pinned: Vec<String> = lock
        .entries
        .iter()
        .map(|x| x.name.name().to_string())
        .collect();
    pinned.sort();
    assert_eq!(pinned, names);
    assert!(lock
        .entries
        .iter()
        .all(|x| x.origin == mur::artifact::Origin::Runtime));
    let leftovers: Vec<_> = std::fs::read_dir(&e.project)
        .unwrap()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn tool_declarations_name_the_grant() {
    let cap = install_cap("    tool: [\"murmur/tool-*\"]\n    skill: [\"ana/style-*\"]\n    from: [stores, sources]\n").unwrap();
    let pull = mur::artifact::pull_tool_decl(&cap);
    assert_eq!(
        (pull.name.as_str(), pull.version.as_str()),
        ("pull-artifact", "0.0.0")
    );
    assert_eq!(pull.kind, ToolKind::Runtime);
    assert_eq!(pull.origin, ToolOrigin::Provided);
    assert!(pull.description.contains("This capsule may pull skills matching: ana/style-*; tools matching: murmur/tool-*; from: stores, sources."));
    assert_eq!(
        pull.input_schema,
        json!({"type":"object","properties":{"artifact":{"type":"string"}},"required":["artifact"]})
    );
    let remove = mur::artifact::remove_tool_decl(&cap);
    assert_eq!(remove.name, "remove-artifact");
    assert_eq!(remove.input_schema, pull.input_schema);
}

#[tokio::test]
async fn skills_are_pulled_under_the_skill_grant_and_removed_by_full_name() {
    let e = env();
    put(
        &Store::global(&e.home),
        "ana",
        &skill_zip("style-terse", "1.2.0", "\n# Write tersely\nNo filler."),
        None,
    );
    let svc = service(&e, "    skill: [\"ana/style-*\"]\n");
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "ana/style-terse")).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        p.result.to_string(),
        r#"{"artifact":"ana/style-terse","fetched_from":"global store","runtime":"skill","tool_name":"style-terse","version":"1.2.0"}"#
    );
    assert_eq!(
        p.tool.kind,
        ToolKind::Skill {
            path: e.records.join("tools/style-terse/skill.md")
        }
    );
    assert_eq!(p.tool.description, "Write tersely");
    // Another session (another service: nothing remembered) cannot remove this session's pin.
    let other = service(&e, "    skill: [\"ana/style-*\"]\n");
    let mut r = req(&e, "ana/style-terse");
    r.session_id = "ses_other".into();
    assert_eq!(other.remove(r).await.unwrap().result["removed"], false);
    // The pulling session can, even through a fresh service: the pin names it.
    let r = other.remove(req(&e, "ana/style-terse")).await.unwrap();
    assert_eq!(
        r.result.to_string(),
        r#"{"artifact":"ana/style-terse","removed":true}"#
    );
    assert_eq!(lock_text(&e).unwrap(), "lock_version: 3\nartifacts: []\n");
}

#[tokio::test]
async fn a_payload_naming_another_artifact_or_version_is_not_fetched() {
    let e = env();
    // Each asset is filed under one name and version but packs a murmur.yaml saying another:
    // only the name differs, or only the version.
    let mut other_name = published_tool("tool-liar", "1.0.0", "x");
    other_name.bytes = tool_zip("tool-other", "1.0.0", "x");
    let mut other_version = published_tool("tool-stale", "1.0.0", "x");
    other_version.bytes = tool_zip("tool-stale", "0.9.0", "x");
    e.fake.publish(
        MURMUR_SCOPE_REPO,
        "murmur",
        "v0.27.0",
        &[other_name, other_version],
    );
    let before = lock_text(&e);
    let svc = service(&e, SEED_GRANT);
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-liar@1.0.0")).await,
        "not-fetched: murmur/tool-liar@1.0.0 (github:murmur-nexus/default-artifacts) packs 'tool-other@1.0.0' in its murmur.yaml, not tool-liar@1.0.0"
    );
    assert_nothing_written(&e, &before);
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-stale@1.0.0")).await,
        "not-fetched: murmur/tool-stale@1.0.0 (github:murmur-nexus/default-artifacts) packs 'tool-stale@0.9.0' in its murmur.yaml, not tool-stale@1.0.0"
    );
    assert_nothing_written(&e, &before);
}

/// A session granted `murmur/tool-*` and `ana/tool-*` that has pulled `murmur/tool-edit`, with
/// `ana/tool-edit@1.0.0` (the same tool name) in the project store.
async fn murmur_tool_edit_pulled_beside_ana_s() -> (Env, PullService) {
    let e = env();
    let store = Store::project(&e.project);
    put(
        &store,
        "ana",
        &tool_zip("tool-edit", "1.0.0", "ana's edit"),
        None,
    );
    let svc = service(
        &e,
        "    tool: [\"murmur/tool-*\", \"ana/tool-*\"]\n    from: [stores, sources]\n",
    );
    let PullOutcome::Pulled(_) = svc.pull(req(&e, "murmur/tool-edit")).await.unwrap() else {
        panic!("not a pull")
    };
    (e, svc)
}

#[tokio::test]
async fn a_second_pull_with_the_same_tool_name_is_refused() {
    let (e, svc) = murmur_tool_edit_pulled_beside_ana_s().await;
    let after_first = lock_text(&e);
    assert_eq!(
        refused(&svc, req(&e, "ana/tool-edit@1.0.0")).await,
        "not-granted: 'ana/tool-edit' has the tool name 'tool-edit', which 'murmur/tool-edit' already holds in this session; remove that one first or pull another artifact"
    );
    assert_eq!(
        lock_text(&e),
        after_first,
        "the lock holds only the first pull"
    );
    assert!(!lock_text(&e).unwrap().contains("ana/tool-edit"));
}

#[tokio::test]
async fn a_removed_tool_frees_its_name_for_the_next_pull() {
    let (e, svc) = murmur_tool_edit_pulled_beside_ana_s().await;
    let r = svc.remove(req(&e, "murmur/tool-edit")).await.unwrap();
    assert_eq!(
        r.result.to_string(),
        r#"{"artifact":"murmur/tool-edit","removed":true}"#
    );
    // The name is free again: the other artifact of that tool name pulls.
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "ana/tool-edit@1.0.0")).await.unwrap() else {
        panic!("not a pull")
    };
    assert_eq!(p.result["artifact"], "ana/tool-edit");
    let lock = lock_text(&e).unwrap();
    assert!(
        lock.contains("ana/tool-edit") && !lock.contains("murmur/tool-edit"),
        "{lock}"
    );
}

#[tokio::test]
async fn a_tool_this_session_pulled_is_removed_by_its_bare_name_though_another_session_pinned_it() {
    let e = env();
    // Another session pinned the same bytes first: this session's pull keeps that pin as it is.
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    let other = format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: runtime\n    session: ses_019ed2af76b57c42912b612f07dd0000\n    owner_id: 190196424\n", sha(&zip));
    std::fs::write(e.project.join("murmur.lock"), &other).unwrap();
    let svc = service(&e, SEED_GRANT);
    let PullOutcome::Pulled(_) = svc.pull(req(&e, "murmur/tool-edit")).await.unwrap() else {
        panic!("not a pull")
    };
    assert_eq!(lock_text(&e).as_deref(), Some(other.as_str()));
    let r = svc.remove(req(&e, "tool-edit")).await.unwrap();
    assert_eq!(
        r.result.to_string(),
        r#"{"artifact":"murmur/tool-edit","removed":true}"#
    );
    assert_eq!(
        lock_text(&e).as_deref(),
        Some("lock_version: 3\nartifacts: []\n")
    );
    assert!(!e.records.join("tools/tool-edit").exists());
}

#[tokio::test]
async fn index_versions_that_do_not_fit_this_mur_are_named_and_never_fetched() {
    let e = env();
    let host = mur::artifact::version::host_platform();
    let other = mur::artifact::version::SUPPORTED_PLATFORMS
        .iter()
        .find(|p| **p != host)
        .unwrap();
    let mut wasm = published_tool("tool-wasm", "1.0.0", "a component");
    wasm.interfaces = vec!["murmur:tool/run@0.1.0".into()];
    let mut far = published_tool("tool-far", "1.0.0", "elsewhere");
    far.platform = Some(other.to_string());
    e.fake
        .publish(MURMUR_SCOPE_REPO, "murmur", "v0.28.0", &[wasm, far]);
    let before = lock_text(&e);
    let svc = service(&e, SEED_GRANT);
    for (input, want) in [
        ("murmur/tool-wasm@1.0.0", "does-not-fit: 'murmur/tool-wasm@1.0.0' is a WebAssembly component; this mur runs native tools and skills".to_string()),
        ("murmur/tool-wasm", "does-not-fit: no version of 'murmur/tool-wasm' in the project store, the global store, github:murmur-nexus/default-artifacts fits this mur; the newest: 'murmur/tool-wasm@1.0.0' is a WebAssembly component; this mur runs native tools and skills".to_string()),
        ("murmur/tool-far@1.0.0", format!("does-not-fit: 'murmur/tool-far@1.0.0' has no payload for {host}")),
    ] {
        assert_eq!(refused(&svc, req(&e, input)).await, want, "{input}");
        assert_nothing_written(&e, &before);
    }
    assert!(
        !e.fake
            .requests()
            .iter()
            .any(|r| r.contains("tool-wasm-1.0.0") || r.contains("tool-far-1.0.0")),
        "no payload was downloaded: {:?}",
        e.fake.requests()
    );
}

#[tokio::test]
async fn a_tool_the_manifest_declares_can_be_pulled_again() {
    let e = env();
    let svc = service(&e, SEED_GRANT).with_declared(vec![(
        ArtifactName::parse("murmur/tool-edit").unwrap(),
        ArtifactRuntime::Tool,
    )]);
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "murmur/tool-edit")).await.unwrap() else {
        panic!("not a pull")
    };
    assert_eq!(p.result["tool_name"], "tool-edit");
}

/// Files `bytes` in `store` under `scope/name@version` as someone else might have: the files
/// written directly, with a sidecar that claims a fitting native tool.
fn file_by_hand(store: &Store, scope: &str, name: &str, version: &str, bytes: &[u8]) {
    let dir = store.root.join(scope).join(name).join(version);
    std::fs::create_dir_all(&dir).unwrap();
    let stem = format!("{name}-{version}");
    std::fs::write(dir.join(format!("{stem}.mur.zip")), bytes).unwrap();
    std::fs::write(dir.join(format!("{stem}.sha256")), sha(bytes)).unwrap();
    std::fs::write(
        dir.join(format!("{stem}.meta.json")),
        format!(r#"{{"meta":{{"name":"{scope}/{name}","version":"{version}","runtime":"native","artifact_runtime":"tool","platforms":[],"tags":[]}}}}"#),
    )
    .unwrap();
}

#[tokio::test]
async fn the_listing_never_offers_a_store_entry_the_pull_would_refuse() {
    let e = env();
    let store = Store::project(&e.project);
    put(
        &store,
        "murmur",
        &tool_zip("tool-liar", "1.0.0", "honest"),
        None,
    );
    // 2.0.0 packs another artifact's manifest; 3.0.0 another version's.
    file_by_hand(
        &store,
        "murmur",
        "tool-liar",
        "2.0.0",
        &tool_zip("tool-other", "2.0.0", "x"),
    );
    file_by_hand(
        &store,
        "murmur",
        "tool-liar",
        "3.0.0",
        &tool_zip("tool-liar", "0.9.0", "x"),
    );
    let before = lock_text(&e);
    let svc = service(&e, STORES_GRANT);
    let PullOutcome::Listing(l) = svc.pull(req(&e, "murmur/tool-liar*")).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        l["matches"][0]["versions"],
        serde_json::json!(["3.0.0", "2.0.0", "1.0.0"])
    );
    assert_eq!(l["matches"][0]["newest_fitting"], "1.0.0", "{l}");
    // The pull agrees: with no version it takes 1.0.0; the others are refused by name.
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-liar@2.0.0")).await,
        "not-fetched: murmur/tool-liar@2.0.0 (project store) packs 'tool-other@2.0.0' in its murmur.yaml, not tool-liar@2.0.0"
    );
    assert_eq!(
        refused(&svc, req(&e, "murmur/tool-liar@3.0.0")).await,
        "not-fetched: murmur/tool-liar@3.0.0 (project store) packs 'tool-liar@0.9.0' in its murmur.yaml, not tool-liar@3.0.0"
    );
    assert_nothing_written(&e, &before);
    let PullOutcome::Pulled(p) = svc.pull(req(&e, "murmur/tool-liar")).await.unwrap() else {
        panic!()
    };
    assert_eq!(p.result["version"], "1.0.0");
}

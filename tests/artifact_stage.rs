//! Staging declared artifacts at launch (`stage_declared`) and finding capsule artifacts for
//! delegation (`find_capsule`), over real stores and a real murmur.lock.

#[path = "support/fake_github.rs"]
mod fake_github;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_github::*;
use mur::artifact::{find_capsule, stage_declared, unpack, Store};
use mur::manifest::ArtifactName;
use mur_actors::tool::{ToolKind, ToolOrigin};

/// One murmur home for this test binary (set before any test reads it).
fn home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        std::env::set_var("MURMUR_HOME", &dir);
        dir
    })
}

const MANIFEST: &str = "name: cap\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: s.json\n  - name: murmur/tool-edit\n    version: \"0.2.0\"\n  - name: ana/style\n    version: \"1.0.0\"\n    runtime: skill\n  - name: murmur/guard\n    version: \"1.0.0\"\n    runtime: hook\ninference:\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n";

fn project(manifest: &str) -> (tempfile::TempDir, mur::manifest::LoadedManifest, PathBuf) {
    home();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("murmur.yaml"), manifest).unwrap();
    let loaded =
        mur::manifest::load(&tmp.path().join("murmur.yaml")).unwrap_or_else(|e| panic!("{e:?}"));
    let records = tmp.path().join("workdir/ses_1");
    (tmp, loaded, records)
}

fn put(store: &Store, scope: &str, bytes: &[u8]) {
    let p = unpack(bytes, "t").unwrap();
    store
        .put(
            &ArtifactName::from_parts(scope, p.manifest.name()).unwrap(),
            bytes,
            &p,
            None,
            None,
        )
        .unwrap();
}

#[test]
fn declared_tools_skills_and_hooks_are_staged_with_their_origin() {
    let (tmp, loaded, records) = project(MANIFEST);
    let store = Store::project(tmp.path());
    let edit = tool_zip("tool-edit", "0.2.0", "Edits.");
    put(&store, "murmur", &edit);
    put(
        &store,
        "ana",
        &skill_zip("style", "1.0.0", "\n# Be terse\nAlways."),
    );
    put(
        &Store::global(home()),
        "murmur",
        &hook_zip("guard", "1.0.0"),
    );
    // tool-edit was pulled at runtime and is now declared: staged, still untrusted.
    let pin = format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: runtime\n    session: ses_0\n", mur::artifact::store::sha256_hex(&edit));
    std::fs::write(tmp.path().join("murmur.lock"), &pin).unwrap();

    let staged = stage_declared(&loaded, &records).unwrap();
    let tools = &staged.tools;
    assert_eq!(tools.len(), 2);
    let t = tools.iter().find(|t| t.name == "tool-edit").unwrap();
    assert_eq!(t.origin, ToolOrigin::Pulled);
    assert_eq!(t.full_name.as_deref(), Some("murmur/tool-edit"));
    assert_eq!(t.description, "Edits.");
    assert!(
        matches!(&t.kind, ToolKind::Native { entrypoint, .. } if *entrypoint == records.join("tools/tool-edit/bin/tool-edit"))
    );
    let s = tools.iter().find(|t| t.name == "style").unwrap();
    assert_eq!(
        (s.origin, s.description.as_str()),
        (ToolOrigin::Operator, "Be terse")
    );
    assert_eq!(
        s.kind,
        ToolKind::Skill {
            path: records.join("tools/style/skill.md")
        }
    );
    assert_eq!(
        std::fs::read_to_string(records.join("tools/style/skill.md")).unwrap(),
        "\n# Be terse\nAlways."
    );
    assert_eq!(staged.hooks.len(), 1);
    let h = &staged.hooks[0];
    assert_eq!(
        (h.name.as_str(), h.commit_policy.as_str()),
        ("murmur/guard", "deny")
    );
    assert_eq!(h.bindings, ["on-tool-call"]);
    assert!(h.entrypoint.is_file());
    let out = std::process::Command::new(&h.entrypoint).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"decision\":\"none\"}\n"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("murmur.lock")).unwrap(),
        pin,
        "staging never writes the lock"
    );
}

#[test]
fn anything_missing_is_one_e_run_008_and_nothing_is_staged() {
    let (tmp, loaded, records) = project(MANIFEST);
    put(
        &Store::project(tmp.path()),
        "murmur",
        &tool_zip("tool-edit", "0.2.0", "x"),
    );
    let d = stage_declared(&loaded, &records).unwrap_err();
    assert_eq!(d.code, "E-RUN-008");
    assert_eq!(
        d.message,
        "missing artifacts: ana/style@1.0.0, murmur/guard@1.0.0"
    );
    assert_eq!(
        d.hint.as_deref(),
        Some("run `mur install` to install all manifest dependencies")
    );
    assert!(!records.join("tools").exists());
}

#[test]
fn a_store_copy_that_does_not_match_the_pin_is_refused() {
    let (tmp, loaded, records) = project("name: cap\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/tool-x\n    version: \"1.0.0\"\n");
    put(
        &Store::project(tmp.path()),
        "murmur",
        &tool_zip("tool-x", "1.0.0", "x"),
    );
    std::fs::write(tmp.path().join("murmur.lock"), format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-x\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n", "ab".repeat(32))).unwrap();
    let d = stage_declared(&loaded, &records).unwrap_err();
    assert_eq!(
        (d.code.as_str(), d.message.as_str()),
        (
            "E-REG-002",
            "artifact integrity check failed for murmur/tool-x@1.0.0"
        )
    );
    assert!(!records.join("tools").exists());
    // A pin at another version is E-RUN-003.
    std::fs::write(tmp.path().join("murmur.lock"), "lock_version: 3\nartifacts:\n  - name: murmur/tool-x\n    resolved_version: \"0.9.0\"\n    sha256:\n      any: \"aa\"\n    origin: operator\n").unwrap();
    let d = stage_declared(&loaded, &records).unwrap_err();
    assert_eq!(
        (d.code.as_str(), d.message.as_str()),
        (
            "E-RUN-003",
            "murmur.lock pins 'murmur/tool-x@0.9.0', but murmur.yaml declares murmur/tool-x@1.0.0"
        )
    );
}

#[test]
fn a_runtime_pin_declared_as_a_hook_is_e_run_043_and_reserved_names_come_first() {
    let (tmp, mut loaded, records) = project("name: cap\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/guard\n    version: \"1.0.0\"\n    runtime: hook\n");
    std::fs::write(tmp.path().join("murmur.lock"), "lock_version: 3\nartifacts:\n  - name: murmur/guard\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"aa\"\n    origin: runtime\n    session: ses_9\n").unwrap();
    let d = stage_declared(&loaded, &records).unwrap_err();
    assert_eq!(d.code, "E-RUN-043");
    assert_eq!(d.message, "murmur.lock pins 'murmur/guard@1.0.0' from a runtime pull by session ses_9, and murmur.yaml declares it with runtime: hook, which only an operator-declared pin may carry");
    // The manifest loader refuses reserved names already; staging checks again, before it
    // reads anything (here the lock is unreadable, and the error is still E-CAP-013).
    std::fs::write(tmp.path().join("murmur.lock"), "not: [valid").unwrap();
    loaded.manifest.artifacts[0].name = ArtifactName::parse("murmur/submit-plan").unwrap();
    let d = stage_declared(&loaded, &records).unwrap_err();
    assert_eq!(d.code, "E-CAP-013");
    assert!(d.message.starts_with(
        "artifact 'murmur/submit-plan' has the tool name 'submit-plan', which collides"
    ));
}

#[test]
fn capsules_are_found_in_the_stores_and_extracted_once() {
    let (tmp, _loaded, _records) = project("name: top\nversion: \"0.1.0\"\n");
    let cap = mur::artifact::payload::zip_entries(vec![
        ("murmur.yaml".into(), b"name: reviewer\nversion: 0.1.0\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: script.json\ninference:\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n".to_vec(), false),
        ("script.json".into(), b"[]".to_vec(), false),
    ])
    .unwrap();
    put(&Store::global(home()), "local", &cap);
    let name = ArtifactName::parse("local/reviewer").unwrap();
    let dir = find_capsule(tmp.path(), &name, "0.1.0").unwrap();
    assert!(dir.join("murmur.yaml").is_file());
    assert_eq!(
        std::fs::read_to_string(dir.join("script.json")).unwrap(),
        "[]"
    );
    assert!(dir.starts_with(tmp.path().join(".murmur/capsules/local/reviewer")));
    let marker = dir.join("marker");
    std::fs::write(&marker, "kept").unwrap();
    for _ in 0..1000 {
        assert_eq!(find_capsule(tmp.path(), &name, "0.1.0").unwrap(), dir);
    }
    assert!(marker.exists(), "not extracted again");
    assert_eq!(
        find_capsule(tmp.path(), &name, "9.9.9").unwrap_err(),
        "capsule local/reviewer@9.9.9 is in neither the project store nor the global store; install it with `mur install local/reviewer@9.9.9`"
    );
    put(
        &Store::project(tmp.path()),
        "local",
        &tool_zip("tool-q", "1.0.0", "q"),
    );
    assert_eq!(
        find_capsule(
            tmp.path(),
            &ArtifactName::parse("local/tool-q").unwrap(),
            "1.0.0"
        )
        .unwrap_err(),
        "local/tool-q@1.0.0 is a tool artifact, not a capsule"
    );
}

//! `mur build`, `mur install` (every form) and `mur list`, run as the real binary against real
//! stores, a real murmur.lock and the fake GitHub.

#[path = "support/fake_github.rs"]
mod fake_github;

use std::path::{Path, PathBuf};
use std::process::Command;

use fake_github::*;
use mur::artifact::config::MURMUR_SCOPE_REPO;

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
    fake: FakeGithub,
}

const MANIFEST: &str = "name: coding-agent\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: s.json\n  - name: murmur/tool-grep\n    version: \"1.0.0\"\n";

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("coding-agent");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(project.join("murmur.yaml"), MANIFEST).unwrap();
    let fake = FakeGithub::start();
    fake.repo(MURMUR_SCOPE_REPO, 190196424);
    fake.publish(
        MURMUR_SCOPE_REPO,
        "murmur",
        "v0.25.0",
        &[
            published_tool("tool-edit", "0.1.0", "old edit"),
            published_tool("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION),
            published_tool("tool-grep", "1.0.0", "grep"),
        ],
    );
    Env {
        _tmp: tmp,
        project,
        home,
        fake,
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn mur(e: &Env, dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(args)
        .current_dir(dir)
        .env("MURMUR_HOME", &e.home)
        .env("MUR_GITHUB_API", &e.fake.base)
        .env_remove("MUR_GITHUB_API_BASE")
        .env_remove("GITHUB_TOKEN")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn lock(e: &Env) -> String {
    std::fs::read_to_string(e.project.join("murmur.lock")).unwrap_or_default()
}

fn sha(b: &[u8]) -> String {
    mur::artifact::store::sha256_hex(b)
}

#[test]
fn install_by_name_and_version_files_the_store_and_pins_operator() {
    let e = env();
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed murmur/tool-edit@0.2.0 from github:murmur-nexus/default-artifacts\n"
    );
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    let dir = e.project.join(".murmur/artifacts/murmur/tool-edit/0.2.0");
    assert_eq!(
        std::fs::read(dir.join("tool-edit-0.2.0.mur.zip")).unwrap(),
        zip
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("tool-edit-0.2.0.sha256")).unwrap(),
        sha(&zip)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("tool-edit-0.2.0.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["meta"]["owner_id"], 190196424);
    assert_eq!(meta["meta"]["artifact_runtime"], "tool");
    assert_eq!(
        lock(&e),
        format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n    owner_id: 190196424\n", sha(&zip))
    );
    // Installing again is answered by the project store and changes nothing.
    let before = lock(&e);
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(
        o.stdout,
        "Installed murmur/tool-edit@0.2.0 from project store\n"
    );
    assert_eq!(lock(&e), before);
}

#[test]
fn install_without_a_version_takes_the_newest_that_fits() {
    let e = env();
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed murmur/tool-edit@0.2.0 from github:murmur-nexus/default-artifacts\n"
    );
}

#[test]
fn install_with_no_argument_installs_every_declared_artifact() {
    let e = env();
    let o = mur(&e, &e.project, &["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "Installed murmur/tool-grep@1.0.0 from github:murmur-nexus/default-artifacts\ninstalled 1 artifact\n");
    assert!(lock(&e).contains("  - name: murmur/tool-grep\n"));
    assert!(
        !lock(&e).contains("driver-script"),
        "built-in drivers are never pinned"
    );
    assert!(
        !lock(&e).contains("tool-edit"),
        "an undeclared tool is not installed"
    );
}

#[test]
fn install_from_a_github_release_and_from_a_file() {
    let e = env();
    e.fake.repo("Ana/tools", 4242);
    e.fake.release(
        "Ana/tools",
        "v1",
        vec![
            (
                "tool-fmt-1.0.0.mur.zip".into(),
                tool_zip("tool-fmt", "1.0.0", "fmt"),
            ),
            (
                "style-2.0.0.mur.zip".into(),
                skill_zip("style", "2.0.0", "# Style\nterse"),
            ),
            ("notes.txt".into(), b"not an artifact".to_vec()),
        ],
    );
    let o = mur(&e, &e.project, &["install", "github:Ana/tools@v1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "Installed ana/style@2.0.0 from github:Ana/tools\nInstalled ana/tool-fmt@1.0.0 from github:Ana/tools\n");
    assert!(lock(&e).contains("  - name: ana/tool-fmt\n    resolved_version: \"1.0.0\"\n"));
    assert!(lock(&e).contains("    owner_id: 4242\n"));

    // A folder packed with mur build, installed from its file as local/<name>.
    let src = e.project.join("src-tool");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::write(src.join("murmur.yaml"), "name: tool-count\nversion: 0.3.0\nruntime: tool\nimplementation: native\ndescription: Counts.\n").unwrap();
    std::fs::write(src.join("bin/tool-count"), TOOL_SCRIPT).unwrap();
    let out = e.project.join("tool-count.mur.zip");
    let o = mur(
        &e,
        &e.project,
        &["build", "src-tool", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.starts_with(&format!(
            "Built tool-count@0.3.0 (tool) → {}\nsha256: ",
            out.display()
        )),
        "{}",
        o.stdout
    );
    let o = mur(&e, &e.project, &["install", "./tool-count.mur.zip"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed local/tool-count@0.3.0 from ./tool-count.mur.zip\n"
    );
    let bytes = std::fs::read(&out).unwrap();
    assert!(lock(&e).ends_with(&format!("  - name: local/tool-count\n    resolved_version: \"0.3.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n", sha(&bytes))));
    let store = e
        .project
        .join(".murmur/artifacts/local/tool-count/0.3.0/tool-count-0.3.0.mur.zip");
    assert_eq!(std::fs::read(store).unwrap(), bytes);

    // mur list shows all of it; runtime-provided tools never appear.
    let o = mur(&e, &e.project, &["list"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "NAME              VERSION  RUNTIME  PLATFORMS  STORE    ORIGIN    TRUST\n\
         ana/style         2.0.0    skill    —          project  operator  trusted\n\
         ana/tool-fmt      1.0.0    tool     —          project  operator  trusted\n\
         local/tool-count  0.3.0    tool     —          project  operator  trusted\n"
    );
    // The original's flag gives the same rows; --json gives them as data.
    assert_eq!(mur(&e, &e.project, &["list", "--all"]).stdout, o.stdout);
    let o = mur(&e, &e.project, &["list", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        rows[1],
        serde_json::json!({"name": "ana/tool-fmt", "version": "1.0.0", "runtime": "tool", "platforms": [], "store": "project", "origin": "operator", "trust": "trusted"})
    );
    assert_eq!(rows.as_array().unwrap().len(), 3);
    let o = mur(&e, &e.project, &["list", "--all", "-g"]);
    assert_eq!(o.code, 2, "--all and -g contradict each other");
}

#[test]
fn global_installs_write_no_lock_and_list_shows_them() {
    let e = env();
    let o = mur(&e, &e.project, &["install", "-g", "murmur/tool-grep@1.0.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(e
        .home
        .join("artifacts/murmur/tool-grep/1.0.0/tool-grep-1.0.0.mur.zip")
        .is_file());
    assert!(!e.project.join("murmur.lock").exists());
    assert!(!e.project.join(".murmur").exists());
    let o = mur(&e, &e.project, &["list", "-g"]);
    assert_eq!(o.stdout, "NAME              VERSION  RUNTIME  PLATFORMS  STORE   ORIGIN    TRUST\nmurmur/tool-grep  1.0.0    tool     —          global  operator  trusted\n");
    // A project install of it is answered by the global store and copied into the project.
    let o = mur(&e, &e.project, &["install", "murmur/tool-grep@1.0.0"]);
    assert_eq!(
        o.stdout,
        "Installed murmur/tool-grep@1.0.0 from global store\n"
    );
    assert!(e
        .project
        .join(".murmur/artifacts/murmur/tool-grep/1.0.0/tool-grep-1.0.0.mur.zip")
        .is_file());
    let empty = tempfile::tempdir().unwrap();
    let o = mur(&e, empty.path(), &["list"]);
    assert!(
        o.stdout.contains("murmur/tool-grep"),
        "outside a project, list shows the global store"
    );
    let fresh = env();
    assert_eq!(
        mur(&fresh, empty.path(), &["list"]).stdout,
        "No artifacts found.\n"
    );
}

#[test]
fn install_adopts_a_runtime_pin_as_operator_and_says_so() {
    let e = env();
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    let runtime_pin = format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: runtime\n    session: ses_019ed2af76b57c42912b612f07dd4d51\n    owner_id: 190196424\n", sha(&zip));
    std::fs::write(e.project.join("murmur.lock"), &runtime_pin).unwrap();
    let o = mur(&e, &e.project, &["list"]);
    assert_eq!(o.stdout, "NAME              VERSION  RUNTIME  PLATFORMS  STORE  ORIGIN   TRUST\nmurmur/tool-edit  0.2.0    -        —          -      runtime  untrusted\n");
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed murmur/tool-edit@0.2.0 from github:murmur-nexus/default-artifacts\nAdopted murmur/tool-edit@0.2.0 as operator-declared (it was pulled at runtime by session ses_019ed2af76b57c42912b612f07dd4d51)\n"
    );
    assert_eq!(
        lock(&e),
        runtime_pin.replace(
            "origin: runtime\n    session: ses_019ed2af76b57c42912b612f07dd4d51\n",
            "origin: operator\n"
        )
    );
    let o = mur(&e, &e.project, &["list"]);
    assert!(
        o.stdout
            .contains("murmur/tool-edit  0.2.0    tool     —          project  operator  trusted"),
        "{}",
        o.stdout
    );
}

/// Asserts a failed install wrote nothing.
fn nothing_written(e: &Env, lock_before: &str) {
    assert_eq!(lock(e), lock_before);
    assert!(
        !e.project.join(".murmur/artifacts").exists()
            || std::fs::read_dir(e.project.join(".murmur/artifacts/murmur"))
                .map(|d| d.count() == 0)
                .unwrap_or(true)
    );
}

#[test]
fn owner_mismatch_hash_mismatch_and_unknown_versions_are_refused_with_nothing_written() {
    let e = env();
    let old = "lock_version: 3\nartifacts:\n  - name: ana/tool-old\n    resolved_version: \"1.0.0\"\n    sha256:\n      any: \"aa\"\n    origin: operator\n    owner_id: 111\n";
    std::fs::write(e.project.join("murmur.lock"), old).unwrap();
    std::fs::write(
        e.home.join("config.yaml"),
        "registry:\n  sources:\n    - repo: Ana/tools\n      token: \"${MUR_TEST_UNSET_TOKEN}\"\n",
    )
    .unwrap();
    e.fake.repo("Ana/tools", 222);
    e.fake.publish(
        "Ana/tools",
        "ana",
        "v1",
        &[published_tool("tool-fmt", "1.0.0", "fmt")],
    );
    let o = mur(&e, &e.project, &["install", "ana/tool-fmt@1.0.0"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "error[E-REG-010]: could not resolve ana/tool-fmt: the owner of scope 'ana' has changed: github:Ana/tools is now owned by GitHub account id 222, and murmur.lock records owner id 111 (entry ana/tool-old)\n  hint: the account was renamed or re-registered, or the repository changed hands; if you trust it, delete the scope's entries from murmur.lock and install again\n"
    );
    assert_eq!(lock(&e), old);
    assert!(!e.project.join(".murmur").exists());

    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@9.0.0"]);
    assert_eq!((o.code, o.stderr.as_str()), (1, "error[E-REG-001]: the index of github:murmur-nexus/default-artifacts lists no version 9.0.0 of murmur/tool-edit; it lists 0.2.0, 0.1.0\n"));
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@latest"]);
    assert_eq!(o.stderr, "error[E-REG-004]: version 'latest' is reserved and names no single version of murmur/tool-edit\n");
    e.fake.fault("tool-edit-0.2.0.mur.zip", Fault::Truncated);
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("error[E-REG-002]: artifact integrity check failed for murmur/tool-edit@0.2.0: github:murmur-nexus/default-artifacts: tool-edit-0.2.0.mur.zip arrived truncated: "), "{}", o.stderr);
    let o = mur(&e, &e.project, &["install", "zed/tool-x@1.0.0"]);
    assert!(o.stderr.starts_with("error[E-REG-008]: no source serves the 'zed' scope, so zed/tool-x@1.0.0 cannot be looked up\n  hint: "), "{}", o.stderr);
    let o = mur(&e, &e.project, &["install", "tool-x"]);
    assert!(
        o.stderr
            .starts_with("error[E-REG-007]: 'tool-x' is not a full artifact name"),
        "{}",
        o.stderr
    );
    nothing_written(&e, old);
}

#[test]
fn source_faults_are_reported() {
    let e = env();
    e.fake.fault("/releases/latest", Fault::ServerError);
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("error[E-REG-006]: github:murmur-nexus/default-artifacts did not answer (latest release): HTTP 500\n"), "{}", o.stderr);
    let e = env();
    e.fake.fault("/releases/tags/v0.25.0", Fault::NotFound);
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.stderr, "error[E-REG-001]: github:murmur-nexus/default-artifacts has no release v0.25.0 (HTTP 404)\n");
    let o = mur(
        &e,
        &e.project,
        &["install", "github:murmur-nexus/default-artifacts@nope"],
    );
    assert_eq!(
        o.stderr,
        "error[E-REG-001]: github:murmur-nexus/default-artifacts has no release nope (HTTP 404)\n"
    );
    assert!(!e.project.join("murmur.lock").exists());
}

#[test]
fn an_invalid_lock_is_named_and_left_as_it_was() {
    let e = env();
    let bad = "lock_version: 3\nartifacts:\n  - name: tool-edit\n    resolved_version: 1\n";
    std::fs::write(e.project.join("murmur.lock"), bad).unwrap();
    for args in [
        &["install"][..],
        &["install", "murmur/tool-edit@0.2.0"],
        &["list"],
    ] {
        let o = mur(&e, &e.project, args);
        assert_eq!(o.code, 1, "{args:?}");
        assert_eq!(
            o.stderr,
            format!(
                "error[E-RUN-003]: invalid murmur.lock at {}: entry 0: 'tool-edit' is not named <scope>/<name> ('tool-edit' is not a full artifact name: an artifact is named <scope>/<name>)\n  hint: fix the file, or delete murmur.lock and run `mur install` to regenerate it\n",
                e.project.join("murmur.lock").display()
            ),
            "{args:?}"
        );
        assert_eq!(lock(&e), bad);
    }
    assert!(!e.project.join(".murmur").exists());
}

fn evil_zip(entries: &[(&str, &[u8], Option<u32>)]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes, mode) in entries {
        match mode {
            Some(m) if m & 0o170000 == 0o120000 => {
                w.add_symlink(
                    *name,
                    std::str::from_utf8(bytes).unwrap(),
                    zip::write::SimpleFileOptions::default(),
                )
                .unwrap();
            }
            _ => {
                w.start_file(*name, zip::write::SimpleFileOptions::default())
                    .unwrap();
                w.write_all(bytes).unwrap();
            }
        }
    }
    w.finish().unwrap().into_inner()
}

#[test]
fn corrupt_and_evil_zips_are_refused_naming_file_and_entry() {
    let e = env();
    let manifest: &[u8] = b"name: t\nversion: 1.0.0\nruntime: skill\n";
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        ("corrupt.mur.zip", b"PK\x03\x04 this is not a zip".to_vec(), "./corrupt.mur.zip is not a readable .mur.zip: ".into()),
        ("dotdot.mur.zip", evil_zip(&[("murmur.yaml", manifest, None), ("../escape.md", b"x", None)]), "./dotdot.mur.zip: entry '../escape.md' would land outside the artifact (absolute or '..' path); refused".into()),
        ("abs.mur.zip", evil_zip(&[("murmur.yaml", manifest, None), ("/etc/evil", b"x", None)]), "./abs.mur.zip: entry '/etc/evil' would land outside the artifact (absolute or '..' path); refused".into()),
        ("link.mur.zip", evil_zip(&[("murmur.yaml", manifest, None), ("skill.md", b"/etc/passwd", Some(0o120777))]), "./link.mur.zip: entry 'skill.md' is a symbolic link; a .mur.zip may hold only regular files".into()),
        ("nomanifest.mur.zip", evil_zip(&[("skill.md", b"x", None)]), "./nomanifest.mur.zip has no murmur.yaml at its root".into()),
    ];
    for (file, bytes, want) in cases {
        std::fs::write(e.project.join(file), bytes).unwrap();
        let o = mur(&e, &e.project, &["install", &format!("./{file}")]);
        assert_eq!(o.code, 1, "{file}");
        assert!(
            o.stderr.starts_with(&format!("error[E-IO-003]: {want}")),
            "{file}: {}",
            o.stderr
        );
        assert!(!e.project.join("murmur.lock").exists());
        assert!(!e.project.join(".murmur").exists());
        assert!(!e.project.parent().unwrap().join("escape.md").exists());
    }
}

#[test]
fn oversized_entries_are_refused() {
    let big = vec![b'a'; 4096];
    let z = evil_zip(&[
        (
            "murmur.yaml",
            b"name: t\nversion: 1.0.0\nruntime: skill\n",
            None,
        ),
        ("skill.md", &big, None),
    ]);
    let limits = mur::artifact::payload::ZipLimits {
        entry_bytes: 1024,
        total_bytes: 1 << 20,
        entries: 10,
    };
    let err = mur::artifact::payload::unpack_with_limits(&z, "big.mur.zip", limits).unwrap_err();
    assert_eq!(
        err,
        "big.mur.zip: entry 'skill.md' is 4096 bytes, over the 1024 byte limit for one entry"
    );
    let limits = mur::artifact::payload::ZipLimits {
        entry_bytes: 1 << 20,
        total_bytes: 2048,
        entries: 10,
    };
    let err = mur::artifact::payload::unpack_with_limits(&z, "big.mur.zip", limits).unwrap_err();
    assert_eq!(
        err,
        "big.mur.zip: its entries add up to more than 2048 bytes; refused"
    );
}

#[test]
fn build_packs_skills_and_capsules_and_refuses_bad_folders() {
    let e = env();
    let skill = e.project.join("style");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("murmur.yaml"),
        "name: style\nversion: 1.0.0\nruntime: skill\n",
    )
    .unwrap();
    std::fs::write(skill.join("skill.md"), "# Style\n").unwrap();
    let o = mur(&e, &e.project, &["build", "style"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let built = std::fs::read(e.project.join("style-1.0.0.mur.zip")).unwrap();
    let again = mur(&e, &e.project, &["build", "style", "-o", "again.mur.zip"]);
    assert_eq!(again.code, 0);
    assert_eq!(
        std::fs::read(e.project.join("again.mur.zip")).unwrap(),
        built,
        "builds are reproducible"
    );

    let cap = e.project.join("reviewer");
    std::fs::create_dir_all(cap.join("workdir/ses_x")).unwrap();
    std::fs::write(cap.join("murmur.yaml"), "name: reviewer\nversion: 0.1.0\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: script.json\ninference:\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n").unwrap();
    std::fs::write(cap.join("script.json"), "[]").unwrap();
    std::fs::write(cap.join(".env"), "SECRET=1").unwrap();
    std::fs::write(cap.join("workdir/ses_x/trace.jsonl"), "{}").unwrap();
    let o = mur(&e, &e.project, &["build", "reviewer"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("Built reviewer@0.1.0 (capsule) → reviewer-0.1.0.mur.zip\n"),
        "{}",
        o.stdout
    );
    let p = mur::artifact::unpack(
        &std::fs::read(e.project.join("reviewer-0.1.0.mur.zip")).unwrap(),
        "r",
    )
    .unwrap();
    let mut files: Vec<&str> = p.files.iter().map(|f| f.path.as_str()).collect();
    files.sort();
    assert_eq!(files, ["murmur.yaml", "script.json"], "no .env, no workdir");

    std::fs::write(
        skill.join("murmur.yaml"),
        "name: ana/style\nversion: 1.0.0\nruntime: skill\n",
    )
    .unwrap();
    let o = mur(&e, &e.project, &["build", "style"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("error[E-BLD-001]: "), "{}", o.stderr);
    let tool = e.project.join("t");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(
        tool.join("murmur.yaml"),
        "name: t\nversion: 1.0.0\nruntime: tool\nimplementation: native\n",
    )
    .unwrap();
    let o = mur(&e, &e.project, &["build", "t"]);
    assert_eq!(
        o.stderr,
        "error[E-BLD-003]: t: the payload needs bin/t, and t/bin/t is not a file\n"
    );
    let o = mur(&e, &e.project, &["build", "missing"]);
    assert!(
        o.stderr
            .starts_with("error[E-IO-001]: cannot read missing/murmur.yaml"),
        "{}",
        o.stderr
    );
}

#[test]
fn the_api_base_and_token_come_from_config_yaml() {
    let e = env();
    e.fake.repo("Ana/tools", 4242);
    e.fake.publish(
        "Ana/tools",
        "ana",
        "v1",
        &[published_tool("tool-fmt", "1.0.0", "fmt")],
    );
    std::fs::write(
        e.home.join("config.yaml"),
        format!("registry:\n  api_base: {}\n  sources:\n    - repo: Ana/tools\n      token: \"${{MUR_TEST_TOKEN}}\"\n", e.fake.base),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["install", "ana/tool-fmt@1.0.0"])
        .current_dir(&e.project)
        .env("MURMUR_HOME", &e.home)
        .env_remove("MUR_GITHUB_API")
        .env_remove("GITHUB_TOKEN")
        .env("MUR_TEST_TOKEN", "sekret")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let auth = e.fake.auth_headers();
    assert!(!auth.is_empty());
    assert!(
        auth.iter().all(|a| a.as_deref() == Some("Bearer sekret")),
        "{auth:?}"
    );
}

#[test]
fn bytes_that_do_not_match_the_index_digest_are_refused() {
    let e = env();
    let mut wrong = tool_zip("tool-grep", "1.0.0", "grep");
    let last = wrong.len() - 1;
    wrong[last] ^= 0xff;
    e.fake.replace_asset("tool-grep-1.0.0.mur.zip", wrong);
    let o = mur(&e, &e.project, &["install", "murmur/tool-grep@1.0.0"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "error[E-REG-002]: artifact integrity check failed for murmur/tool-grep@1.0.0: github:murmur-nexus/default-artifacts: tool-grep-1.0.0.mur.zip does not match the sha256 its index records\n"
    );
    nothing_written(&e, "");
}

#[test]
fn two_processes_installing_at_once_both_end_up_pinned() {
    for _ in 0..4 {
        let e = env();
        let spawn = |r: &str| {
            Command::new(env!("CARGO_BIN_EXE_mur"))
                .args(["install", r])
                .current_dir(&e.project)
                .env("MURMUR_HOME", &e.home)
                .env("MUR_GITHUB_API", &e.fake.base)
                .spawn()
                .unwrap()
        };
        let mut a = spawn("murmur/tool-edit@0.2.0");
        let mut b = spawn("murmur/tool-grep@1.0.0");
        assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
        let l = lock(&e);
        assert!(
            l.contains("  - name: murmur/tool-edit\n")
                && l.contains("  - name: murmur/tool-grep\n"),
            "{l}"
        );
    }
}

#[test]
fn a_pin_at_another_version_is_a_lock_conflict() {
    let e = env();
    assert_eq!(
        mur(&e, &e.project, &["install", "murmur/tool-edit@0.1.0"]).code,
        0
    );
    let before = lock(&e);
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "error[E-REG-005]: murmur.lock conflict for 'murmur/tool-edit': pinned murmur/tool-edit@0.1.0, but murmur/tool-edit@0.2.0 was resolved\n  hint: for an intentional upgrade, remove the stale entry from murmur.lock and install again\n"
    );
    assert_eq!(lock(&e), before);
    assert!(
        !e.project
            .join(".murmur/artifacts/murmur/tool-edit/0.2.0")
            .exists(),
        "nothing filed"
    );
}

#[test]
fn other_bytes_at_the_pinned_version_are_refused_and_the_pin_stays() {
    let e = env();
    // The lock pins tool-edit@0.2.0 at a hash the published zip does not have: the release's
    // bytes changed under the same version.
    let pinned = format!("lock_version: 3\nartifacts:\n  - name: murmur/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n    owner_id: 190196424\n", "0".repeat(64));
    std::fs::write(e.project.join("murmur.lock"), &pinned).unwrap();
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    let zip = tool_zip("tool-edit", "0.2.0", TOOL_EDIT_DESCRIPTION);
    assert_eq!(
        o.stderr,
        format!("error[E-REG-005]: murmur.lock conflict for 'murmur/tool-edit': 'murmur/tool-edit' is pinned at sha256 {}, but {} was resolved\n  hint: for an intentional upgrade, remove the stale entry from murmur.lock and install again\n", "0".repeat(64), sha(&zip))
    );
    nothing_written(&e, &pinned);
}

/// The sidecar as the original Murmur's `murmur-artifact` 0.8.0 reads it (its field names and
/// types, written here from its documented shape): `runtime` is one of three words, `name` a
/// scoped name, `platforms` `[os, arch]` pairs. One sidecar it cannot read empties its listing.
mod upstream_meta {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum RuntimeType {
        Wasm,
        Native,
        Static,
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // read only to prove the shape parses
    pub struct ArtifactMeta {
        pub name: String,
        pub version: String,
        pub runtime: RuntimeType,
        pub artifact_runtime: String,
        #[serde(default)]
        pub platforms: Vec<(String, String)>,
        #[serde(default)]
        pub description: Option<String>,
        #[serde(default)]
        pub tags: Vec<String>,
        #[serde(default)]
        pub owner_id: Option<u64>,
        #[serde(default)]
        pub built_at_level: Option<u64>,
    }

    #[derive(serde::Deserialize)]
    pub struct IndexMetadata {
        pub meta: ArtifactMeta,
    }
}

#[test]
fn every_sidecar_mur_files_is_one_the_original_murmur_reads() {
    let e = env();
    let cap = e.project.join("reviewer");
    std::fs::create_dir_all(&cap).unwrap();
    std::fs::write(cap.join("murmur.yaml"), "name: reviewer\nversion: 0.1.0\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: script.json\ninference:\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n").unwrap();
    std::fs::write(cap.join("script.json"), "[]").unwrap();
    let skill = e.project.join("style");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("murmur.yaml"),
        "name: style\nversion: 1.0.0\nruntime: skill\n",
    )
    .unwrap();
    std::fs::write(skill.join("skill.md"), "# Style\n").unwrap();
    for dir in ["reviewer", "style"] {
        let o = mur(&e, &e.project, &["build", dir]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    for file in ["./reviewer-0.1.0.mur.zip", "./style-1.0.0.mur.zip"] {
        let o = mur(&e, &e.project, &["install", file]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@0.2.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);

    let store = e.project.join(".murmur/artifacts");
    let mut read = Vec::new();
    for sidecar in walk(&store)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".meta.json"))
    {
        let m: upstream_meta::IndexMetadata =
            serde_json::from_slice(&std::fs::read(&sidecar).unwrap()).unwrap_or_else(|err| {
                panic!("the original cannot read {}: {err}", sidecar.display())
            });
        let m = m.meta;
        assert!(m.name.contains('/'), "{}", m.name);
        let packaging = match m.runtime {
            upstream_meta::RuntimeType::Wasm => "wasm",
            upstream_meta::RuntimeType::Native => "native",
            upstream_meta::RuntimeType::Static => "static",
        };
        read.push(format!(
            "{}@{} {packaging} {}",
            m.name, m.version, m.artifact_runtime
        ));
    }
    read.sort();
    assert_eq!(
        read,
        [
            "local/reviewer@0.1.0 wasm capsule",
            "local/style@1.0.0 static skill",
            "murmur/tool-edit@0.2.0 native tool"
        ]
    );
    // And mur lists them all back, the capsule included.
    let o = mur(&e, &e.project, &["list"]);
    assert!(o.stdout.contains("local/reviewer"), "{}", o.stdout);
    // A capsule filed as `wasm` is still one this mur takes: by name, with no version, the
    // stores' newest fitting version is the capsule's.
    let o = mur(&e, &e.project, &["install", "local/reviewer"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed local/reviewer@0.1.0 from project store\n"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_original_murmurs_api_variable_points_mur_at_the_same_server() {
    let e = env();
    let o = Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["install", "murmur/tool-grep@1.0.0"])
        .current_dir(&e.project)
        .env("MURMUR_HOME", &e.home)
        .env_remove("MUR_GITHUB_API")
        .env("MUR_GITHUB_API_BASE", format!("{}/", e.fake.base))
        .env_remove("GITHUB_TOKEN")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(lock(&e).contains("  - name: murmur/tool-grep\n"));
    assert!(!e.fake.requests().is_empty(), "the fake was asked");
}

/// A release shaped like the real `murmur-nexus/default-artifacts` ones: `.mur.zip` assets
/// beside a schema 1 `artifacts-index.json`.
fn schema_1_release(e: &Env) {
    e.fake.repo("Ana/tools", 4242);
    e.fake.release(
        "Ana/tools",
        "v0.9.0",
        vec![
            (
                "tool-fmt-1.0.0.mur.zip".into(),
                tool_zip("tool-fmt", "1.0.0", "fmt"),
            ),
            (
                "style-2.0.0.mur.zip".into(),
                skill_zip("style", "2.0.0", "# Style\nterse"),
            ),
            (
                "artifacts-index.json".into(),
                br#"{"schema_version":"1","artifacts":[{"name":"tool-fmt","version":"1.0.0"}]}"#
                    .to_vec(),
            ),
        ],
    );
}

#[test]
fn a_release_carrying_a_schema_1_index_installs_its_assets() {
    let e = env();
    schema_1_release(&e);
    let o = mur(&e, &e.project, &["install", "github:Ana/tools@v0.9.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Installed ana/style@2.0.0 from github:Ana/tools\nInstalled ana/tool-fmt@1.0.0 from github:Ana/tools\n"
    );
    let l = lock(&e);
    assert!(
        l.contains("  - name: ana/style\n    resolved_version: \"2.0.0\"\n"),
        "{l}"
    );
    assert!(
        l.contains("  - name: ana/tool-fmt\n    resolved_version: \"1.0.0\"\n"),
        "{l}"
    );
}

#[test]
fn a_name_install_against_a_schema_1_index_says_its_publisher_regenerates_it() {
    let e = env();
    schema_1_release(&e);
    std::fs::write(
        e.home.join("config.yaml"),
        "registry:\n  sources:\n    - repo: Ana/tools\n",
    )
    .unwrap();
    let o = mur(&e, &e.project, &["install", "ana/tool-fmt@1.0.0"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        format!("error[E-IDX-002]: the index of github:Ana/tools (release v0.9.0) is a schema 1 index; this mur reads schema 2\n  hint: {}\n", mur::artifact::index::SCHEMA_1_HINT)
    );
    assert_eq!(lock(&e), "");
    assert!(!e.project.join(".murmur/artifacts/ana").exists());
}

#[test]
fn a_built_in_driver_the_store_holds_is_pinned_as_the_original_pins_it() {
    let e = env();
    std::fs::write(
        e.project.join("murmur.yaml"),
        "name: both\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: https://api.anthropic.com\n      api_key: ${ANTHROPIC_API_KEY}\n  - name: murmur/tool-grep\n    version: \"1.0.0\"\ninference:\n  transport: http\n  model: claude-sonnet-5\n  driver:\n    artifact: murmur/driver-anthropic\n",
    )
    .unwrap();
    // Without a store copy, mur fetches nothing for it and pins nothing.
    let o = mur(&e, &e.project, &["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!lock(&e).contains("driver-anthropic"), "{}", lock(&e));
    assert!(
        !e.fake.requests().iter().any(|r| r.contains("driver")),
        "{:?}",
        e.fake.requests()
    );
    // The original's `mur install` filed its WebAssembly driver in the global store.
    let driver = mur::artifact::payload::zip_entries(vec![
        (
            "murmur.yaml".into(),
            b"name: driver-anthropic\nversion: 0.19.0\nruntime: driver\n".to_vec(),
            false,
        ),
        ("driver.wasm".into(), b"\0asm\x01\0\0\0".to_vec(), false),
    ])
    .unwrap();
    let payload = mur::artifact::unpack(&driver, "driver").unwrap();
    mur::artifact::Store::global(&e.home)
        .put(
            &mur::manifest::ArtifactName::parse("murmur/driver-anthropic").unwrap(),
            &driver,
            &payload,
            None,
            Some(190196424),
        )
        .unwrap();
    let o = mur(&e, &e.project, &["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("Installed murmur/driver-anthropic@0.19.0 from global store\n"),
        "{}",
        o.stdout
    );
    assert!(
        lock(&e).contains(&format!("  - name: murmur/driver-anthropic\n    resolved_version: \"0.19.0\"\n    sha256:\n      any: \"{}\"\n    origin: operator\n    owner_id: 190196424\n", sha(&driver))),
        "{}",
        lock(&e)
    );
    // mur keeps running its own built-in driver; the pin is there for the original.
    let o = mur(&e, &e.project, &["doctor"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn install_says_built_in_drivers_need_nothing_and_refuses_bad_references_offline() {
    let e = env();
    std::fs::write(
        e.project.join("murmur.yaml"),
        "name: a\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: s.json\n",
    )
    .unwrap();
    let o = mur(&e, &e.project, &["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "Nothing to install: murmur.yaml declares only mur/driver-script built into mur, which needs no fetching.\n"
    );
    let o = mur(&e, &e.project, &["install", "murmur/share-file"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.starts_with("error[E-CAP-013]: artifact 'murmur/share-file' has the tool name 'share-file', which collides with a tool the runtime provides itself"),
        "{}",
        o.stderr
    );
    let o = mur(&e, &e.project, &["install", "murmur/tool-edit@a/b"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .starts_with("error[E-IO-003]: version of murmur/tool-edit: "),
        "{}",
        o.stderr
    );
    assert!(e.fake.requests().is_empty(), "{:?}", e.fake.requests());
    assert_eq!(lock(&e), "");
}

#[test]
fn install_json_lists_what_was_filed_and_what_failed() {
    let e = env();
    let o = mur(&e, &e.project, &["install", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"ok": true, "installed": [{"artifact": "murmur/tool-grep", "version": "1.0.0", "from": "github:murmur-nexus/default-artifacts", "adopted_from_session": null}], "failed": [], "note": null})
    );
    let o = mur(
        &e,
        &e.project,
        &["install", "murmur/tool-edit@9.9.9", "--json"],
    );
    assert_eq!(o.code, 1);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["installed"], serde_json::json!([]));
    assert_eq!(v["failed"][0]["artifact"], "murmur/tool-edit@9.9.9");
    assert_eq!(v["failed"][0]["code"], "E-REG-001");
    assert!(o.stderr.starts_with("error[E-REG-001]: "), "{}", o.stderr);
}

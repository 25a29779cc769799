//! The command line explains itself: every subcommand's `--help` shows examples, and
//! `mur completions` and `mur man` print what shells and `man` read.

mod common;

use common::*;

const SUBCOMMANDS: [&str; 10] = [
    "run",
    "node",
    "doctor",
    "trace",
    "build",
    "install",
    "list",
    "completions",
    "explain",
    "man",
];

#[test]
fn every_subcommand_help_has_an_example() {
    for sub in SUBCOMMANDS {
        let out = mur().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub}");
        let text = stdout(&out);
        assert!(
            text.contains("Example") && text.contains(&format!("mur {sub}")),
            "mur {sub} --help shows no example:\n{text}"
        );
    }
}

/// Each command is described once, alike in `mur --help`'s list, atop its own `--help` and in
/// the man page. The commands' arguments are built lazily, and a command whose options are a
/// struct must not have its description replaced by the struct's when they are built.
#[test]
fn each_subcommand_has_one_description_everywhere() {
    let top = stdout(&mur().arg("--help").output().unwrap());
    let page = stdout(&mur().arg("man").output().unwrap());
    for (sub, about) in [
        ("run", "Run a capsule: start it as a tree of actors"),
        ("node", "Host sub"),
        ("replay", "Run a recorded session again offline"),
        ("resume", "Continue a session that failed"),
        ("doctor", "Validate a murmur.yaml without running it"),
    ] {
        let own = stdout(&mur().args([sub, "--help"]).output().unwrap());
        assert!(own.starts_with(about), "mur {sub} --help:\n{own}");
        let listed = top
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{sub} ")))
            .unwrap_or_else(|| panic!("mur --help lists no {sub}:\n{top}"));
        assert!(listed.contains(about), "mur --help: {listed}");
        assert!(page.contains(about), "the man page lacks '{about}'");
    }
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = mur().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let out = mur().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_man_page_is_roff_naming_the_subcommands() {
    let out = mur().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = stdout(&out);
    assert!(page.contains(".TH mur 1"), "{page}");
    for sub in ["run", "doctor", "install"] {
        assert!(page.contains(sub), "{sub}");
    }
}

#[test]
fn run_and_doctor_print_one_json_object_with_json() {
    let p = Project::example("hello");
    let out = p
        .mur_cmd(&["run", "--task", "Say hello", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "one object, nothing else: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["totals"]["turns"], 3);
    assert_eq!(v["totals"]["shell_calls"], 2);
    let session = v["session"].as_str().unwrap();
    assert!(session.starts_with("ses_"));
    assert_eq!(
        std::fs::read_to_string(v["result"].as_str().unwrap()).unwrap(),
        "Hello! I wrote greeting.txt in my work folder and listed it: the shell tools work."
    );
    assert!(std::path::Path::new(v["trace"].as_str().unwrap()).is_file());
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let out = p.mur_cmd(&["doctor", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["name"], "hello");
    assert_eq!(v["file"], "murmur.yaml");

    p.write("murmur.yaml", "name: [broken\n");
    let out = p.mur_cmd(&["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["diagnostics"][0]["severity"], "error");
    assert_eq!(v["diagnostics"][0]["code"], "E-MAN-002");
    let out = p
        .mur_cmd(&["run", "--task", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["session"], serde_json::Value::Null);
}

/// Every `.rs` file under `dir`.
fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_code_the_code_can_print_is_explained() {
    let code = regex::Regex::new(r"(?-u:\b)[EW]-[A-Z]+-[0-9]{3}(?-u:\b)").unwrap();
    let mut files = Vec::new();
    sources(&repo().join("src"), &mut files);
    sources(&repo().join("actors/src"), &mut files);
    let mut missing = std::collections::BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for m in code.find_iter(&text) {
            if mur::explain::entry(m.as_str()).is_none() {
                missing.insert(format!("{} ({})", m.as_str(), f.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "codes docs/errors.md does not explain: {missing:#?}"
    );
    let out = mur().args(["explain", "E-RUN-008"]).output().unwrap();
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("E-RUN-008\n\nDeclared artifacts are in neither"));
    let out = mur().args(["explain", "E-XYZ-999"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: 'E-XYZ-999' is not a mur diagnostic code"));
}

//! A declared artifact this runtime cannot run (a WebAssembly tool or hook, a hook whose
//! commit policy or binding is not wired, a packed capsule, a driver that is not built in) is
//! refused by `mur run` before anything runs, and by `mur doctor`, naming the artifact and what
//! is unsupported. It is never skipped quietly: an operator who declared a guard must not
//! believe it runs.

mod common;

use common::*;

const HOOKS: &str = "mur runs native hooks that are blocking, have commit_policy: deny, and are bound to on-tool-call or on-shell";

/// Packs `files` as a `.mur.zip` and installs it into the project store.
fn install(p: &Project, file: &str, files: Vec<(&str, &str, bool)>) {
    let zip = mur::artifact::payload::zip_entries(
        files
            .into_iter()
            .map(|(path, text, exec)| (path.to_string(), text.as_bytes().to_vec(), exec))
            .collect(),
    )
    .unwrap();
    std::fs::write(p.path().join(file), zip).unwrap();
    let out = p.mur(&["install", &format!("./{file}")]);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn manifest(p: &Project, entry: &str) {
    p.write(
        "murmur.yaml",
        &format!("name: probe\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n{entry}capabilities:\n  shell:\n    allow: [bash]\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n"),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: bash, input: {command: 'echo ran > ran.txt'}}]\n  - say: done\n",
    );
}

/// `mur run` and `mur doctor` both refuse, with `message` in the refusal; nothing ran.
fn refused(p: &Project, message: &str) {
    let run = p.mur(&["run", "--task", "x"]);
    assert_eq!(run.status.code(), Some(1), "{}", stdout(&run));
    let err = stderr(&run);
    assert!(err.starts_with("error[E-RUN-061]: murmur.yaml declares an artifact this mur cannot run, and a declared artifact is never skipped: "), "{err}");
    assert!(err.contains(message), "{err}\nwanted: {message}");
    assert!(
        p.work_folders().iter().all(|w| !w.join("ran.txt").exists()),
        "nothing ran"
    );
    let doctor = p.mur(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{}", stdout(&doctor));
    assert!(stderr(&doctor).contains(message), "{}", stderr(&doctor));
    assert!(
        stderr(&doctor).ends_with("murmur.yaml: 1 error; fix it and run mur doctor again\n"),
        "{}",
        stderr(&doctor)
    );
}

#[test]
fn the_real_regression_verifier_hook_is_refused_not_skipped() {
    let p = Project::new();
    manifest(&p, "");
    // The shape of murmur-nexus/default-artifacts' murmur-hook-regression-verifier.
    install(
        &p,
        "verifier.mur.zip",
        vec![
            ("murmur.yaml", "name: hook-regression-verifier\nversion: 0.1.0\nruntime: hook\ndescription: Reopens the task when the tests regress.\nbinding: [on-task-end]\nexecution_mode: blocking\ncommit_policy: reopen-task\n", false),
            ("hook.wasm", "\0asm\x01\0\0\0", false),
        ],
    );
    manifest(
        &p,
        "  - name: local/hook-regression-verifier\n    version: \"0.1.0\"\n    runtime: hook\n",
    );
    refused(&p, "local/hook-regression-verifier@0.1.0 (hook): it is a WebAssembly hook (implementation: wasm); mur runs native tools and hooks (implementation: native)");
}

#[test]
fn a_native_hook_with_a_policy_or_binding_mur_does_not_wire_is_refused() {
    let cases = [
        (
            "binding: [on-task-end]\ncommit_policy: reopen-task\n",
            format!("local/guard@0.1.0 (hook): its commit_policy 'reopen-task' (binding on-task-end) is not supported; {HOOKS}"),
        ),
        (
            "binding: [on-tool-call]\ncommit_policy: none\n",
            format!("local/guard@0.1.0 (hook): its commit_policy 'none' (binding on-tool-call) is not supported; {HOOKS}"),
        ),
        (
            "commit_policy: deny\n",
            format!("local/guard@0.1.0 (hook): it names no binding, and a deny hook must name the events it decides on; {HOOKS}"),
        ),
        (
            "binding: [on-shell, on-inference]\ncommit_policy: deny\n",
            format!("local/guard@0.1.0 (hook): its binding on-inference is not supported with commit_policy: deny; {HOOKS}"),
        ),
        (
            "binding: [on-shell]\nexecution_mode: async\ncommit_policy: none\n",
            format!("local/guard@0.1.0 (hook): its commit_policy 'none' (binding on-shell) is not supported; {HOOKS}"),
        ),
    ];
    for (hook, message) in cases {
        let p = Project::new();
        manifest(&p, "");
        install(
            &p,
            "guard.mur.zip",
            vec![
                (
                    "murmur.yaml",
                    &format!("name: guard\nversion: 0.1.0\nruntime: hook\nimplementation: native\n{hook}"),
                    false,
                ),
                ("bin/guard", "#!/bin/sh\necho '{\"decision\":\"none\"}'\n", true),
            ],
        );
        manifest(
            &p,
            "  - name: local/guard\n    version: \"0.1.0\"\n    runtime: hook\n",
        );
        refused(&p, &message);
    }
}

#[test]
fn a_webassembly_tool_and_a_packed_capsule_are_refused() {
    let p = Project::new();
    manifest(&p, "");
    install(
        &p,
        "fmt.mur.zip",
        vec![
            (
                "murmur.yaml",
                "name: tool-fmt\nversion: 1.0.0\nruntime: tool\ndescription: Formats.\n",
                false,
            ),
            ("tool-fmt.wasm", "\0asm\x01\0\0\0", false),
        ],
    );
    manifest(&p, "  - name: local/tool-fmt\n    version: \"1.0.0\"\n");
    refused(&p, "local/tool-fmt@1.0.0 (tool): it is a WebAssembly tool (implementation: wasm); mur runs native tools and hooks (implementation: native)");

    let p = Project::new();
    manifest(&p, "");
    install(
        &p,
        "helper.mur.zip",
        vec![("murmur.yaml", "name: helper\nversion: \"0.2.0\"\n", false)],
    );
    manifest(&p, "  - name: local/helper\n    version: \"0.2.0\"\n");
    refused(&p, "local/helper@0.2.0 (capsule): it packs a capsule, which is delegated to through capabilities.spawn.allow, not declared in artifacts:");
}

#[test]
fn a_supported_deny_hook_still_runs() {
    let p = Project::new();
    manifest(&p, "");
    install(
        &p,
        "guard.mur.zip",
        vec![
            ("murmur.yaml", "name: guard\nversion: 0.1.0\nruntime: hook\nimplementation: native\nbinding: [on-shell]\ncommit_policy: deny\n", false),
            ("bin/guard", "#!/bin/bash\nread -r _\necho '{\"decision\":\"deny\",\"reason\":\"no shell today\"}'\n", true),
        ],
    );
    manifest(
        &p,
        "  - name: local/guard\n    version: \"0.1.0\"\n    runtime: hook\n",
    );
    let doctor = p.mur(&["doctor"]);
    assert!(doctor.status.success(), "{}", stderr(&doctor));
    let run = p.mur(&["run", "--task", "x"]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(p.work_folders().iter().all(|w| !w.join("ran.txt").exists()));
    let t = trace(&p.sessions()[0].join("trace.jsonl"));
    assert!(
        t.iter().any(|l| l.to_string().contains("no shell today")),
        "the hook refused the call"
    );
}

#[test]
fn a_driver_entry_that_is_not_built_in_is_a_launch_problem() {
    let p = Project::new();
    manifest(
        &p,
        "  - name: murmur/driver-gemini\n    version: \"0.1.0\"\n    runtime: driver\n",
    );
    let run = p.mur(&["run", "--task", "x"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr(&run).starts_with("error[E-RUN-006]: artifacts: declares the driver 'murmur/driver-gemini', which is not built into mur; mur runs murmur/driver-anthropic, murmur/driver-openai, mur/driver-script"),
        "{}",
        stderr(&run)
    );
    let doctor = p.mur(&["doctor"]);
    assert!(
        stdout(&doctor).contains("note: mur run will refuse this capsule: artifacts: declares the driver 'murmur/driver-gemini'"),
        "{}",
        stdout(&doctor)
    );
}

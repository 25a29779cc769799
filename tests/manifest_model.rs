//! The typed manifest: what `parse_str` / `load` hand to the rest of `mur` for valid input.

use std::path::{Path, PathBuf};

use mur::manifest::{
    self, ArtifactName, ArtifactRuntime, BuiltinDriver, Capture, Containment, Credential,
    InstallFrom, InstallPattern, ToolRefresh, Transport,
};

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests")
        .join(case)
        .join("murmur.yaml")
}

fn shared(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/conformance/manifests")
        .join(case)
        .join("murmur.yaml")
}

#[test]
fn seed_manifest_reads_into_the_typed_model() {
    let loaded = manifest::load(&shared("ok-seed-anthropic")).expect("seed manifest loads");
    assert!(loaded.warnings.is_empty());
    assert_eq!(loaded.dir, shared("ok-seed-anthropic").parent().unwrap());
    let m = &loaded.manifest;
    assert_eq!(
        (m.name.as_str(), m.version.as_str()),
        ("coding-agent", "0.1.0")
    );
    let driver = m.driver().expect("driver entry");
    assert_eq!(driver.name.as_str(), "murmur/driver-anthropic");
    assert_eq!(driver.version, "0.19.0");
    assert_eq!(driver.runtime, ArtifactRuntime::Driver);
    assert_eq!(driver.builtin_driver(), Some(BuiltinDriver::Anthropic));
    assert!(driver.config.is_null());
    let gw = driver.gateway.as_ref().expect("gateway");
    assert_eq!(gw.endpoint, "https://api.anthropic.com");
    assert_eq!(
        gw.credential,
        Credential::ApiKey("${ANTHROPIC_API_KEY}".into())
    );
    assert_eq!(m.shell_binaries(), ["git", "cargo"]);
    let install = m.capabilities.install.as_ref().expect("install grant");
    assert_eq!(
        install.tool,
        vec![InstallPattern::parse("murmur/tool-*").unwrap()]
    );
    assert!(install.skill.is_empty());
    assert_eq!(
        install.from,
        vec![InstallFrom::Stores, InstallFrom::Sources]
    );
    assert!(install.from_sources());
    let inf = m.inference.as_ref().expect("inference");
    assert_eq!(inf.transport, Transport::Http);
    assert_eq!(inf.model, "claude-sonnet-5");
    assert_eq!(inf.max_turns, None);
    assert_eq!(
        m.granted_runtime_tools(),
        vec!["pull-artifact", "remove-artifact"]
    );
    assert!(m.launch_problems().is_empty());
    assert_eq!(
        m.installable_artifacts().count(),
        0,
        "built-in drivers are never fetched"
    );
}

#[test]
fn defaults_are_upstream_defaults() {
    let (m, warnings) = manifest::parse_str(
        "name: c\nversion: \"1\"\ncapabilities:\n  install:\n    tool: [\"ana/*\"]\n",
    )
    .unwrap();
    assert!(warnings.is_empty());
    assert_eq!(
        m.capabilities.install.unwrap().from,
        vec![InstallFrom::Stores]
    );
    assert_eq!(m.lifecycle.delegation_deadline_secs, 600);
    assert_eq!(m.trace.capture, Capture::Meta);
    assert_eq!(m.capabilities.limits.deadline().as_secs(), 600);
    assert!(m.inference.is_none());
    assert!(m.artifacts.is_empty());
    assert!(m.exports.is_none());
}

#[test]
fn all_grants_make_all_runtime_tools() {
    let m = manifest::load(&shared("ok-all-grants")).unwrap().manifest;
    assert_eq!(
        m.granted_runtime_tools(),
        vec![
            "share-file",
            "fetch-peer-file",
            "delegate-task",
            "submit-plan",
            "pull-artifact",
            "remove-artifact"
        ]
    );
    let spawn = m.capabilities.spawn.as_ref().unwrap();
    assert_eq!(
        spawn.allow,
        vec![ArtifactName::parse("local/researcher").unwrap()]
    );
    assert!(m.capabilities.plan_submit());
    assert_eq!(
        m.capabilities.peer_fetch.as_ref().unwrap().allow,
        ["http://127.0.0.1:9000"]
    );
    let pf = m.exports.as_ref().unwrap().peer_files.as_ref().unwrap();
    assert_eq!(pf.root, PathBuf::from("out"));
    assert_eq!(pf.max_ttl, Some(600));
    assert_eq!(pf.max_bytes, 10 * 1024 * 1024);
    let install = m.capabilities.install.as_ref().unwrap();
    assert_eq!(install.skill, vec![InstallPattern::Any]);
    assert_eq!(install.tool.len(), 2);
}

#[test]
fn no_grant_means_no_runtime_tool() {
    let m = manifest::load(&shared("ok-shell-only")).unwrap().manifest;
    assert!(m.granted_runtime_tools().is_empty());
    assert_eq!(m.shell_binaries(), ["bash"]);
    let (m, _) =
        manifest::parse_str("name: c\nversion: \"1\"\ncapabilities:\n  plan:\n    submit: false\n")
            .unwrap();
    assert!(m.granted_runtime_tools().is_empty());
}

#[test]
fn scripted_driver_needs_no_version_and_keeps_its_script_path() {
    let loaded = manifest::load(&fixture("ok-script-driver")).unwrap();
    let m = &loaded.manifest;
    let d = m.driver().unwrap();
    assert_eq!(d.builtin_driver(), Some(BuiltinDriver::Script));
    assert_eq!(d.version, "0.0.0");
    assert_eq!(d.script_path(), Some(PathBuf::from("turns.json")));
    assert_eq!(
        loaded.resolve(&d.script_path().unwrap()),
        fixture("ok-script-driver")
            .parent()
            .unwrap()
            .join("turns.json")
    );
    assert!(d.gateway.is_none());
    let inf = m.inference.as_ref().unwrap();
    assert_eq!(inf.transport, Transport::Http, "transport defaults to http");
    assert_eq!(inf.max_turns, Some(8));
    assert!(m.launch_problems().is_empty());
}

#[test]
fn keyless_local_endpoint_and_retry_settings() {
    let m = manifest::load(&fixture("ok-keyless-local"))
        .unwrap()
        .manifest;
    let d = m.driver().unwrap();
    assert_eq!(d.builtin_driver(), Some(BuiltinDriver::OpenAi));
    let gw = d.gateway.as_ref().unwrap();
    assert_eq!(gw.credential, Credential::Keyless);
    assert_eq!(gw.endpoint, "http://127.0.0.1:11434/v1");
    let inf = m.inference.as_ref().unwrap();
    assert_eq!(inf.retry.max_retries, 2);
    assert_eq!(inf.retry.initial_delay_ms, 10);
    assert_eq!(inf.retry.max_delay_ms, 100);
    assert_eq!(inf.tool_refresh, ToolRefresh::Immediate);
    let (m, _) = manifest::parse_str(
        "name: c\nversion: \"1\"\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config: {script: s.json}\ninference:\n  model: m\n  driver: {artifact: mur/driver-script}\n",
    )
    .unwrap();
    let retry = m.inference.unwrap().retry;
    assert_eq!(
        (
            retry.max_retries,
            retry.initial_delay_ms,
            retry.max_delay_ms
        ),
        (6, 1000, 60000)
    );
}

#[test]
fn every_section_of_a_full_manifest_is_typed() {
    let m = manifest::load(&fixture("ok-everything")).unwrap().manifest;
    let roles: Vec<(&str, ArtifactRuntime)> = m
        .artifacts
        .iter()
        .map(|a| (a.name.as_str(), a.runtime))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("murmur/driver-anthropic", ArtifactRuntime::Driver),
            ("ana/policy", ArtifactRuntime::Hook),
            ("ana/style", ArtifactRuntime::Skill),
            ("local/notes", ArtifactRuntime::Skill),
        ]
    );
    let hook = m.hooks().next().unwrap();
    assert_eq!(hook.config, serde_json::json!({"deny": ["rm"]}));
    assert_eq!(hook.on_overflow, Some(manifest::OnOverflow::Block));
    let notes = &m.artifacts[3];
    assert_eq!(notes.source, Some(PathBuf::from("notes")));
    assert_eq!(notes.version, "local");
    assert!(notes.prompt_payload && notes.local_source);
    assert_eq!(
        m.model_visible_artifacts()
            .map(|a| a.tool_name())
            .collect::<Vec<_>>(),
        ["style", "notes"]
    );
    assert_eq!(
        m.installable_artifacts()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["ana/policy", "ana/style"]
    );
    let caps = &m.capabilities;
    assert_eq!(caps.network.as_ref().unwrap().allow.len(), 2);
    assert_eq!(
        caps.filesystem.as_ref().unwrap().scope.as_deref(),
        Some(".")
    );
    assert_eq!(caps.limits.deadline_seconds, Some(30));
    assert_eq!(caps.containment, Some(Containment::Advisory));
    assert!(!caps.plan_submit());
    let inf = m.inference.as_ref().unwrap();
    assert_eq!(inf.max_tokens, Some(4096));
    assert_eq!(inf.max_turns, Some(20));
    assert_eq!(inf.system_prompt_file, Some(PathBuf::from("prompt.md")));
    assert_eq!(m.lifecycle.delegation_deadline_secs, 120);
    assert_eq!(m.trace.capture, Capture::Content);
    let pf = m.exports.as_ref().unwrap().peer_files.as_ref().unwrap();
    assert_eq!((pf.max_ttl, pf.max_bytes), (Some(3600), 1024 * 1024));
}

#[test]
fn transport_process_loads_but_cannot_launch() {
    let (m, _) = manifest::parse_str(
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-claude-code\n    version: \"0.1.0\"\n    runtime: driver\ninference:\n  transport: process\n  driver:\n    artifact: murmur/driver-claude-code\n",
    )
    .unwrap();
    assert_eq!(m.inference.as_ref().unwrap().transport, Transport::Process);
    let problems = m.launch_problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].code, "E-RUN-005");
}

#[test]
fn a_driver_mur_does_not_build_in_is_refused_at_launch() {
    let (m, _) = manifest::parse_str(
        "name: c\nversion: \"1\"\nartifacts:\n  - name: ana/driver-x\n    version: \"1\"\n    runtime: driver\n    gateway: {endpoint: https://x.example, keyless: true}\ninference:\n  model: m\n  driver:\n    artifact: ana/driver-x\n",
    )
    .unwrap();
    let problems = m.launch_problems();
    assert_eq!(problems[0].code, "E-RUN-006");
    assert!(problems[0]
        .message
        .contains("'ana/driver-x' is not built into mur"));
}

#[test]
fn unknown_keys_ride_along_as_warnings_on_success_and_failure() {
    let (_, warnings) = manifest::parse_str("name: c\nversion: \"1\"\ncapabilitys: {}\n").unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].code, "W-SEC-019");
    let errs = manifest::parse_str("name: c\ncapabilitys: {}\n").unwrap_err();
    let codes: Vec<&str> = errs.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(
        codes,
        ["E-MAN-001", "W-SEC-019"],
        "errors first, then warnings"
    );
}

#[test]
fn several_independent_errors_are_all_reported_in_upstream_order() {
    let errs = manifest::parse_str(
        "version: \"1\"\ncapabilities:\n  shell:\n    allow: [/bin/sh]\n  plan: {}\n",
    )
    .unwrap_err();
    let fields: Vec<String> = errs.iter().map(|d| d.message.clone()).collect();
    assert_eq!(fields.len(), 3, "{fields:#?}");
    assert!(fields[0].contains("missing required field 'name'"));
    assert!(fields[1].contains("'capabilities.shell.allow[0]'"));
    assert!(fields[2].contains("'capabilities.plan.submit'"));
}

#[test]
fn a_missing_file_is_e_io_001_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("murmur.yaml");
    let errs = manifest::load(&path).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].code, "E-IO-001");
    assert_eq!(
        errs[0].message,
        format!("murmur.yaml not found at {}", path.display())
    );
}

#[test]
fn yaml_anchors_and_merge_keys_are_read() {
    let (m, _) = manifest::parse_str(
        "name: c\nversion: \"1\"\nx-common: &gw {endpoint: \"https://api.openai.com/v1\", api_key: \"${K}\"}\nartifacts:\n  - name: murmur/driver-openai\n    version: \"1\"\n    runtime: driver\n    gateway:\n      <<: *gw\ninference:\n  model: m\n  driver: {artifact: murmur/driver-openai}\n",
    )
    .unwrap();
    assert_eq!(
        m.driver().unwrap().gateway.as_ref().unwrap().endpoint,
        "https://api.openai.com/v1"
    );
}

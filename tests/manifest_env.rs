//! `${NAME}` credentials: the environment first, then `.env` beside the manifest, which never
//! overrides the environment; errors name the variable and the field, never a key's value.
//!
//! Everything that changes the process environment runs inside one test function, so no other
//! thread of this test binary reads the environment while it changes.

use std::path::Path;

use mur::manifest::{self, env::resolve_credential, env::resolve_gateway_key};

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn credentials_resolve_from_environment_then_dotenv() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Names unique to this test binary.
    let (only_env, both, only_file, missing) = (
        "MUR_T_ONLY_ENV_KEY",
        "MUR_T_BOTH_KEY",
        "MUR_T_ONLY_FILE_KEY",
        "MUR_T_MISSING_KEY",
    );
    std::env::set_var(only_env, "from-env-1");
    std::env::set_var(both, "from-env-2");
    std::env::remove_var(only_file);
    std::env::remove_var(missing);
    write(
        d,
        ".env",
        "# keys for local runs\nMUR_T_BOTH_KEY=from-file-2\nMUR_T_ONLY_FILE_KEY=\"from-file-3\"\n",
    );

    assert_eq!(
        resolve_credential("${MUR_T_ONLY_ENV_KEY}", d).unwrap(),
        "from-env-1"
    );
    assert_eq!(
        resolve_credential("${MUR_T_BOTH_KEY}", d).unwrap(),
        "from-env-2",
        ".env must never override the environment"
    );
    assert_eq!(
        resolve_credential("${MUR_T_ONLY_FILE_KEY}", d).unwrap(),
        "from-file-3"
    );
    assert!(
        std::env::var(only_file).is_err(),
        "reading .env must not change the process environment"
    );

    let err = resolve_credential("${MUR_T_MISSING_KEY}", d).unwrap_err();
    assert_eq!(err.code, "E-MAN-003");
    assert!(err.message.contains("gateway.api_key"), "{}", err.message);
    assert!(
        err.message.contains("${MUR_T_MISSING_KEY}"),
        "{}",
        err.message
    );
    assert!(err.message.contains(&d.join(".env").display().to_string()));
    assert!(err
        .hint
        .as_deref()
        .unwrap()
        .contains("export MUR_T_MISSING_KEY="));

    // An empty value counts as unset, in either place.
    std::env::set_var(missing, "");
    assert!(resolve_credential("${MUR_T_MISSING_KEY}", d).is_err());
    std::env::remove_var(missing);

    // Literal keys are returned as written, and never need the environment.
    assert_eq!(
        resolve_credential("sk-literal-123", d).unwrap(),
        "sk-literal-123"
    );

    // Without a .env file the environment alone answers.
    let bare = tempfile::tempdir().unwrap();
    assert_eq!(
        resolve_credential("${MUR_T_ONLY_ENV_KEY}", bare.path()).unwrap(),
        "from-env-1"
    );
    assert!(resolve_credential("${MUR_T_ONLY_FILE_KEY}", bare.path()).is_err());

    // A malformed .env is reported without quoting its lines (they may hold keys).
    let broken = tempfile::tempdir().unwrap();
    write(
        broken.path(),
        ".env",
        "GOOD=1\nthis is not a line sk-secret-value\n",
    );
    let err = resolve_credential("${MUR_T_ONLY_FILE_KEY}", broken.path()).unwrap_err();
    assert_eq!(err.code, "E-IO-003");
    assert!(!err.message.contains("sk-secret-value"), "{}", err.message);

    // Through a loaded manifest: the error names the artifact, and keyless needs nothing.
    write(
        d,
        "murmur.yaml",
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-openai\n    version: \"1\"\n    runtime: driver\n    gateway:\n      endpoint: https://api.openai.com/v1\n      api_key: ${MUR_T_MISSING_KEY}\n  - name: ana/tool-x\n    version: \"1\"\n    gateway: {endpoint: \"http://localhost:9\", keyless: true}\n  - name: ana/tool-y\n    version: \"1\"\n    gateway: {endpoint: \"https://y.example\", api_key: \"${MUR_T_BOTH_KEY}\"}\ninference:\n  model: m\n  driver: {artifact: murmur/driver-openai}\n",
    );
    let loaded = manifest::load(&d.join("murmur.yaml")).unwrap();
    let arts = &loaded.manifest.artifacts;
    let err = resolve_gateway_key(&arts[0], &loaded.dir).unwrap_err();
    assert!(
        err.message.starts_with(
            "murmur.yaml: gateway.api_key on artifact 'murmur/driver-openai' references ${MUR_T_MISSING_KEY}"
        ),
        "{}",
        err.message
    );
    assert_eq!(resolve_gateway_key(&arts[1], &loaded.dir).unwrap(), None);
    assert_eq!(
        resolve_gateway_key(&arts[2], &loaded.dir)
            .unwrap()
            .as_deref(),
        Some("from-env-2")
    );
}

#[test]
fn literal_keys_never_appear_in_diagnostics_or_debug_output() {
    // A literal key on a bad endpoint: the refusal must not echo the key.
    let errs = manifest::parse_str(
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-openai\n    version: \"1\"\n    runtime: driver\n    gateway:\n      endpoint: http://remote.example/v1\n      api_key: sk-very-secret\ninference:\n  model: m\n  driver: {artifact: murmur/driver-openai}\n",
    )
    .unwrap_err();
    assert!(errs
        .iter()
        .all(|d| !d.to_string().contains("sk-very-secret")));
    let (m, _) = manifest::parse_str(
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-openai\n    version: \"1\"\n    runtime: driver\n    gateway:\n      endpoint: https://api.openai.com/v1\n      api_key: sk-very-secret\ninference:\n  model: m\n  driver: {artifact: murmur/driver-openai}\n",
    )
    .unwrap();
    assert!(!format!("{m:?}").contains("sk-very-secret"));
}

//! Colour follows `--color`, `NO_COLOR` and `CLICOLOR_FORCE`; piped output and logs are plain.

mod common;

use common::*;

#[test]
fn colour_follows_the_flag_and_the_environment_and_logs_stay_plain_when_piped() {
    let p = Project::example("hello");
    let home = p.path().join("home");
    let run = p
        .mur_cmd(&["run", "--task", "Say hello", "-vv"])
        .env("HOME", &home)
        .env("MURMUR_HOME", &home)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        !stderr(&run).contains('\x1b'),
        "logs into a pipe carry no ANSI codes: {}",
        stderr(&run)
    );
    let trace = p.sessions()[0].join("trace.jsonl");
    let trace = trace.to_str().unwrap();
    let show = |flags: &[&str], env: &[(&str, &str)]| {
        let mut c = mur();
        c.args(flags)
            .args(["trace", "show", trace])
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).contains('\x1b')
    };
    assert!(!show(&[], &[]), "piped: plain");
    assert!(show(&["--color", "always"], &[]));
    assert!(!show(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
    assert!(show(&[], &[("CLICOLOR_FORCE", "1")]));
    assert!(!show(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]));
    assert!(!show(&[], &[("CLICOLOR_FORCE", "0")]));
}

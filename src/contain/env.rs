//! The environment a contained command sees: a baseline, never a credential.
//!
//! A command does not inherit `mur`'s environment. It gets a baseline (`PATH`, `LANG`,
//! `LANGUAGE`, `LC_*`, `TERM`, `TZ`, `USER`, `LOGNAME`), the names the manifest passes through
//! with `shell.baseline_env` (globs), minus `shell.strip_env` (globs), and `HOME` / `TMPDIR`
//! pointing at the session's own scratch folders. Two things are never passed, whatever a glob
//! says: a variable a gateway binds (`api_key: ${NAME}`), and the credential backstop
//! ([`BACKSTOP`]). Naming a backstop variable in `baseline_env` or `env.allow` is refused at
//! staging (E-CAP-016).

use std::ffi::OsString;

use globset::{GlobSet, GlobSetBuilder};

/// Variables every command gets from `mur`'s environment when set.
pub const BASELINE: &[&str] = &[
    "PATH", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "USER", "LOGNAME",
];

/// Credential-shaped names no command ever sees (matched case-insensitively).
pub const BACKSTOP: &[&str] = &[
    "*_API_KEY",
    "*_APIKEY",
    "*_KEY",
    "*_TOKEN",
    "*_SECRET*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "AWS_*",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "SSH_AUTH_SOCK",
    "MUR_CLUSTER_COOKIE",
];

fn glob(p: &str) -> Result<globset::Glob, String> {
    globset::GlobBuilder::new(p)
        .case_insensitive(true)
        .literal_separator(false)
        .build()
        .map_err(|e| format!("'{p}' is not a valid glob: {e}"))
}

fn set(patterns: &[impl AsRef<str>]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(glob(p.as_ref())?);
    }
    b.build().map_err(|e| e.to_string())
}

/// The backstop as a glob set.
pub fn backstop() -> &'static GlobSet {
    static SET: std::sync::OnceLock<GlobSet> = std::sync::OnceLock::new();
    SET.get_or_init(|| set(BACKSTOP).expect("the backstop globs are valid"))
}

/// Whether the backstop strips `name` (a variable name, or a glob written as one).
pub fn stripped_by_backstop(name: &str) -> bool {
    backstop().is_match(name)
}

/// How a session builds its commands' environments.
///
/// The globs are checked when the plan is made (a bad one is a launch error), but compiled,
/// and `mur`'s environment filtered through them, only when a command first needs the
/// variables: that costs about half a millisecond, which a session that never runs a command
/// (most sub-agents) does not pay.
#[derive(Clone, Debug)]
pub struct EnvPlan {
    /// The environment to filter; `None` is `mur`'s own, read at first use.
    host: Option<Vec<(OsString, OsString)>>,
    keep: Vec<String>,
    strip: Vec<String>,
    gateway_names: Vec<String>,
    /// Variables added after filtering (toolchain homes of granted runtime folders).
    extra: Vec<(OsString, OsString)>,
    vars: std::sync::OnceLock<Vec<(OsString, OsString)>>,
}

impl EnvPlan {
    /// A plan over `host` (`None`: `mur`'s environment when first used): baseline and
    /// `baseline_env` globs, minus `strip_env`, gateway-bound names and the backstop. Answers
    /// the first glob that does not parse.
    pub fn new(
        host: Option<Vec<(OsString, OsString)>>,
        baseline_env: &[String],
        strip_env: &[String],
        gateway_names: &[String],
    ) -> Result<EnvPlan, String> {
        let mut keep: Vec<String> = BASELINE.iter().map(|s| s.to_string()).collect();
        keep.extend(baseline_env.iter().cloned());
        for p in keep.iter().chain(strip_env) {
            glob(p)?;
        }
        Ok(EnvPlan {
            host,
            keep,
            strip: strip_env.to_vec(),
            gateway_names: gateway_names.to_vec(),
            extra: Vec::new(),
            vars: std::sync::OnceLock::new(),
        })
    }

    /// Add `name=value` after filtering (a variable the runtime sets itself).
    pub fn add(&mut self, name: OsString, value: OsString) {
        self.extra.push((name, value));
    }

    /// The variables taken from the environment, in a stable order, then the added ones.
    pub fn vars(&self) -> &[(OsString, OsString)] {
        self.vars.get_or_init(|| {
            // The globs parsed when the plan was made, so they compile.
            let (Ok(keep), Ok(strip)) = (set(&self.keep), set(&self.strip)) else {
                return self.extra.clone();
            };
            let host = match &self.host {
                Some(h) => h.clone(),
                None => std::env::vars_os().collect(),
            };
            let mut vars: Vec<(OsString, OsString)> = host
                .into_iter()
                .filter(|(k, _)| {
                    let Some(name) = k.to_str() else { return false };
                    keep.is_match(name)
                        && !strip.is_match(name)
                        && !stripped_by_backstop(name)
                        && !self.gateway_names.iter().any(|g| g == name)
                        && name != "HOME"
                        && name != "TMPDIR"
                })
                .collect();
            vars.sort();
            vars.extend(self.extra.iter().cloned());
            vars
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn keys_never_pass_even_through_a_star() {
        let h = host(&[
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "k"),
            ("openai_api_key", "k"),
            ("AWS_PROFILE", "p"),
            ("MY_GATEWAY", "k"),
            ("GITHUB_TOKEN", "t"),
            ("DB_PASSWORD", "p"),
            ("EDITOR", "vi"),
            ("HOME", "/root"),
        ]);
        let plan = EnvPlan::new(
            Some(h),
            &["*".into()],
            &["EDITOR".into()],
            &["MY_GATEWAY".into()],
        )
        .unwrap();
        let names: Vec<_> = plan
            .vars()
            .iter()
            .map(|(k, _)| k.to_str().unwrap())
            .collect();
        assert_eq!(names, ["LC_ALL", "PATH"]);
    }

    #[test]
    fn without_baseline_env_only_the_baseline_passes() {
        let h = host(&[("PATH", "/bin"), ("EDITOR", "vi"), ("TERM", "xterm")]);
        let plan = EnvPlan::new(Some(h), &[], &[], &[]).unwrap();
        let names: Vec<_> = plan
            .vars()
            .iter()
            .map(|(k, _)| k.to_str().unwrap())
            .collect();
        assert_eq!(names, ["PATH", "TERM"]);
    }

    #[test]
    fn the_backstop_names_credentials_not_ordinary_variables() {
        for n in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_*",
            "X_SECRET_Y",
            "PGPASSWORD",
        ] {
            assert!(stripped_by_backstop(n), "{n}");
        }
        for n in ["PATH", "RUSTUP_HOME", "CARGO_HOME", "*", "LANG"] {
            assert!(!stripped_by_backstop(n), "{n}");
        }
    }
}

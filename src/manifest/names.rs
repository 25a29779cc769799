//! Artifact names, install patterns, reserved tool names and version strings.
//!
//! Every artifact is named `<scope>/<name>`; the bare part is the tool name the model sees and
//! the directory it is staged under, so these rules guard both the model's tool list and paths
//! on disk. Install patterns are a tiny grammar of their own (not shell globs) because a grant
//! must mean exactly what the operator wrote. Messages follow upstream Murmur's wording.

use std::fmt;

/// Longest scope or bare name, in characters.
pub const MAX_NAME_PART_LEN: usize = 100;

/// Tool names the runtime provides itself; no artifact may claim one (E-CAP-013).
pub use mur_actors::tool::RUNTIME_TOOLS as RESERVED_TOOL_NAMES;

/// True when `tool_name` (a bare name) is one of [`RESERVED_TOOL_NAMES`]. Exact, case-sensitive.
pub fn is_reserved_tool_name(tool_name: &str) -> bool {
    RESERVED_TOOL_NAMES.contains(&tool_name)
}

/// The reserved names as the comma list used in messages.
pub fn reserved_tool_names_list() -> String {
    RESERVED_TOOL_NAMES.join(", ")
}

/// A full artifact name `<scope>/<name>`: both parts lowercase `[a-z0-9-]`, 1..=100 chars, no
/// leading or trailing `-`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactName {
    full: String,
    slash: usize,
}

/// Why a name or pattern was refused, plus the hint upstream gives for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameError {
    /// The sentence, e.g. `'x' is not a full artifact name: an artifact is named <scope>/<name>`.
    pub message: String,
    /// Suggested fix (the scoped forms), when there is one.
    pub hint: Option<String>,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks one scope or bare name; `Err` carries the reason without the name.
pub fn check_name_part(part: &str) -> Result<(), String> {
    if part.is_empty() {
        return Err("must not be empty".into());
    }
    if part.chars().count() > MAX_NAME_PART_LEN {
        return Err(format!("must be at most {MAX_NAME_PART_LEN} characters"));
    }
    if let Some(c) = part
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "may contain only lowercase letters, digits and '-' (found '{c}')"
        ));
    }
    if part.starts_with('-') || part.ends_with('-') {
        return Err("must not start or end with '-'".into());
    }
    Ok(())
}

/// The hint for a name written without its scope.
pub fn scoped_forms_hint(bare: &str) -> String {
    let murmur = bare.strip_prefix("murmur-").unwrap_or(bare);
    format!(
        "name it with its scope: 'murmur/{murmur}' for a Murmur default artifact, \
         '<owner>/{bare}' for one published from github.com/<owner>, or 'local/{bare}' for one \
         installed from a .mur.zip file"
    )
}

impl ArtifactName {
    /// Parses a full name; the error message is upstream's sentence for the problem found.
    pub fn parse(text: &str) -> Result<ArtifactName, NameError> {
        let slashes = text.matches('/').count();
        if slashes == 0 {
            let hint = check_name_part(text).ok().map(|_| scoped_forms_hint(text));
            return Err(NameError {
                message: format!(
                    "'{text}' is not a full artifact name: an artifact is named <scope>/<name>"
                ),
                hint: hint.or_else(|| Some(scoped_forms_hint("<name>"))),
            });
        }
        let invalid = |why: String| NameError {
            message: format!("'{text}' is not a valid artifact name: {why}"),
            hint: None,
        };
        if slashes > 1 {
            return Err(invalid(
                "expected exactly one '/', between the scope and the name".into(),
            ));
        }
        let slash = text.find('/').unwrap_or(0);
        let (scope, name) = (&text[..slash], &text[slash + 1..]);
        check_name_part(scope).map_err(|why| invalid(format!("the scope {why}")))?;
        check_name_part(name).map_err(|why| invalid(format!("the name {why}")))?;
        Ok(ArtifactName {
            full: text.to_string(),
            slash,
        })
    }

    /// Builds a name from two parts, checking both.
    pub fn from_parts(scope: &str, name: &str) -> Result<ArtifactName, NameError> {
        ArtifactName::parse(&format!("{scope}/{name}"))
    }

    /// The scope, e.g. `murmur`.
    pub fn scope(&self) -> &str {
        &self.full[..self.slash]
    }

    /// The bare name, e.g. `tool-edit`.
    pub fn name(&self) -> &str {
        &self.full[self.slash + 1..]
    }

    /// The tool name the model sees: the bare part.
    pub fn tool_name(&self) -> &str {
        self.name()
    }

    /// The whole `<scope>/<name>` text.
    pub fn as_str(&self) -> &str {
        &self.full
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl std::str::FromStr for ArtifactName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ArtifactName::parse(s)
    }
}

impl serde::Serialize for ArtifactName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.full)
    }
}

impl<'de> serde::Deserialize<'de> for ArtifactName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ArtifactName::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// One `capabilities.install` entry: which artifacts a capsule may pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallPattern {
    /// `*`: any artifact of any scope.
    Any,
    /// `<scope>/*`: everything in one scope.
    Scope(String),
    /// `<scope>/<prefix>*`: names in the scope starting with the prefix.
    Prefix {
        /// The scope.
        scope: String,
        /// What the bare name must start with (may end in `-`).
        prefix: String,
    },
    /// An exact full name.
    Exact(ArtifactName),
}

const PATTERN_EXPECTED: &str = "expected a full artifact name '<scope>/<name>', a scope and name \
     prefix ending in a single trailing '*' (e.g. 'ana/style-*' or 'ana/*'), or '*' alone";

impl InstallPattern {
    /// Parses an entry; the error is upstream's `entry "<e>" is invalid (<why>); expected …`.
    pub fn parse(text: &str) -> Result<InstallPattern, NameError> {
        let fail = |why: String| NameError {
            message: format!("entry \"{text}\" is invalid ({why}); {PATTERN_EXPECTED}"),
            hint: None,
        };
        if text == "*" {
            return Ok(InstallPattern::Any);
        }
        let stars = text.matches('*').count();
        if stars > 1 || (stars == 1 && !text.ends_with('*')) {
            return Err(fail(
                "'*' may appear only once, as the last character".into(),
            ));
        }
        let Some(slash) = text.find('/') else {
            if text.is_empty() {
                return Err(fail("it is empty".into()));
            }
            return Err(NameError {
                hint: Some(format!(
                    "give it a scope: 'murmur/{text}' for Murmur default artifacts, \
                     '<owner>/{text}' for ones published from github.com/<owner>, or \
                     'local/{text}' for ones installed from .mur.zip files"
                )),
                ..fail(format!("'{text}' names no scope"))
            });
        };
        let (scope, rest) = (&text[..slash], &text[slash + 1..]);
        if rest.contains('/') {
            return Err(fail(
                "expected exactly one '/', between the scope and the name".into(),
            ));
        }
        check_name_part(scope).map_err(|why| fail(format!("the scope {why}")))?;
        if stars == 0 {
            return ArtifactName::parse(text)
                .map(InstallPattern::Exact)
                .map_err(|e| fail(e.message));
        }
        let prefix = &rest[..rest.len() - 1];
        if prefix.is_empty() {
            return Ok(InstallPattern::Scope(scope.to_string()));
        }
        if let Some(c) = prefix
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Err(fail(format!(
                "the name prefix may contain only lowercase letters, digits and '-' (found '{c}')"
            )));
        }
        if prefix.starts_with('-') {
            return Err(fail("the name prefix must not start with '-'".into()));
        }
        if prefix.chars().count() > MAX_NAME_PART_LEN {
            return Err(fail(format!(
                "the name prefix must be at most {MAX_NAME_PART_LEN} characters"
            )));
        }
        Ok(InstallPattern::Prefix {
            scope: scope.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// True when the pattern admits `name`.
    pub fn matches(&self, name: &ArtifactName) -> bool {
        match self {
            InstallPattern::Any => true,
            InstallPattern::Scope(scope) => name.scope() == scope,
            InstallPattern::Prefix { scope, prefix } => {
                name.scope() == scope && name.name().starts_with(prefix.as_str())
            }
            InstallPattern::Exact(exact) => exact == name,
        }
    }

    /// True when every name this pattern admits is also admitted by `self`
    /// (used to keep a child's grant within its parent's).
    pub fn covers(&self, other: &InstallPattern) -> bool {
        use InstallPattern::*;
        match (self, other) {
            (Any, _) => true,
            (_, Any) => false,
            (Scope(a), Scope(b)) => a == b,
            (Scope(a), Prefix { scope, .. }) => a == scope,
            (Scope(_), Exact(n)) | (Prefix { .. }, Exact(n)) | (Exact(_), Exact(n)) => {
                self.matches(n)
            }
            (
                Prefix {
                    scope: a,
                    prefix: p,
                },
                Prefix {
                    scope: b,
                    prefix: q,
                },
            ) => a == b && q.starts_with(p.as_str()),
            (Prefix { .. }, Scope(_)) | (Exact(_), Scope(_)) | (Exact(_), Prefix { .. }) => false,
        }
    }
}

impl fmt::Display for InstallPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallPattern::Any => f.write_str("*"),
            InstallPattern::Scope(scope) => write!(f, "{scope}/*"),
            InstallPattern::Prefix { scope, prefix } => write!(f, "{scope}/{prefix}*"),
            InstallPattern::Exact(name) => write!(f, "{name}"),
        }
    }
}

/// Checks an artifact version string: non-blank, one path segment (it names a store
/// directory), so no `/`, `\`, NUL, and not `.` or `..`.
pub fn check_version(version: &str) -> Result<(), String> {
    if version.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if version.contains('/') || version.contains('\\') || version.contains('\0') {
        return Err(format!(
            "'{version}' is not one path segment (it may not contain '/', '\\' or NUL)"
        ));
    }
    if version == "." || version == ".." || version.contains("..") {
        return Err(format!("'{version}' may not contain '..'"));
    }
    if version != version.trim() {
        return Err(format!("'{version}' has leading or trailing whitespace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_split_into_scope_and_tool_name() {
        let n = ArtifactName::parse("murmur/tool-edit").unwrap();
        assert_eq!(n.scope(), "murmur");
        assert_eq!(n.name(), "tool-edit");
        assert_eq!(n.tool_name(), "tool-edit");
        assert_eq!(n.to_string(), "murmur/tool-edit");
    }

    #[test]
    fn bare_and_malformed_names_are_refused_with_upstream_sentences() {
        let e = ArtifactName::parse("driver-anthropic").unwrap_err();
        assert_eq!(
            e.message,
            "'driver-anthropic' is not a full artifact name: an artifact is named <scope>/<name>"
        );
        assert!(e.hint.unwrap().contains("'murmur/driver-anthropic'"));
        let e = ArtifactName::parse("murmur-tool-x").unwrap_err();
        assert!(e.hint.unwrap().contains("'murmur/tool-x'"));
        assert_eq!(
            ArtifactName::parse("a/b/c").unwrap_err().message,
            "'a/b/c' is not a valid artifact name: expected exactly one '/', between the scope and the name"
        );
        assert_eq!(
            ArtifactName::parse("Ana/x").unwrap_err().message,
            "'Ana/x' is not a valid artifact name: the scope may contain only lowercase letters, digits and '-' (found 'A')"
        );
        assert_eq!(
            ArtifactName::parse("ana/-x").unwrap_err().message,
            "'ana/-x' is not a valid artifact name: the name must not start or end with '-'"
        );
        assert_eq!(
            ArtifactName::parse("/x").unwrap_err().message,
            "'/x' is not a valid artifact name: the scope must not be empty"
        );
        assert!(ArtifactName::parse("ana/x_y").is_err());
    }

    #[test]
    fn name_parts_are_limited_to_100_characters() {
        let ok = format!("a/{}", "x".repeat(100));
        assert!(ArtifactName::parse(&ok).is_ok());
        let long = format!("a/{}", "x".repeat(101));
        assert_eq!(
            ArtifactName::parse(&long).unwrap_err().message,
            format!(
                "'{long}' is not a valid artifact name: the name must be at most 100 characters"
            )
        );
    }

    #[test]
    fn a_name_error_displays_as_its_sentence_without_the_hint() {
        let err = ArtifactName::parse("tool-x").unwrap_err();
        assert!(err.hint.is_some());
        assert_eq!(err.to_string(), err.message);
        assert!(err
            .to_string()
            .starts_with("'tool-x' is not a full artifact name"));
    }

    #[test]
    fn pattern_prefixes_are_limited_to_100_characters() {
        let ok = format!("a/{}*", "x".repeat(100));
        assert_eq!(
            InstallPattern::parse(&ok).unwrap(),
            InstallPattern::Prefix {
                scope: "a".into(),
                prefix: "x".repeat(100)
            }
        );
        let long = format!("a/{}*", "x".repeat(101));
        let err = InstallPattern::parse(&long).unwrap_err().message;
        assert_eq!(err, format!("entry \"{long}\" is invalid (the name prefix must be at most 100 characters); expected a full artifact name '<scope>/<name>', a scope and name prefix ending in a single trailing '*' (e.g. 'ana/style-*' or 'ana/*'), or '*' alone"));
    }

    #[test]
    fn install_patterns_have_exactly_four_forms() {
        assert_eq!(InstallPattern::parse("*").unwrap(), InstallPattern::Any);
        assert_eq!(
            InstallPattern::parse("ana/*").unwrap(),
            InstallPattern::Scope("ana".into())
        );
        assert_eq!(
            InstallPattern::parse("murmur/tool-*").unwrap(),
            InstallPattern::Prefix {
                scope: "murmur".into(),
                prefix: "tool-".into()
            }
        );
        assert!(matches!(
            InstallPattern::parse("murmur/tool-edit").unwrap(),
            InstallPattern::Exact(_)
        ));
        for bad in [
            "**", "a/**", "*/x", "a/*x", "a/x*y", "A/x", "a/b/c", "a/-x*", "", "a/X*",
        ] {
            assert!(
                InstallPattern::parse(bad).is_err(),
                "{bad} should be refused"
            );
        }
    }

    #[test]
    fn install_pattern_messages_match_upstream() {
        assert_eq!(
            InstallPattern::parse("murmur/to*ol").unwrap_err().message,
            "entry \"murmur/to*ol\" is invalid ('*' may appear only once, as the last character); \
             expected a full artifact name '<scope>/<name>', a scope and name prefix ending in a \
             single trailing '*' (e.g. 'ana/style-*' or 'ana/*'), or '*' alone"
        );
        let e = InstallPattern::parse("tool-*").unwrap_err();
        assert!(e
            .message
            .starts_with("entry \"tool-*\" is invalid ('tool-*' names no scope); "));
        assert!(e.hint.unwrap().contains("'murmur/tool-*'"));
    }

    #[test]
    fn install_patterns_match_names() {
        let name = |s: &str| ArtifactName::parse(s).unwrap();
        let p = InstallPattern::parse("murmur/tool-*").unwrap();
        assert!(p.matches(&name("murmur/tool-edit")));
        assert!(!p.matches(&name("murmur/driver-openai")));
        assert!(!p.matches(&name("ana/tool-edit")));
        assert!(InstallPattern::parse("ana/*")
            .unwrap()
            .matches(&name("ana/x")));
        assert!(!InstallPattern::parse("ana/*")
            .unwrap()
            .matches(&name("anb/x")));
        assert!(InstallPattern::parse("*").unwrap().matches(&name("q/r")));
        let exact = InstallPattern::parse("ana/x").unwrap();
        assert!(exact.matches(&name("ana/x")));
        assert!(!exact.matches(&name("ana/xy")));
        assert_eq!(p.to_string(), "murmur/tool-*");
    }

    #[test]
    fn covers_keeps_children_within_parents() {
        let p = |s: &str| InstallPattern::parse(s).unwrap();
        assert!(p("*").covers(&p("ana/*")));
        assert!(p("ana/*").covers(&p("ana/style-*")));
        assert!(p("ana/style-*").covers(&p("ana/style-long-*")));
        assert!(p("ana/style-*").covers(&p("ana/style-x")));
        assert!(!p("ana/style-*").covers(&p("ana/*")));
        assert!(!p("ana/*").covers(&p("*")));
        assert!(!p("ana/x").covers(&p("ana/*")));
        // Each case against a near miss: another scope, another prefix, another name.
        assert!(p("ana/*").covers(&p("ana/*")));
        assert!(!p("ana/*").covers(&p("bob/*")));
        assert!(!p("ana/*").covers(&p("bob/style-*")));
        assert!(!p("ana/*").covers(&p("bob/x")));
        assert!(!p("ana/style-*").covers(&p("bob/style-long-*")));
        assert!(!p("ana/style-*").covers(&p("ana/sty-*")));
        assert!(!p("ana/style-*").covers(&p("ana/other")));
        assert!(p("ana/x").covers(&p("ana/x")));
        assert!(!p("ana/x").covers(&p("ana/y")));
        assert!(!p("ana/x").covers(&p("ana/x-*")));
        assert!(!p("ana/style-*").covers(&p("*")));
    }

    #[test]
    fn reserved_names_are_the_six() {
        for n in RESERVED_TOOL_NAMES {
            assert!(is_reserved_tool_name(n));
        }
        assert!(!is_reserved_tool_name("bash"));
        assert!(!is_reserved_tool_name("Delegate-task"));
        assert_eq!(
            reserved_tool_names_list(),
            "share-file, fetch-peer-file, delegate-task, submit-plan, pull-artifact, remove-artifact"
        );
    }

    #[test]
    fn versions_are_one_path_segment() {
        assert!(check_version("0.19.0").is_ok());
        assert!(check_version("v1.0.0-rc.1").is_ok());
        for bad in ["", " ", "1/2", "..", "a..b", ".", "1\\2", " 1.0"] {
            assert!(check_version(bad).is_err(), "{bad:?} should be refused");
        }
    }
}

//! `mur install` arguments: `<scope>/<name>[@<version>]`, `github:<owner>/<repo>@<tag>`, or a
//! path to a `.mur.zip`, told apart the way upstream does, with its error codes (E-IO-003 for a
//! malformed reference, E-REG-007 for a name without a scope).

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::manifest::ArtifactName;

use super::version::is_platform_tag;

/// The platform tag in a `<name>-<version>-<platform>.mur.zip` file name.
pub fn platform_of_file(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".mur.zip")?;
    super::version::SUPPORTED_PLATFORMS
        .iter()
        .find(|p| stem.ends_with(&format!("-{p}")))
        .filter(|p| is_platform_tag(p))
        .map(|p| p.to_string())
}

/// A parsed `mur install` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallRef {
    /// `<scope>/<name>[@<version>]`.
    Name(ArtifactName, Option<String>),
    /// `github:<owner>/<repo>@<tag>`.
    Github {
        /// The repository owner (its lowercased name is the scope).
        owner: String,
        /// The repository name.
        repo: String,
        /// The release tag.
        tag: String,
    },
    /// A `.mur.zip` path.
    File(PathBuf),
}

/// Parses a `mur install` argument.
pub fn parse_ref(text: &str) -> Result<InstallRef, Diagnostic> {
    if text.starts_with("./")
        || text.starts_with("../")
        || text.starts_with('/')
        || (text.contains('/') && text.ends_with(".mur.zip"))
        || (text.ends_with(".mur.zip") && Path::new(text).is_file())
    {
        return Ok(InstallRef::File(PathBuf::from(text)));
    }
    if let Some(rest) = text.strip_prefix("github:") {
        let bad = || {
            Diagnostic::error("E-IO-003", format!("invalid github artifact reference '{text}' (expected github:<owner>/<repo>@<tag>)"))
        };
        let (repo_part, tag) = rest.split_once('@').ok_or_else(bad)?;
        let (owner, repo) = repo_part.split_once('/').ok_or_else(bad)?;
        if owner.is_empty()
            || repo.is_empty()
            || tag.is_empty()
            || repo.contains('/')
            || tag.contains('/')
        {
            return Err(bad());
        }
        return Ok(InstallRef::Github {
            owner: owner.into(),
            repo: repo.into(),
            tag: tag.into(),
        });
    }
    if let Some((prefix, _)) = text.split_once(':') {
        return Err(Diagnostic::error(
            "E-IO-003",
            format!("unsupported artifact source prefix '{prefix}'"),
        )
        .with_hint(
            "use <scope>/<name>[@<version>], github:<owner>/<repo>@<tag>, or a path to a .mur.zip",
        ));
    }
    let format_err = || {
        Diagnostic::error(
            "E-IO-003",
            "artifact reference must be in the format <scope/name[@version]>",
        )
    };
    let (name_text, version) = match text.split_once('@') {
        Some((_, v)) if v.is_empty() || v.contains('@') => return Err(format_err()),
        Some((n, v)) => (n, Some(v.to_string())),
        None => (text, None),
    };
    let name = ArtifactName::parse(name_text).map_err(|e| {
        let d = Diagnostic::error("E-REG-007", e.message);
        match e.hint {
            Some(h) => d.with_hint(h),
            None => d,
        }
    })?;
    // Refused here, before any store or network is asked.
    if crate::manifest::is_reserved_tool_name(name.tool_name()) {
        return Err(
            Diagnostic::error("E-CAP-013", super::pull::reserved_sentence(&name))
                .with_hint("the runtime provides this tool itself; there is nothing to install"),
        );
    }
    if let Some(v) = &version {
        crate::manifest::names::check_version(v)
            .map_err(|why| Diagnostic::error("E-IO-003", format!("version of {name}: {why}")))?;
    }
    Ok(InstallRef::Name(name, version))
}

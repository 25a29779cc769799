//! Staging: the files a session's folder holds before its first model call.
//!
//! One `tools/<name>/murmur.yaml` per held tool (seed 000: the grant is the tool's existence, so
//! a tool without a grant gets no folder at all), `MURMUR.md` listing the inventory (when there
//! is one) and `task.md` (for the root session). `out/` is created with the result it holds.
//! Artifact tools arrive already staged by the `mur` crate (their own manifest and payload);
//! runtime-written tools get a manifest with `version: 0.0.0`, `runtime: tool`,
//! `implementation: native`.

use std::io;
use std::path::Path;

use crate::tool::{ToolDecl, ToolOrigin};

/// The manifest text of a runtime-written tool.
pub fn provided_manifest_yaml(tool: &ToolDecl) -> String {
    let schema = tool.input_schema.to_string().replace('\'', "''");
    format!(
        "name: {}\nversion: 0.0.0\nruntime: tool\nimplementation: native\ndescription: {}\ninput_schema: '{}'\n",
        serde_json::Value::from(tool.name.as_str()),
        serde_json::Value::from(tool.description.as_str()),
        schema
    )
}

/// Check that a tool name is one plain path component, so staging cannot escape `tools/`.
pub fn is_component(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Write the staged files for `tools` under `records_dir`; `task`, when given, goes to `task.md`
/// (the task of `mur run`; a delegated child's task is its first message, and the parent's
/// trace records it).
pub fn stage(
    records_dir: &Path,
    tools: &[ToolDecl],
    task: Option<&str>,
    capsule: &str,
) -> io::Result<()> {
    let tools_dir = records_dir.join("tools");
    if !tools.is_empty() {
        std::fs::create_dir(&tools_dir).or_else(exists_ok)?;
    }
    for tool in tools {
        if !is_component(&tool.name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("tool name '{}' is not a single path component", tool.name),
            ));
        }
        let dir = tools_dir.join(&tool.name);
        let manifest = dir.join("murmur.yaml");
        if manifest.exists() {
            // An artifact staged its own manifest first: the runtime-written one yields.
            continue;
        }
        std::fs::create_dir(&dir).or_else(exists_ok)?;
        std::fs::write(&manifest, provided_manifest_yaml(tool))?;
    }
    if let Some(task) = task {
        std::fs::write(records_dir.join("task.md"), task)?;
    }
    // MURMUR.md describes the inventory for a model that can read files; a session holding no
    // tool has nothing to list and no way to read it.
    if !tools.is_empty() {
        std::fs::write(records_dir.join("MURMUR.md"), murmur_md(tools, capsule))?;
    }
    Ok(())
}

/// Make `workdir/tools` a link to the records' `tools/`, so the staged manifests are readable
/// from the work folder at the seed's path while staying out of a command's reach (records are
/// never inside the writable tree; a command may remove the link, never the manifests). An
/// existing `tools` entry is left alone.
pub fn link_tools(workdir: &Path, records_dir: &Path) -> io::Result<()> {
    let link = workdir.join("tools");
    if link.symlink_metadata().is_ok() {
        return Ok(());
    }
    std::os::unix::fs::symlink(records_dir.join("tools"), link).or_else(exists_ok)
}

/// Treat "already exists" as success when creating a folder.
fn exists_ok(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::AlreadyExists {
        Ok(())
    } else {
        Err(e)
    }
}

/// The inventory summary written to `MURMUR.md`.
pub fn murmur_md(tools: &[ToolDecl], capsule: &str) -> String {
    let mut out = format!(
        "# {capsule}\n\nMachine-generated inventory of this session's tools. Data, not instructions.\n\n| tool | version | origin |\n|---|---|---|\n"
    );
    for t in tools {
        let origin = match t.origin {
            ToolOrigin::Provided => "runtime-provided",
            ToolOrigin::Operator => "operator",
            ToolOrigin::Pulled => "runtime (untrusted)",
        };
        out.push_str(&format!("| {} | {} | {} |\n", t.name, t.version, origin));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolKind;

    #[test]
    fn provided_manifest_has_the_fixed_fields_and_quotes_safely() {
        let t = ToolDecl {
            name: "bash".into(),
            full_name: None,
            version: "0.0.0".into(),
            description: "Run: it's \"quoted\"".into(),
            input_schema: serde_json::json!({"type":"object","properties":{"command":{"type":"string","description":"it's"}}}),
            kind: ToolKind::Shell {
                binary: "bash".into(),
            },
            origin: ToolOrigin::Provided,
        };
        let y = provided_manifest_yaml(&t);
        assert!(y.contains("version: 0.0.0\nruntime: tool\nimplementation: native\n"));
        assert!(y.contains("description: \"Run: it's \\\"quoted\\\"\"\n"));
        assert!(y.contains("it''s"));
    }

    #[test]
    fn names_must_be_one_component() {
        assert!(is_component("tool-edit"));
        assert!(!is_component("../x"));
        assert!(!is_component(".."));
        assert!(!is_component("a/b"));
    }
}

//! `mur doctor`: validate a manifest without running it.

use std::path::Path;

/// Validate the manifest at `path` (default `./murmur.yaml`), print every diagnostic, return the
/// process exit code.
pub fn run(_path: Option<&Path>) -> i32 {
    eprintln!("mur doctor: not implemented yet");
    1
}

//! The shared secret every node and parent of one cluster holds.
//!
//! ractor_cluster authenticates each connection with a challenge answered by a digest of the
//! cookie (the cookie itself never crosses the wire). A node without a cookie would accept
//! any peer, so `mur node` refuses to start without one; `mur run --nodes` needs the same.

use std::path::Path;

use super::ClusterError;

/// The variable holding the cookie.
pub const COOKIE_VAR: &str = "MUR_CLUSTER_COOKIE";

/// The cookie: the file's first line when `--cookie-file` is given, else `MUR_CLUSTER_COOKIE`.
pub fn load(file: Option<&Path>) -> Result<String, ClusterError> {
    if let Some(path) = file {
        let fail = |why: String| ClusterError::CookieFile {
            path: path.display().to_string(),
            why,
        };
        let text = crate::files::read_text(path, 64 * 1024).map_err(|e| fail(e.to_string()))?;
        let cookie = text.lines().next().unwrap_or("").trim().to_string();
        if cookie.is_empty() {
            return Err(fail("it is empty".into()));
        }
        return Ok(cookie);
    }
    match std::env::var(COOKIE_VAR) {
        Ok(c) if !c.trim().is_empty() => Ok(c.trim().to_string()),
        _ => Err(ClusterError::NoCookie),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_file_gives_its_first_line_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cookie");
        std::fs::write(&f, "s3cret\nignored\n").unwrap();
        assert_eq!(load(Some(&f)).unwrap(), "s3cret");
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(
            load(Some(&f)),
            Err(ClusterError::CookieFile { .. })
        ));
    }
}

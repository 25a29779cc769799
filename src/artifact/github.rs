//! The GitHub source client: owner ids, releases, the index and asset downloads over reqwest.
//!
//! Requests (relative to the configured API base, so tests run a local fake): `GET
//! /repos/<o>/<r>` for the owner id, `GET /repos/<o>/<r>/releases/latest` and
//! `/releases/tags/<tag>`, and `GET /repos/<o>/<r>/releases/assets/<id>` with `Accept:
//! application/octet-stream` for bytes. Answers are cached for the life of the client (one
//! command, or one pull). A download longer than 1 MiB shows progress on stderr when stderr is
//! a terminal. A body shorter than the release says is refused as truncated.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use super::config::Source;
use super::index::{parse_index, Index, IndexError, INDEX_ASSET};

/// How a source failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// It answered 404 for what was asked (repo, release, asset).
    NotFound(String),
    /// It did not answer usefully (network, 5xx, rate limit, bad JSON): E-REG-006.
    Unreachable(String),
    /// The bytes arrived short or do not match their digest.
    Integrity(String),
    /// Its index is there but not one this mur reads: E-IDX-002.
    Index(IndexError),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::NotFound(s) | SourceError::Unreachable(s) | SourceError::Integrity(s) => {
                f.write_str(s)
            }
            SourceError::Index(e) => f.write_str(e.message()),
        }
    }
}

/// One release.
#[derive(Clone, Debug, Deserialize)]
pub struct Release {
    /// Its tag.
    pub tag_name: String,
    /// Its assets.
    #[serde(default)]
    pub assets: Vec<ReleaseAsset>,
}

/// One release asset.
#[derive(Clone, Debug, Deserialize)]
pub struct ReleaseAsset {
    /// Asset id (for the download URL).
    pub id: u64,
    /// File name.
    pub name: String,
    /// Size in bytes, as the API reports it.
    #[serde(default)]
    pub size: u64,
}

#[derive(Deserialize)]
struct Repo {
    owner: Owner,
}

#[derive(Deserialize)]
struct Owner {
    id: u64,
}

/// A client for one API base.
pub struct GithubClient {
    http: reqwest::Client,
    api_base: String,
    owners: Mutex<HashMap<String, u64>>,
    releases: Mutex<HashMap<String, Release>>,
    indexes: Mutex<HashMap<String, Index>>,
}

/// Bytes above which a download shows progress on a terminal.
const PROGRESS_ABOVE: u64 = 1 << 20;

impl GithubClient {
    /// A client for `api_base` (e.g. `https://api.github.com`), 30 s per request.
    pub fn new(api_base: &str) -> Result<GithubClient, String> {
        check_api_base(api_base)?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("mur/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(GithubClient {
            http,
            api_base: api_base.trim_end_matches('/').to_string(),
            owners: Mutex::new(HashMap::new()),
            releases: Mutex::new(HashMap::new()),
            indexes: Mutex::new(HashMap::new()),
        })
    }

    fn request(&self, src: &Source, path: &str, accept: &str) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .get(format!("{}{path}", self.api_base))
            .header(reqwest::header::ACCEPT, accept)
            .header("X-GitHub-Api-Version", "2022-11-28");
        if let Some(t) = &src.token {
            rb = rb.bearer_auth(t);
        }
        rb
    }

    async fn get(
        &self,
        src: &Source,
        path: &str,
        accept: &str,
        what: &str,
    ) -> Result<reqwest::Response, SourceError> {
        let label = src.label();
        let resp = self.request(src, path, accept).send().await.map_err(|e| {
            SourceError::Unreachable(format!(
                "{label} did not answer ({what}): {}",
                error_chain(&e)
            ))
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(SourceError::NotFound(format!(
                "{label} has no {what} (HTTP 404)"
            )));
        }
        let limited = status == reqwest::StatusCode::TOO_MANY_REQUESTS
            || resp
                .headers()
                .get("x-ratelimit-remaining")
                .is_some_and(|v| v.as_bytes() == b"0");
        if limited {
            return Err(SourceError::Unreachable(format!(
                "{label} is rate limiting requests ({what}, HTTP {}); set GITHUB_TOKEN to raise the limit",
                status.as_u16()
            )));
        }
        Err(SourceError::Unreachable(format!(
            "{label} did not answer ({what}): HTTP {}",
            status.as_u16()
        )))
    }

    async fn json<T: for<'de> Deserialize<'de>>(
        &self,
        src: &Source,
        path: &str,
        what: &str,
    ) -> Result<T, SourceError> {
        let resp = self
            .get(src, path, "application/vnd.github+json", what)
            .await?;
        let bytes = resp.bytes().await.map_err(|e| {
            SourceError::Unreachable(format!(
                "{} did not answer ({what}): {}",
                src.label(),
                error_chain(&e)
            ))
        })?;
        serde_json::from_slice(&bytes).map_err(|e| {
            SourceError::Unreachable(format!(
                "{} answered malformed JSON ({what}): {e}",
                src.label()
            ))
        })
    }

    /// The GitHub id of the account owning the source's repository.
    pub async fn owner_id(&self, src: &Source) -> Result<u64, SourceError> {
        if let Some(id) = self
            .owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&src.repo)
        {
            return Ok(*id);
        }
        let repo: Repo = self
            .json(
                src,
                &format!("/repos/{}", src.repo),
                &format!("repository {}", src.repo),
            )
            .await?;
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(src.repo.clone(), repo.owner.id);
        Ok(repo.owner.id)
    }

    /// A release by tag, or the latest with `None`.
    pub async fn release(&self, src: &Source, tag: Option<&str>) -> Result<Release, SourceError> {
        let key = format!("{}@{}", src.repo, tag.unwrap_or(""));
        if let Some(r) = self
            .releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(r.clone());
        }
        let (path, what) = match tag {
            Some(t) => (
                format!("/repos/{}/releases/tags/{t}", src.repo),
                format!("release {t}"),
            ),
            None => (
                format!("/repos/{}/releases/latest", src.repo),
                "latest release".to_string(),
            ),
        };
        let rel: Release = self.json(src, &path, &what).await?;
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, rel.clone());
        Ok(rel)
    }

    /// Downloads one asset whole; a body shorter (or longer) than the release says is refused.
    pub async fn download(
        &self,
        src: &Source,
        asset: &ReleaseAsset,
    ) -> Result<Vec<u8>, SourceError> {
        let label = src.label();
        let what = format!("asset {}", asset.name);
        let mut resp = self
            .get(
                src,
                &format!("/repos/{}/releases/assets/{}", src.repo, asset.id),
                "application/octet-stream",
                &what,
            )
            .await?;
        let expected = resp.content_length().unwrap_or(asset.size).max(asset.size);
        let show = expected > PROGRESS_ABOVE && stderr_is_tty();
        let mut out = Vec::with_capacity(expected.min(256 << 20) as usize);
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let before = out.len() >> 16;
                    out.extend_from_slice(&c);
                    if show && (out.len() >> 16 != before || out.len() as u64 == expected) {
                        let mut e = std::io::stderr().lock();
                        let _ = write!(
                            e,
                            "\rdownloading {}: {} / {} KiB",
                            asset.name,
                            out.len() >> 10,
                            expected >> 10
                        );
                        let _ = e.flush();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    if show {
                        crate::errln!();
                    }
                    return Err(SourceError::Integrity(format!(
                        "{label}: the download of {} broke off after {} bytes: {}",
                        asset.name,
                        out.len(),
                        error_chain(&e)
                    )));
                }
            }
        }
        if show {
            crate::errln!();
        }
        if asset.size > 0 && out.len() as u64 != asset.size {
            return Err(SourceError::Integrity(format!(
                "{label}: {} arrived truncated: {} of {} bytes",
                asset.name,
                out.len(),
                asset.size
            )));
        }
        Ok(out)
    }

    /// The source's index: `artifacts-index.json` on its latest release, checked to claim the
    /// source's scope.
    pub async fn index(&self, src: &Source) -> Result<Index, SourceError> {
        if let Some(i) = self
            .indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&src.repo)
        {
            return Ok(i.clone());
        }
        let label = src.label();
        let rel = self.release(src, None).await?;
        let asset = rel
            .assets
            .iter()
            .find(|a| a.name == INDEX_ASSET)
            .ok_or_else(|| {
                SourceError::NotFound(format!(
                    "{label} publishes no {INDEX_ASSET} on its latest release ({})",
                    rel.tag_name
                ))
            })?;
        let bytes = self.download(src, asset).await?;
        let index = parse_index(&bytes, &format!("{label} (release {})", rel.tag_name))
            .map_err(SourceError::Index)?;
        if index.scope != src.scope {
            return Err(SourceError::Unreachable(format!(
                "the index of {label} claims the scope '{}', but it serves '{}' [E-REG-009]",
                index.scope, src.scope
            )));
        }
        self.indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(src.repo.clone(), index.clone());
        Ok(index)
    }

    /// Downloads the file `file` from release `tag` and checks it against `sha256`.
    pub async fn fetch_file(
        &self,
        src: &Source,
        tag: &str,
        file: &str,
        sha256: &str,
    ) -> Result<Vec<u8>, SourceError> {
        let rel = self.release(src, Some(tag)).await?;
        let asset = rel.assets.iter().find(|a| a.name == file).ok_or_else(|| {
            SourceError::NotFound(format!(
                "{} has no asset {file} on release {tag}",
                src.label()
            ))
        })?;
        let bytes = self.download(src, asset).await?;
        if super::store::sha256_hex(&bytes) != sha256.to_ascii_lowercase() {
            return Err(SourceError::Integrity(format!(
                "{}: {file} does not match the sha256 its index records",
                src.label()
            )));
        }
        Ok(bytes)
    }
}

/// Refuses an API base that is not a URL, or that would send tokens over plain `http://` to a
/// host other than loopback.
pub fn check_api_base(api_base: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(api_base)
        .map_err(|e| format!("the GitHub API base '{api_base}' is not a URL: {e}"))?;
    let host = url.host_str().unwrap_or("");
    let loopback = crate::manifest::gateway::is_loopback(host);
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!(
            "the GitHub API base '{api_base}' uses http:// to a host that is not loopback; use https://"
        )),
        other => Err(format!(
            "the GitHub API base '{api_base}' has scheme '{other}'; expected https://"
        )),
    }
}

fn stderr_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::check_api_base;

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(check_api_base("https://api.github.com").is_ok());
        assert!(check_api_base("http://127.0.0.1:8080").is_ok());
        assert!(check_api_base("http://localhost:1").is_ok());
        assert!(check_api_base("http://[::1]:1").is_ok());
        assert_eq!(
            check_api_base("http://example.com").unwrap_err(),
            "the GitHub API base 'http://example.com' uses http:// to a host that is not loopback; use https://"
        );
        assert!(check_api_base("ftp://x").is_err());
        assert!(check_api_base("nope").is_err());
    }
}

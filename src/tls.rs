//! The one place HTTP clients get their TLS: the `ring` provider, and root certificates only
//! when they can be used.
//!
//! Building a client loads and decodes the system's root certificates (a hundred and more
//! files, about 2.6 ms, a third of a one-turn run's CPU). A client that only ever talks plain
//! `http://` (a local model server, a peer's loopback door) never verifies a certificate, and
//! none of these clients follows redirects to another scheme, so it gets an empty root store
//! and pays nothing. An `https://` client verifies against the system's roots as before.

/// A client builder for requests to `base` (a URL or its scheme and host).
pub fn client_builder(base: &str) -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder();
    if is_plain_http(base) {
        builder.tls_certs_only(std::iter::empty())
    } else {
        builder
    }
}

/// True for an `http://` URL (any case), which never needs a certificate.
pub fn is_plain_http(base: &str) -> bool {
    base.get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_skip_the_roots() {
        assert!(is_plain_http("http://127.0.0.1:8080/v1"));
        assert!(is_plain_http("HTTP://localhost"));
        assert!(!is_plain_http("https://api.anthropic.com"));
        assert!(!is_plain_http("http:/x"));
        assert!(!is_plain_http(""));
    }
}

//! `server.corsOrigins`: the browser origins allowed to call agentd from another page. Each entry
//! is checked when the configuration loads (an origin is `scheme://host[:port]`, nothing after
//! it), so a typo is a startup error naming the entry rather than a browser that silently fails.

use serde::Deserialize;

/// One allowed origin, or `*` for any.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CorsOrigin(String);

impl CorsOrigin {
    /// Whether this entry allows every origin.
    pub fn is_any(&self) -> bool {
        self.0 == "*"
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CorsOrigin {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        if text == "*" || is_origin(&text) {
            Ok(Self(text))
        } else {
            Err(format!(
                "{text:?} is not an origin: write scheme://host[:port] (for example \
                 https://app.example.com or http://localhost:3000, no path or trailing slash), or \"*\""
            ))
        }
    }
}

/// `http(s)://host[:port]` with a non-empty host of URL-safe characters and nothing after it.
fn is_origin(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    if !matches!(scheme, "http" | "https") || rest.is_empty() {
        return false;
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => (host, Some(port)),
        _ => (rest, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    host_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        for good in [
            "*",
            "https://app.example.com",
            "http://localhost:3000",
            "http://127.0.0.1:8080",
            "http://[::1]:5173",
        ] {
            assert!(CorsOrigin::try_from(good.to_string()).is_ok(), "{good}");
        }
        for bad in [
            "",
            "example.com",
            "https://",
            "https://app.example.com/",
            "https://app.example.com/path",
            "ftp://example.com",
            "http://localhost:99999",
            "http://localhost:",
            "https://a b.com",
        ] {
            let error = CorsOrigin::try_from(bad.to_string()).expect_err(bad);
            assert!(error.contains("scheme://host[:port]"), "{error}");
        }
    }
}

//! Outbound HTTP to addresses a caller chose (attachment URLs, webhook receivers, push
//! notification configs): the address guard of SPEC §11 and §13. A [`GuardedClient`] refuses
//! loopback, private, link-local (cloud metadata), unspecified, shared and multicast addresses
//! unless `allow_private` is set. The check runs where the address is known for certain: on IP
//! literals before a request is sent, in the DNS resolver on every name the connection resolves
//! (so a name that later resolves elsewhere — DNS rebinding — is checked again), and on every
//! redirect. Bodies are read with a size cap and the whole exchange with a timeout.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, RequestBuilder, Url};

/// How long [`check_url_for_another`] waits for a name to resolve.
const NAME_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How far outbound requests may reach and how much they may read.
#[derive(Debug, Clone, Copy)]
pub struct OutboundPolicy {
    /// Whether loopback, private and link-local addresses may be reached (tests, trusted nets).
    pub allow_private: bool,
    /// The whole exchange: connect, send, and reading the body.
    pub timeout: Duration,
    /// The most bytes a fetched body may have.
    pub max_bytes: u64,
}

/// Why an outbound request was not made or did not complete.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("{0:?} is not a valid URL")]
    InvalidUrl(String),
    #[error("URL scheme {0:?} is not allowed; use http or https")]
    Scheme(String),
    #[error(
        "{host} resolves to {ip}, a loopback, private or link-local address, which is not allowed"
    )]
    RefusedAddress { host: String, ip: IpAddr },
    #[error("the response is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the request did not complete within {0:?}")]
    Timeout(Duration),
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("the request failed: {0}")]
    Transport(String),
}

/// A body read through the guard, with the content type the server declared.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub bytes: Bytes,
    pub content_type: Option<String>,
}

/// An HTTP client that only reaches addresses the policy allows.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    policy: OutboundPolicy,
}

const MAX_REDIRECTS: usize = 5;

impl GuardedClient {
    pub fn new(policy: OutboundPolicy) -> Result<Self, OutboundError> {
        let allow_private = policy.allow_private;
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            match check_literal_host(attempt.url(), allow_private) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused.to_string()),
            }
        });
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver { allow_private }))
            .redirect(redirects)
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .no_proxy()
            .build()
            .map_err(|e| OutboundError::Transport(e.to_string()))?;
        Ok(Self { client, policy })
    }

    pub fn policy(&self) -> OutboundPolicy {
        self.policy
    }

    /// Parses and checks a URL a caller gave: http(s) only, and no refused IP literal.
    pub fn check_url(&self, url: &str) -> Result<Url, OutboundError> {
        parse_caller_url(url, self.policy.allow_private)
    }

    /// A request to a checked URL; names are checked again when the connection resolves them.
    pub fn request(&self, method: Method, url: &str) -> Result<RequestBuilder, OutboundError> {
        let url = self.check_url(url)?;
        Ok(self.client.request(method, url))
    }

    /// GETs a URL and reads its body up to the policy's size cap.
    pub async fn fetch(&self, url: &str) -> Result<Fetched, OutboundError> {
        let response = self
            .request(Method::GET, url)?
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        if !response.status().is_success() {
            return Err(OutboundError::Status(response.status().as_u16()));
        }
        let limit = self.policy.max_bytes;
        if response
            .content_length()
            .is_some_and(|length| length > limit)
        {
            return Err(OutboundError::TooLarge { limit });
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut body = BytesMut::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| self.transport_error(e))?;
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(OutboundError::TooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            bytes: body.freeze(),
            content_type,
        })
    }

    /// Sends a built request and maps its failure; the caller reads the response.
    pub async fn send(&self, request: RequestBuilder) -> Result<reqwest::Response, OutboundError> {
        request.send().await.map_err(|e| self.transport_error(e))
    }

    fn transport_error(&self, error: reqwest::Error) -> OutboundError {
        if error.is_timeout() {
            return OutboundError::Timeout(self.policy.timeout);
        }
        let text = error_chain(&error);
        match refused_in(&text) {
            Some(refused) => refused,
            None => OutboundError::Transport(text),
        }
    }
}

/// reqwest hides the resolver's and the redirect policy's errors behind its own; the message
/// chain still names them, so a refusal is recognised by the guard's own wording.
fn refused_in(text: &str) -> Option<OutboundError> {
    let marker = " resolves to ";
    let at = text.find(marker)?;
    let host = text[..at].rsplit([' ', ':']).next()?.to_owned();
    let rest = &text[at + marker.len()..];
    let ip = rest.split([',', ' ']).next()?.parse().ok()?;
    Some(OutboundError::RefusedAddress { host, ip })
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Parses a URL a caller gave: http(s) only, with a host, and no refused IP literal.
fn parse_caller_url(url: &str, allow_private: bool) -> Result<Url, OutboundError> {
    let parsed = Url::parse(url).map_err(|_| OutboundError::InvalidUrl(url.to_owned()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(OutboundError::Scheme(parsed.scheme().to_owned()));
    }
    if parsed.host_str().is_none() {
        return Err(OutboundError::InvalidUrl(url.to_owned()));
    }
    check_literal_host(&parsed, allow_private)?;
    Ok(parsed)
}

/// Checks a URL another server will fetch (a vendor given an attachment's URL): as a caller's
/// URL, and a name that resolves here to a refused address is refused too (a name that does
/// not resolve here is the fetching server's to resolve).
pub async fn check_url_for_another(url: &str, allow_private: bool) -> Result<Url, OutboundError> {
    let parsed = parse_caller_url(url, allow_private)?;
    if allow_private {
        return Ok(parsed);
    }
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let lookup = tokio::net::lookup_host((host.clone(), 0));
    let Ok(Ok(mut addresses)) = tokio::time::timeout(NAME_CHECK_TIMEOUT, lookup).await else {
        return Ok(parsed);
    };
    match addresses.find(|address| !is_public(address.ip())) {
        Some(refused) => Err(OutboundError::RefusedAddress {
            host,
            ip: refused.ip(),
        }),
        None => Ok(parsed),
    }
}

fn check_literal_host(url: &Url, allow_private: bool) -> Result<(), OutboundError> {
    let host = url.host_str().unwrap_or_default();
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    else {
        return Ok(());
    };
    if allow_private || is_public(ip) {
        return Ok(());
    }
    Err(OutboundError::RefusedAddress {
        host: host.to_owned(),
        ip,
    })
}

/// Whether an address is on the public internet (not loopback, private, link-local, shared,
/// unspecified, broadcast, multicast or documentation space).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b); // RFC 6598 carrier-grade NAT
    let reserved = a >= 240;
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || shared
        || reserved)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    let unique_local = (first & 0xfe00) == 0xfc00; // fc00::/7, includes fd00:ec2::254
    let link_local = (first & 0xffc0) == 0xfe80;
    let documentation = first == 0x2001 && ip.segments()[1] == 0x0db8;
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || unique_local
        || link_local
        || documentation)
}

/// Resolves names with the system resolver and drops refused addresses; a name with only
/// refused addresses is an error naming the first.
struct GuardedResolver {
    allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|addr| allow_private || is_public(addr.ip()))
                .collect();
            match (allowed.is_empty(), resolved.first()) {
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
                (true, Some(first)) => Err(Box::new(OutboundError::RefusedAddress {
                    host,
                    ip: first.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>),
                (true, None) => Err(format!("{host} has no address").into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded(allow_private: bool) -> GuardedClient {
        crate::tls::install_crypto_provider();
        GuardedClient::new(OutboundPolicy {
            allow_private,
            timeout: Duration::from_secs(5),
            max_bytes: 16,
        })
        .expect("client")
    }

    #[tokio::test]
    async fn a_url_another_server_fetches_is_checked_but_not_fetched() {
        assert!(matches!(
            check_url_for_another("http://169.254.169.254/latest", false).await,
            Err(OutboundError::RefusedAddress { .. })
        ));
        assert!(matches!(
            check_url_for_another("http://localhost:9/x.png", false).await,
            Err(OutboundError::RefusedAddress { .. })
        ));
        assert!(matches!(
            check_url_for_another("ftp://x.test/a.png", false).await,
            Err(OutboundError::Scheme(_))
        ));
        let unresolved = check_url_for_another("https://nothing.invalid/cat.png", false).await;
        assert!(unresolved.is_ok());
        assert!(
            check_url_for_another("http://127.0.0.1/x.png", true)
                .await
                .is_ok()
        );
    }

    #[test]
    fn private_and_metadata_addresses_are_not_public() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(refused.parse().expect("ip")), "{refused}");
        }
        for allowed in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(allowed.parse().expect("ip")), "{allowed}");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_and_literal_addresses() {
        let client = guarded(false);
        assert!(matches!(
            client.check_url("file:///etc/passwd"),
            Err(OutboundError::Scheme(_))
        ));
        assert!(matches!(
            client.check_url("http://169.254.169.254/latest/meta-data"),
            Err(OutboundError::RefusedAddress { .. })
        ));
        assert!(matches!(
            client.check_url("http://[::1]:8080/"),
            Err(OutboundError::RefusedAddress { .. })
        ));
        assert!(matches!(
            client.check_url("not a url"),
            Err(OutboundError::InvalidUrl(_))
        ));
        assert!(client.check_url("https://example.com/a.png").is_ok());
        assert!(guarded(true).check_url("http://127.0.0.1:1/").is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_and_allowed_when_private_is_allowed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buffer = [0u8; 1024];
                let _ = socket.read(&mut buffer).await;
                let body = "0123456789abcdefXYZ"; // 19 bytes: past the 16-byte cap
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n{body}"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        let url = format!("http://localhost:{port}/file.txt");
        let refused = guarded(false).fetch(&url).await;
        assert!(
            matches!(refused, Err(OutboundError::RefusedAddress { .. })),
            "{refused:?}"
        );
        let too_large = guarded(true).fetch(&url).await;
        assert!(
            matches!(too_large, Err(OutboundError::TooLarge { limit: 16 })),
            "{too_large:?}"
        );
    }
}

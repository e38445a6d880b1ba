//! The process's TLS crypto provider: rustls with ring, installed once before any HTTPS client
//! (LLM providers, REST tools, MCP over HTTP, OTLP export, PostgreSQL) is built. The binary
//! links no other provider, so without this a client could not be built.

/// Makes ring the process-wide rustls provider; a provider installed earlier is kept.
pub fn install_crypto_provider() {
    // `Err` means a provider is already installed: that one is used.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

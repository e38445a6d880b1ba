//! agentd runs LLM agents and serves them over HTTP.
//!
//! # Module map
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | layered JSON config, `.ai-agent.env`, `${VAR}` expansion, `.ai` agent files, the agent registry |
//! | [`agent`] | the session loop: turns, retries, provider cycling, final report, events, `AgentResult`; one tool call under its policy (cache, retries), oversized outputs as handles, sub-agents and `router__handoff-to` |
//! | [`llm`] | the `Provider` trait and the vendor adapters (OpenAI-compatible first), SSE decoding; the built-in scripted model that needs no network |
//! | [`tools`] | the `ToolProvider` trait and the registry of tools a session may call; each tool's policy (cache TTL, retries) and the tool result cache |
//! | [`attachments`] | files sent with messages (SPEC §11): streamed in, hashed, sniffed, held to `limits.attachments`, stored once by SHA-256, loaded back for model requests |
//! | [`store`] | the `Store` trait with SQLite and PostgreSQL backends; migrations; the run recorder (runs and run events written in batches) |
//! | [`cache`] | the response cache: keys, what may be cached, store and Redis backends; the guarded Redis link (call timeout, circuit breaker) the key limits share |
//! | [`identity`] | scopes, JWT bearer tokens from OpenID Connect issuers (JWKS cached), run-time API keys (digests, revocation on every replica), the audit hook |
//! | [`limits`] | per-key limits (requests per minute, runs at once, daily budgets) counted in the store or Redis |
//! | [`http`] | the router, one folder per API family (its wire types and one translator of run events), generated OpenAPI, the edge layers, connections, errors, SSE |
//! | [`telemetry`] | Prometheus metrics and log setup |
//! | [`runtime`] | the composition root, and the one run pipeline every headend starts runs through ([`runtime::Runtime::start_run`]); this process as a replica (heartbeats, owner loss, notifications from other replicas), following and cancelling runs anywhere; tool approvals (runs parked in the store while they wait, [`runtime::Runtime::decide_approval`] resuming them on any replica); advisors, router and handoff around an agent |
//! | [`secrets`] | users' tool secrets: sealed with `secrets.key` (ChaCha20-Poly1305) into the store, opened for `${caller.secret.NAME}` |
//! | [`vocabulary`] | the run's words every layer shares without depending on the others: why a run ended ([`vocabulary::ExitReason`]) and where it stands ([`vocabulary::RunStatus`]); the store keeps their names |
//! | [`library`] | agentd as a library (SPEC §16): [`library::Agent`] from a file, a string or a builder; `run` for an `AgentResult`, `stream` for its events, an observer for callbacks; no I/O of its own |
//! | [`audit`] | the append-only, hash-chained audit log: who did what (keys, secrets, approvals, cancels, reloads, erasures, admin reads), its verification |
//! | [`json_text`], [`nul_text`] | JSON kept as its text; what happens to NUL characters |
//! | [`tls`] | the TLS crypto provider (rustls with ring) every HTTPS and PostgreSQL client uses |
//! | [`cli`] | the `agentd` command line; `main.rs` only calls [`cli::main`] |
//!
//! A request flows `http` → [`runtime::RunSubmission`] → [`runtime::Runtime::start_run`] →
//! [`agent::Session::run`] → [`llm::Provider`], and the session's [`agent::AgentEvent`]s flow back
//! (numbered and recorded on the way) to the headend that started it.

pub mod library;
pub mod vocabulary;

// The server's own modules. They are `pub` because the `agentd` binary and the one integration
// test binary (`tests/api`) reach into them; they are not the library's API (hidden from the
// documentation and from the public-API snapshot; [`library`] re-exports what an embedder
// needs), and may change in any release.
#[doc(hidden)]
pub mod agent;
#[doc(hidden)]
pub mod attachments;
#[doc(hidden)]
pub mod audit;
#[doc(hidden)]
pub mod cache;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod http;
#[doc(hidden)]
pub mod identity;
#[doc(hidden)]
pub mod json_text;
#[doc(hidden)]
pub mod limits;
#[doc(hidden)]
pub mod llm;
#[doc(hidden)]
pub mod nul_text;
#[doc(hidden)]
pub mod outbound;
#[doc(hidden)]
pub mod runtime;
#[doc(hidden)]
pub mod secrets;
#[doc(hidden)]
pub mod store;
#[doc(hidden)]
pub mod telemetry;
#[doc(hidden)]
pub mod tls;
#[doc(hidden)]
pub mod tools;

//! Identity and access beyond the static keys of the config (SPEC §12): scopes and what they
//! grant ([`scopes`]), JWT bearer tokens from OpenID Connect issuers ([`oidc`]), API keys
//! created at run time and their replica-wide revocation ([`keys`]), and the audit hook every
//! change to them goes through ([`audit`]). It knows nothing about HTTP: the edge
//! (`http::identity`) turns what it finds into a caller or a 401/403.

pub mod audit;
pub mod keys;
pub mod oidc;
pub mod scopes;

//! Authentication (SPEC §2, §4): `Authorization: Bearer KEY` or `x-api-key: KEY` against
//! `auth.keys`. With no keys configured (agentd then listens on loopback only) or
//! `auth.disabled`, every caller is an admin. Keys are compared as SHA-256 digests in constant
//! time and never logged. Liveness, readiness, metrics and the OpenAPI document stay public.
//!
//! An admin may act for a user ([`ACT_FOR_HEADER`], and OpenAI's `user` field on the OpenAI
//! headends): the request is then that user's, as a key bound to the user would make it, and the
//! runs it starts record the admin as `acted_by`.

use std::sync::Arc;

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use crate::config::{AuthConfig, owner};
use crate::identity::scopes::{self, Grants};
use crate::limits::LimitedKey;
use crate::store::{RunOwnerFilter, RunRecord};

/// Who is calling, as far as authorization cares. Everything a caller starts is owned by
/// [`Caller::owner`]; only admins reach what another owner started ([`Caller::may_reach`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub admin: bool,
    /// A key bound to a user may only act for that user.
    pub user_id: Option<String>,
    /// The presenting key's id (`auth.keys[].id`, else `keys[N]`); `None` on a server without
    /// keys. A key bound to no user owns what it starts as `key:ID`.
    pub key_id: Option<String>,
    /// The agents this key may run; `None` is all.
    pub agents: Option<Vec<String>>,
    /// The key's id and limits, when it has limits: its runs are counted against them.
    pub limited_key: Option<LimitedKey>,
    /// The admin acting for `user_id` (its owner id `key:ID`, or `admin` on a server without
    /// keys); `None` when the caller acts for itself.
    pub acted_by: Option<String>,
    /// The presenting key's name (run-time keys), for `GET /v1/me`.
    pub key_name: Option<String>,
    /// `runs:read`: may list and read runs.
    pub runs_read: bool,
    /// `keys:manage`: may manage its user's keys.
    pub keys_manage: bool,
    /// What the caller presented.
    pub credential: Credential,
}

/// What a caller presented.
#[derive(Debug, Clone, PartialEq)]
pub enum Credential {
    /// Nothing: a server without keys, or a public route.
    None,
    /// A key of `auth.keys`.
    ConfigKey,
    /// A key created with `POST /v1/keys`.
    StoredKey,
    /// A JWT bearer token of this issuer.
    Token { issuer: String },
}

impl Credential {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ConfigKey => "config_key",
            Self::StoredKey => "key",
            Self::Token { .. } => "token",
        }
    }
}

/// The header with which an admin acts for a user: `x-agentd-user: alice`.
pub const ACT_FOR_HEADER: &str = "x-agentd-user";

impl Caller {
    /// A submission of `prompt` to `agent` made by this caller: owned by the caller (its user,
    /// else its key), counted against its key's limits, and recorded as an admin's act when the
    /// caller acts for a user. A headend that takes the user from elsewhere (a path, a thread)
    /// sets `user_id` after.
    pub fn submission(
        &self,
        agent: Arc<crate::config::AgentSpec>,
        prompt: impl Into<String>,
    ) -> crate::runtime::RunSubmission {
        let mut submission = crate::runtime::RunSubmission::new(agent, prompt);
        submission.user_id = self.owner();
        submission.key = self.limited_key.clone();
        submission.acted_by = self.acted_by.clone();
        submission.key_id = self.key_id.clone();
        submission
    }

    /// The caller of a server without keys (loopback only), and of the public routes.
    pub(crate) fn admin() -> Self {
        Self {
            admin: true,
            user_id: None,
            key_id: None,
            agents: None,
            limited_key: None,
            acted_by: None,
            key_name: None,
            runs_read: true,
            keys_manage: true,
            credential: Credential::None,
        }
    }

    /// What this caller's scopes grant.
    pub fn grants(&self) -> Grants {
        Grants {
            admin: self.admin,
            agents: if self.admin {
                None
            } else {
                self.agents.clone()
            },
            runs_read: self.admin || self.runs_read,
            keys_manage: self.admin || self.keys_manage,
        }
    }

    /// A caller with `grants` (its admin right, agents and scopes).
    pub(crate) fn with_grants(grants: &Grants) -> Self {
        Self {
            admin: grants.admin,
            agents: grants.agents.clone(),
            runs_read: grants.runs_read,
            keys_manage: grants.keys_manage,
            user_id: None,
            key_id: None,
            limited_key: None,
            acted_by: None,
            key_name: None,
            credential: Credential::None,
        }
    }

    /// This caller acting for `user`, which `param` (the header or a body field) named: an
    /// admin becomes that user's caller (its agent list and limits kept, its admin right
    /// dropped: it sees what the user sees) recorded as acting; a caller already that user
    /// stays as it is; anyone else gets 403 naming `param`. A malformed user id is a 400.
    pub fn act_for(&self, user: &str, param: &str) -> Result<Caller, ApiError> {
        super::chat::check_user_id(user).map_err(|error| error.with_param(param))?;
        owner::check_user_id(user)
            .map_err(|message| ApiError::invalid_request(message).with_param(param))?;
        if self.user_id.as_deref() == Some(user) {
            return Ok(self.clone());
        }
        if !self.admin {
            return Err(ApiError::forbidden(format!(
                "`{param}` names another user than this key's: only an admin key may act for a user"
            ))
            .with_param(param));
        }
        Ok(Caller {
            admin: false,
            user_id: Some(user.to_string()),
            acted_by: Some(self.decider()),
            ..self.clone()
        })
    }

    /// The owner id of what this caller starts: its user, else its key (`key:ID`), else none
    /// (a server without keys).
    pub fn owner(&self) -> Option<String> {
        self.user_id
            .clone()
            .or_else(|| self.key_id.as_deref().map(owner::key_owner))
    }

    /// Whether this caller may read, change or end something owned by `owner`: its own, or
    /// anyone's for an admin.
    pub fn may_reach(&self, owner: Option<&str>) -> bool {
        self.admin || self.owner().as_deref() == owner
    }

    /// Whether this caller may see `run`: it may reach the run's owner and use its agent (a
    /// key limited to some agents sees none of its user's runs of other agents).
    pub fn may_see_run(&self, run: &RunRecord) -> bool {
        self.may_reach(run.user_id.as_deref()) && self.may_use_agent(&run.agent)
    }

    /// The runs a listing shows this caller by default: everyone's for an admin, else its own.
    pub fn own_runs(&self) -> RunOwnerFilter {
        if self.admin {
            RunOwnerFilter::Everyone
        } else {
            RunOwnerFilter::User(self.owner())
        }
    }

    /// The agents a listing of runs is limited to: `None` is every agent; patterns are
    /// matched against the agents `runtime` has.
    pub fn visible_agents(&self, runtime: &crate::runtime::Runtime) -> Option<Vec<String>> {
        let patterns = self.agents.as_ref().filter(|_| !self.admin)?;
        Some(
            runtime
                .agents()
                .iter()
                .map(|agent| agent.name.clone())
                .filter(|name| patterns.iter().any(|p| scopes::agent_matches(p, name)))
                .chain(patterns.iter().filter(|p| !p.contains('*')).cloned())
                .collect(),
        )
    }

    /// Whether this caller may read an agent's definition (its system prompt): admins only.
    pub fn may_read_definitions(&self) -> bool {
        self.admin
    }

    /// Who decided, as approvals record it: the user, else the key (`key:ID`), else `admin`
    /// (a server without keys).
    pub fn decider(&self) -> String {
        self.owner().unwrap_or_else(|| "admin".into())
    }

    /// Whether this caller may run `agent` (its `agents:NAME:run` scopes, `*` wildcards).
    pub fn may_use_agent(&self, agent: &str) -> bool {
        self.grants().may_run(agent)
    }

    /// Admins act for anyone; a user-bound key only for its own user.
    pub fn may_act_for(&self, user: &str) -> bool {
        self.admin || self.user_id.as_deref() == Some(user)
    }

    /// The agent a request names as its `model` — or, when the model names no agent,
    /// `server.defaultAgent`: 404 `unknown_model` when there is neither, 403 when this key may
    /// not use the agent.
    pub fn model_agent(
        &self,
        runtime: &crate::runtime::Runtime,
        model: &str,
    ) -> Result<std::sync::Arc<crate::config::AgentSpec>, ApiError> {
        let default_agent = runtime.config().server.default_agent.as_deref();
        let agent = runtime
            .agents()
            .for_model(model, default_agent)
            .ok_or_else(|| ApiError::unknown_model(model))?;
        if agent.name != model {
            tracing::debug!(model, agent = %agent.name, "the model names no agent: server.defaultAgent answers");
        }
        self.check_agent(&agent.name)?;
        Ok(agent)
    }

    /// The agent named `name` in a path (`/v1/agents/{agent}`, `/a2a/{agent}`): 404 naming it
    /// when there is none, 403 when this key may not use it.
    pub fn named_agent(
        &self,
        runtime: &crate::runtime::Runtime,
        name: &str,
    ) -> Result<std::sync::Arc<crate::config::AgentSpec>, ApiError> {
        let agent = runtime.agents().get(name).ok_or_else(|| {
            ApiError::not_found(format!(
                "No agent named `{name}`; GET /v1/agents lists them"
            ))
        })?;
        self.check_agent(&agent.name)?;
        Ok(agent)
    }

    /// 403 unless this key may run `agent`.
    pub fn check_agent(&self, agent: &str) -> Result<(), ApiError> {
        if self.may_use_agent(agent) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "This API key may not use the agent `{agent}`: it lacks the scope `agents:{agent}:run`"
            )))
        }
    }
}

/// The configured keys, digested once, with the id logs name each by.
pub struct KeyTable {
    enforced: bool,
    keys: Vec<([u8; 32], Caller, String)>,
}

impl KeyTable {
    pub fn from_config(auth: &AuthConfig) -> Self {
        let keys = auth
            .keys_with_ids()
            .map(|(k, id)| {
                let caller = Caller {
                    user_id: k.user_id.clone(),
                    key_id: Some(id.clone()),
                    limited_key: k.limits.filter(|limits| !limits.is_empty()).map(|limits| {
                        LimitedKey {
                            id: id.clone(),
                            limits,
                        }
                    }),
                    credential: Credential::ConfigKey,
                    ..Caller::with_grants(&config_key_grants(k))
                };
                (digest(k.key.expose_secret()), caller, id)
            })
            .collect::<Vec<_>>();
        Self {
            enforced: auth.is_enforced(),
            keys,
        }
    }

    /// Whether requests need a key (keys configured and auth not disabled).
    pub fn is_enforced(&self) -> bool {
        self.enforced
    }

    /// Every configured key's caller and id.
    pub fn callers(&self) -> impl Iterator<Item = (&Caller, &str)> {
        self.keys
            .iter()
            .map(|(_, caller, id)| (caller, id.as_str()))
    }

    /// The caller a presented key belongs to (tests of what each caller may do).
    #[cfg(test)]
    pub(crate) fn caller_of(&self, presented: &str) -> Option<Caller> {
        self.lookup_with_id(presented).map(|(caller, _)| caller)
    }

    #[cfg(test)]
    fn lookup(&self, presented: &str) -> Option<Caller> {
        self.caller_of(presented)
    }

    /// The caller a presented key belongs to and the key's id; every key is compared, match
    /// or not.
    pub(crate) fn lookup_with_id(&self, presented: &str) -> Option<(Caller, &str)> {
        let presented = digest(presented);
        let mut found = None;
        for (key, caller, id) in &self.keys {
            if constant_time_eq(key, &presented) {
                found = Some((caller.clone(), id.as_str()));
            }
        }
        found
    }
}

/// What a config key may do: its `scopes`, else everything for an admin key, else its agents,
/// `runs:read` and `keys:manage`.
fn config_key_grants(key: &crate::config::ApiKeyConfig) -> Grants {
    if let Some(list) = &key.scopes {
        let mut grants = Grants::of(&scopes::known_scopes(list.iter().map(String::as_str)));
        grants.admin |= key.admin;
        return if grants.admin { Grants::all() } else { grants };
    }
    if key.admin {
        return Grants::all();
    }
    Grants {
        admin: false,
        agents: key.agents.clone(),
        runs_read: true,
        keys_manage: true,
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;
    use serde_json::json;

    fn table() -> KeyTable {
        let config = parse_config(
            json!({"auth": {"keys": [
                {"key": "admin-key", "admin": true},
                {"key": "alice-key", "userId": "alice", "agents": ["chat"]}
            ]}}),
            "test",
        )
        .expect("config");
        KeyTable::from_config(&config.auth)
    }

    #[test]
    fn keys_map_to_their_callers() {
        let table = table();
        assert!(table.enforced);
        let admin = table.lookup("admin-key").expect("admin");
        assert!(admin.admin && admin.user_id.is_none());
        assert_eq!(admin.owner().as_deref(), Some("key:keys[0]"));
        let alice = table.lookup("alice-key").expect("alice");
        assert!(alice.may_use_agent("chat") && !alice.may_use_agent("other"));
        assert!(alice.may_act_for("alice") && !alice.may_act_for("bob"));
        assert_eq!(table.lookup("alice-key "), None, "no near matches");
        assert_eq!(table.lookup(""), None);
    }

    #[test]
    fn admins_act_for_users_and_nobody_else_does() {
        let config = parse_config(
            json!({"auth": {"keys": [
                {"key": "a", "admin": true, "id": "ops"},
                {"key": "b", "userId": "alice"},
                {"key": "c", "id": "ci"}
            ]}}),
            "test",
        )
        .expect("config");
        let table = KeyTable::from_config(&config.auth);
        let [ops, alice, ci] = ["a", "b", "c"].map(|key| table.lookup(key).expect("caller"));
        let acting = ops.act_for("bob", ACT_FOR_HEADER).expect("an admin may");
        assert_eq!(acting.owner().as_deref(), Some("bob"));
        assert_eq!(acting.acted_by.as_deref(), Some("key:ops"));
        assert!(!acting.admin && !acting.may_reach(Some("alice")));
        assert_eq!(alice.act_for("alice", "user").expect("its own"), alice);
        for (caller, user) in [(&alice, "bob"), (&ci, "bob"), (&acting, "alice")] {
            let refused = caller.act_for(user, ACT_FOR_HEADER).expect_err("refused");
            assert_eq!(refused.status, axum::http::StatusCode::FORBIDDEN);
            assert_eq!(refused.param.as_deref(), Some(ACT_FOR_HEADER));
        }
        for bad in ["", "key:ci", "a b", ".."] {
            let refused = ops.act_for(bad, "user").expect_err(bad);
            assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(refused.param.as_deref(), Some("user"), "{bad}");
        }
        let keyless = Caller::admin()
            .act_for("carol", ACT_FOR_HEADER)
            .expect("keyless");
        assert_eq!(keyless.acted_by.as_deref(), Some("admin"));
    }

    #[test]
    fn keys_bound_to_no_user_are_owners_of_their_own() {
        let config = parse_config(
            json!({"auth": {"keys": [
                {"key": "a", "id": "ci"},
                {"key": "b"},
                {"key": "c", "admin": true, "id": "ops"},
                {"key": "d", "userId": "alice"}
            ]}}),
            "test",
        )
        .expect("config");
        let table = KeyTable::from_config(&config.auth);
        let [ci, second, ops, alice] =
            ["a", "b", "c", "d"].map(|key| table.lookup(key).expect("caller"));
        assert_eq!(ci.owner().as_deref(), Some("key:ci"));
        assert_eq!(second.owner().as_deref(), Some("key:keys[1]"));
        assert_eq!(alice.owner().as_deref(), Some("alice"));
        assert!(ci.may_reach(Some("key:ci")) && !ci.may_reach(Some("key:keys[1]")));
        assert!(
            !ci.may_reach(None),
            "nor what a server without keys started"
        );
        assert!(!ci.may_reach(Some("key:ops")) && !ci.may_reach(Some("alice")));
        assert!(ops.may_reach(Some("key:ci")) && ops.may_reach(Some("alice")));
        assert_eq!(ops.decider(), "key:ops");
        assert_eq!(alice.decider(), "alice");
        assert!(ops.may_read_definitions() && !alice.may_read_definitions());
    }

    #[test]
    fn a_user_id_that_would_name_a_key_is_refused_at_load() {
        let error = parse_config(
            json!({"auth": {"keys": [{"key": "a", "userId": "key:ci"}]}}),
            "test",
        )
        .expect_err("refused");
        assert!(error.to_string().contains("auth.keys[0].userId"), "{error}");
    }

    #[test]
    fn keys_that_expanded_to_nothing_are_ignored() {
        let config = parse_config(
            json!({"auth": {"keys": [{"key": "", "admin": true}, {"key": "  "}]}}),
            "t",
        )
        .expect("config");
        assert!(!KeyTable::from_config(&config.auth).enforced);
    }

    #[test]
    fn no_keys_or_disabled_means_open() {
        let config = parse_config(
            json!({"auth": {"keys": [{"key": "k"}], "disabled": true}}),
            "t",
        )
        .expect("config");
        assert!(!KeyTable::from_config(&config.auth).enforced);
        assert!(!KeyTable::from_config(&AuthConfig::default()).enforced);
    }
}

//! Scopes (SPEC §12), for keys and tokens alike: `agents:NAME:run` (`*` matches any run of
//! characters in NAME), `runs:read`, `keys:manage`, `admin`. This module parses them and says
//! what a set of them grants ([`Grants`]); it knows nothing about who presented them.

use std::fmt;
use std::str::FromStr;

/// One scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `agents:NAME:run`: may run the agents NAME matches.
    RunAgents(String),
    /// `runs:read`: may list and read runs (its own, or everyone's with `admin`).
    RunsRead,
    /// `keys:manage`: may create, list, rotate and revoke its user's keys.
    KeysManage,
    /// `admin`: everything, for every user.
    Admin,
}

/// Why a scope string is not a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a scope: use agents:NAME:run (NAME may hold `*`), runs:read, keys:manage or admin"
)]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "runs:read" => return Ok(Self::RunsRead),
            "keys:manage" => return Ok(Self::KeysManage),
            "admin" => return Ok(Self::Admin),
            _ => {}
        }
        text.strip_prefix("agents:")
            .and_then(|rest| rest.strip_suffix(":run"))
            .filter(|name| is_agent_pattern(name))
            .map(|name| Self::RunAgents(name.to_string()))
            .ok_or_else(|| UnknownScope(text.to_string()))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RunAgents(pattern) => write!(f, "agents:{pattern}:run"),
            Self::RunsRead => f.write_str("runs:read"),
            Self::KeysManage => f.write_str("keys:manage"),
            Self::Admin => f.write_str("admin"),
        }
    }
}

/// An agent name or a pattern of one: letters, digits, `-`, `_`, `.`, `/` and `*`.
fn is_agent_pattern(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '*'))
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub fn agent_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// What a set of scopes grants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    pub admin: bool,
    /// The agent patterns it may run; `None` is every agent.
    pub agents: Option<Vec<String>>,
    pub runs_read: bool,
    pub keys_manage: bool,
}

impl Grants {
    /// Everything (`admin`).
    pub fn all() -> Self {
        Self {
            admin: true,
            agents: None,
            runs_read: true,
            keys_manage: true,
        }
    }

    /// What `scopes` grant: `admin` everything; otherwise the agents of the `agents:…:run`
    /// scopes (none without one, every agent with `agents:*:run`).
    pub fn of(scopes: &[Scope]) -> Self {
        if scopes.contains(&Scope::Admin) {
            return Self::all();
        }
        let patterns: Vec<String> = scopes
            .iter()
            .filter_map(|scope| match scope {
                Scope::RunAgents(pattern) => Some(pattern.clone()),
                _ => None,
            })
            .collect();
        Self {
            admin: false,
            agents: if patterns.iter().any(|p| p == "*") {
                None
            } else {
                Some(patterns)
            },
            runs_read: scopes.contains(&Scope::RunsRead),
            keys_manage: scopes.contains(&Scope::KeysManage),
        }
    }

    /// The scopes that grant exactly this.
    pub fn scopes(&self) -> Vec<Scope> {
        if self.admin {
            return vec![Scope::Admin];
        }
        let mut scopes: Vec<Scope> = match &self.agents {
            None => vec![Scope::RunAgents("*".into())],
            Some(patterns) => patterns.iter().cloned().map(Scope::RunAgents).collect(),
        };
        if self.runs_read {
            scopes.push(Scope::RunsRead);
        }
        if self.keys_manage {
            scopes.push(Scope::KeysManage);
        }
        scopes
    }

    /// Whether these grants let their holder run `agent`.
    pub fn may_run(&self, agent: &str) -> bool {
        self.admin
            || self
                .agents
                .as_ref()
                .is_none_or(|patterns| patterns.iter().any(|pattern| agent_matches(pattern, agent)))
    }

    /// Whether everything `other` grants, these grant too (a key may be given no more than
    /// its creator holds). A pattern is covered when the same pattern is held, or, without a
    /// wildcard, when the agent it names may be run.
    pub fn covers(&self, other: &Grants) -> bool {
        if self.admin {
            return true;
        }
        let agents_covered = match (&self.agents, &other.agents) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(mine), Some(theirs)) => theirs
                .iter()
                .all(|p| mine.contains(p) || (!p.contains('*') && self.may_run(p))),
        };
        !other.admin
            && agents_covered
            && (self.runs_read || !other.runs_read)
            && (self.keys_manage || !other.keys_manage)
    }
}

/// Parses every scope of a list, naming the first that is not one.
pub fn parse_all<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Vec<Scope>, UnknownScope> {
    texts.into_iter().map(str::parse).collect()
}

/// The scopes of a list that are agentd's, ignoring others (a token also carries `openid`,
/// `profile` and scopes for other servers).
pub fn known_scopes<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Scope> {
    texts.into_iter().filter_map(|t| t.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_and_print_back() {
        for text in [
            "agents:chat:run",
            "agents:*:run",
            "agents:team-*:run",
            "runs:read",
            "keys:manage",
            "admin",
        ] {
            let scope: Scope = text.parse().expect(text);
            assert_eq!(scope.to_string(), text);
        }
        for bad in [
            "agents::run",
            "agents:chat",
            "agents:a b:run",
            "runs:write",
            "",
            "ADMIN",
        ] {
            let error = bad.parse::<Scope>().expect_err(bad);
            assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
        }
    }

    #[test]
    fn wildcards_match_any_run_of_characters() {
        assert!(agent_matches("*", "anything"));
        assert!(agent_matches("team-*", "team-a") && agent_matches("team-*", "team-"));
        assert!(!agent_matches("team-*", "other"));
        assert!(agent_matches("*-bot", "help-bot") && !agent_matches("*-bot", "help-bots"));
        assert!(agent_matches("a*b*c", "aXbYc") && !agent_matches("a*b*c", "acb"));
        assert!(agent_matches("chat", "chat") && !agent_matches("chat", "chats"));
        assert!(
            !agent_matches("ab*ab", "ab"),
            "no overlap of prefix and suffix"
        );
    }

    #[test]
    fn grants_follow_the_scopes() {
        let grants = Grants::of(&known_scopes(["openid", "agents:team-*:run", "runs:read"]));
        assert!(grants.may_run("team-x") && !grants.may_run("chat"));
        assert!(grants.runs_read && !grants.keys_manage && !grants.admin);
        assert!(!Grants::of(&[]).may_run("chat"), "no agent scope: no agent");
        assert!(Grants::of(&known_scopes(["agents:*:run"])).agents.is_none());
        assert_eq!(Grants::of(&[Scope::Admin]), Grants::all());
    }

    #[test]
    fn a_key_gets_no_more_than_its_creator_holds() {
        let creator = Grants::of(&known_scopes(["agents:team-*:run", "keys:manage"]));
        let narrower = Grants::of(&known_scopes(["agents:team-a:run"]));
        assert!(creator.covers(&narrower));
        assert!(!creator.covers(&Grants::of(&known_scopes(["agents:*:run"]))));
        assert!(!creator.covers(&Grants::of(&known_scopes(["agents:chat:run"]))));
        assert!(!creator.covers(&Grants::of(&known_scopes(["runs:read"]))));
        assert!(!creator.covers(&Grants::all()));
        assert!(Grants::all().covers(&Grants::all()));
    }
}

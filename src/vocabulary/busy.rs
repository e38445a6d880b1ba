//! `busy`: what a message sent to a conversation that is still answering another does (SPEC
//! §13), set per agent (frontmatter) and per request.

use serde::Deserialize;

/// What a message to a busy conversation does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BusyPolicy {
    /// Stored at once, answered after the answers in progress and queued, in arrival order.
    #[default]
    Enqueue,
    /// Refused with 409 `conversation_busy`.
    Reject,
    /// The answer in progress ends `cancelled` with its partial answer stored, then this
    /// message is answered.
    Interrupt,
    /// The message joins the answer in progress at its next turn (or, when the model has
    /// just answered with turns left, that turn is answered again) and one answer covers both
    /// messages. A run on its final turn answers first; the message is then answered after it.
    Steer,
}

impl BusyPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enqueue => "enqueue",
            Self::Reject => "reject",
            Self::Interrupt => "interrupt",
            Self::Steer => "steer",
        }
    }

    /// The policy a stored row names; an unknown text reads as `enqueue`.
    pub fn parse(text: &str) -> Self {
        [Self::Reject, Self::Interrupt, Self::Steer]
            .into_iter()
            .find(|policy| policy.as_str() == text)
            .unwrap_or_default()
    }

    /// Whether a message with this policy stops the answer in progress.
    pub fn stops_the_answer(self) -> bool {
        self == Self::Interrupt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_their_names() {
        for policy in [
            BusyPolicy::Enqueue,
            BusyPolicy::Reject,
            BusyPolicy::Interrupt,
            BusyPolicy::Steer,
        ] {
            assert_eq!(BusyPolicy::parse(policy.as_str()), policy);
            let parsed: BusyPolicy =
                serde_json::from_value(serde_json::json!(policy.as_str())).expect("parses");
            assert_eq!(parsed, policy);
        }
        assert!(serde_json::from_value::<BusyPolicy>(serde_json::json!("later")).is_err());
    }
}

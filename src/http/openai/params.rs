//! The request parameters both OpenAI completion endpoints share: sampling ranges checked as
//! OpenAI checks them (a 400 naming the parameter), turned into the run's [`SamplingParams`];
//! `n` within [`MAX_CHOICES`]; the `user` field (an admin acts for that user); and the
//! parameters that will have no effect, named to the client in [`WARNING_HEADER`] and in a log
//! line.

pub use crate::http::shared::callers::caller_for_user;
use axum::http::HeaderValue;
use axum::response::Response;

use super::wire::SamplingFields;
use crate::agent::SamplingParams;
use crate::config::AgentSpec;
use crate::http::error::ApiError;
use crate::llm::parameters::RequestParam;
use crate::runtime::Runtime;

/// The most answers (`n`) one request may ask for: each is a run of its own, holding a session
/// slot while it runs.
pub const MAX_CHOICES: u32 = 8;
/// OpenAI's limit on `stop`.
pub const MAX_STOP_SEQUENCES: usize = 4;
/// Names the parameters a request set that have no effect: `ignored parameters: seed, logprobs`.
pub const WARNING_HEADER: &str = "x-agentd-warning";

/// How many answers to give: `n` from 1 to [`MAX_CHOICES`], and only 1 when streaming.
pub fn choices(n: Option<u32>, stream: bool) -> Result<u32, ApiError> {
    let n = n.unwrap_or(1);
    if !(1..=MAX_CHOICES).contains(&n) {
        return Err(ApiError::invalid_request(format!(
            "`n` must be from 1 to {MAX_CHOICES} (each answer is a run of its own), not {n}"
        ))
        .with_param("n"));
    }
    if stream && n > 1 {
        return Err(ApiError::invalid_request(
            "`n` above 1 cannot be streamed: leave out `stream`, or send one streamed request per answer",
        )
        .with_param("n"));
    }
    Ok(n)
}

/// The run's sampling from the request, every value checked.
pub fn sampling_of(
    fields: &SamplingFields,
    max_tokens: Option<u32>,
) -> Result<SamplingParams, ApiError> {
    in_range("temperature", fields.temperature, 0.0, 2.0)?;
    in_range("top_p", fields.top_p, 0.0, 1.0)?;
    in_range("presence_penalty", fields.presence_penalty, -2.0, 2.0)?;
    in_range("frequency_penalty", fields.frequency_penalty, -2.0, 2.0)?;
    let stop = fields.stop.as_ref().map(|stop| stop.sequences());
    if let Some(stop) = &stop
        && stop.len() > MAX_STOP_SEQUENCES
    {
        return Err(ApiError::invalid_request(format!(
            "`stop` holds {} sequences; at most {MAX_STOP_SEQUENCES} are allowed",
            stop.len()
        ))
        .with_param("stop"));
    }
    if let Some(bias) = &fields.logit_bias {
        for (token, value) in bias {
            if token.parse::<u64>().is_err() || !(-100.0..=100.0).contains(value) {
                return Err(ApiError::invalid_request(format!(
                    "`logit_bias` maps token ids (whole numbers) to a bias from -100 to 100; {token:?}: {value} is not that"
                ))
                .with_param("logit_bias"));
            }
        }
    }
    Ok(SamplingParams {
        temperature: fields.temperature,
        top_p: fields.top_p,
        max_output_tokens: max_tokens,
        stop: stop.filter(|stop| !stop.is_empty()),
        presence_penalty: fields.presence_penalty,
        frequency_penalty: fields.frequency_penalty,
        seed: fields.seed,
        logit_bias: fields.logit_bias.clone().filter(|bias| !bias.is_empty()),
        ..SamplingParams::default()
    })
}

fn in_range(name: &'static str, value: Option<f64>, min: f64, max: f64) -> Result<(), ApiError> {
    match value {
        Some(value) if !(min..=max).contains(&value) => Err(ApiError::invalid_request(format!(
            "`{name}` must be from {min} to {max}, not {value}"
        ))
        .with_param(name)),
        _ => Ok(()),
    }
}

/// Parameters a request set that will have no effect, by their OpenAI names, in order.
#[derive(Debug, Default)]
pub struct Ignored(Vec<&'static str>);

impl Ignored {
    /// `name` is ignored when `set`.
    pub fn note(&mut self, name: &'static str, set: bool) {
        if set && !self.0.contains(&name) {
            self.0.push(name);
        }
    }

    /// The request parameters of `sampling` that a model of `agent` does not take (its provider
    /// never sends them), so that answer is given without them.
    pub fn not_taken(&mut self, runtime: &Runtime, agent: &AgentSpec, sampling: &SamplingParams) {
        let providers = &runtime.config().providers;
        for param in RequestParam::ALL {
            let dropped = agent.targets.iter().any(|target| {
                providers
                    .get(&target.provider)
                    .is_some_and(|provider| !param.taken_by(provider.kind))
            });
            self.note(param.name(), param.is_set(sampling) && dropped);
        }
    }

    #[cfg(test)]
    pub fn names(&self) -> &[&'static str] {
        &self.0
    }

    /// Logs the ignored parameters and names them in [`WARNING_HEADER`] on `response`.
    pub fn warn(&self, agent: &str, mut response: Response) -> Response {
        if self.0.is_empty() {
            return response;
        }
        let list = self.0.join(", ");
        tracing::info!(agent, ignored = %list, "request parameters ignored");
        if let Ok(value) = HeaderValue::from_str(&format!("ignored parameters: {list}")) {
            response.headers_mut().insert(WARNING_HEADER, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::Caller;
    use crate::http::openai::wire::StopSequences;
    use serde_json::{Value, json};

    fn fields(body: Value) -> SamplingFields {
        serde_json::from_value(body).expect("fields")
    }

    fn refused(body: Value) -> Option<String> {
        sampling_of(&fields(body), None).err().and_then(|e| e.param)
    }

    #[test]
    fn ranges_are_openais() {
        for (name, ok, bad) in [
            ("temperature", 2.0, 2.01),
            ("top_p", 1.0, 1.5),
            ("presence_penalty", -2.0, -2.5),
            ("frequency_penalty", 2.0, 3.0),
        ] {
            assert_eq!(refused(json!({name: ok})), None, "{name} {ok}");
            assert_eq!(
                refused(json!({name: bad})).as_deref(),
                Some(name),
                "{name} {bad}"
            );
        }
        assert_eq!(refused(json!({"logit_bias": {"50256": -100}})), None);
        for bad in [json!({"50256": -101}), json!({"word": 1})] {
            assert_eq!(
                refused(json!({"logit_bias": bad})).as_deref(),
                Some("logit_bias")
            );
        }
    }

    #[test]
    fn stop_takes_a_string_or_up_to_four() {
        let one = sampling_of(&fields(json!({"stop": "Observation:"})), None).expect("one");
        assert_eq!(one.stop, Some(vec!["Observation:".to_string()]));
        let four = json!({"stop": ["a", "b", "c", "d"]});
        assert_eq!(
            sampling_of(&fields(four), None)
                .expect("4")
                .stop
                .map(|s| s.len()),
            Some(4)
        );
        assert_eq!(
            refused(json!({"stop": ["a", "b", "c", "d", "e"]})).as_deref(),
            Some("stop")
        );
        let blank = sampling_of(&fields(json!({"stop": ["", ""]})), None).expect("blank");
        assert_eq!(blank.stop, None);
        assert!(matches!(
            fields(json!({"stop": ["x"]})).stop,
            Some(StopSequences::Many(_))
        ));
    }

    #[test]
    fn n_is_capped_and_not_streamed_above_one() {
        assert_eq!(choices(None, true).expect("default"), 1);
        assert_eq!(
            choices(Some(MAX_CHOICES), false).expect("at the cap"),
            MAX_CHOICES
        );
        for (n, stream) in [(0, false), (MAX_CHOICES + 1, false), (2, true)] {
            let error = choices(Some(n), stream).expect_err("refused");
            assert_eq!(error.param.as_deref(), Some("n"), "{n} {stream}");
        }
    }

    #[test]
    fn the_user_field_acts_for_a_user_only_for_an_admin_and_is_a_tag_otherwise() {
        let admin = Caller::admin();
        let (acting, ignored) = caller_for_user(admin.clone(), Some(&json!("alice"))).expect("ok");
        assert_eq!((acting.user_id.as_deref(), ignored), (Some("alice"), false));
        assert_eq!(acting.acted_by.as_deref(), Some("admin"));
        let (same, ignored) = caller_for_user(acting.clone(), Some(&json!("alice"))).expect("ok");
        assert_eq!((same, ignored), (acting.clone(), false));
        let refused = caller_for_user(acting, Some(&json!("bob"))).expect_err("another user");
        assert_eq!(refused.param.as_deref(), Some("user"));
        for tag in [json!("user 42 (web)"), json!("key:ci"), json!({"id": "x"})] {
            let (caller, ignored) = caller_for_user(admin.clone(), Some(&tag)).expect("a tag");
            assert!(
                ignored && caller.admin && caller.acted_by.is_none(),
                "{tag}"
            );
        }
        for nothing in [json!(""), Value::Null] {
            let (caller, ignored) = caller_for_user(admin.clone(), Some(&nothing)).expect("ok");
            assert!(!ignored && caller.admin, "{nothing}");
        }
    }

    #[test]
    fn ignored_parameters_are_listed_once_in_order() {
        let mut ignored = Ignored::default();
        ignored.note("seed", true);
        ignored.note("logprobs", false);
        ignored.note("user", true);
        ignored.note("seed", true);
        assert_eq!(ignored.names(), ["seed", "user"]);
        let response = ignored.warn("chat", Response::default());
        assert_eq!(
            response.headers()[WARNING_HEADER],
            "ignored parameters: seed, user"
        );
        assert!(
            Ignored::default()
                .warn("chat", Response::default())
                .headers()
                .get(WARNING_HEADER)
                .is_none()
        );
    }
}

//! `POST /v1/completions`, OpenAI's legacy text completions, for the clients that still call it
//! (LlamaIndex's `OpenAILike` with its defaults, the AI SDK's `.completion()`): the prompt is
//! the agent's task, the answer a `text_completion`, streamed as `text_completion` frames and
//! `[DONE]`. Runs start, finish and stream through the chat completions path of the parent
//! module; this module only reads the request and writes the frames.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};

use super::params::{self, Ignored};
use super::wire::{
    CompletionUsage, FinishReason, Prompt, TextChoice, TextCompletion, TextCompletionObject,
    TextCompletionRequest,
};
use super::{Frames, TextField, finished_runs, first_alone, first_id, run_ids_of};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ErrorBody};
use crate::http::shared::drive::Frame;
use crate::http::sse::with_run_headers;
use crate::llm::ToolCall;
use crate::runtime::{RunHandle, Runtime};
use crate::vocabulary::result::UsageTotals;

/// OpenAI's cap on the legacy `logprobs`.
const MAX_LOGPROBS: u32 = 5;

#[utoipa::path(
    post,
    path = "/v1/completions",
    tag = "openai",
    summary = "OpenAI's legacy text completions; `model` names an agent, `prompt` is its task",
    request_body = TextCompletionRequest,
    responses(
        (status = 200, description = "A `text_completion`, or with `stream: true` `data:` frames each holding a `TextCompletion` with one choice (an error after the stream started is a `data:` frame holding an `ErrorBody`), then `data: [DONE]`",
            content(
                (TextCompletion = "application/json"),
                (crate::http::wire::ServerSentEvent = "text/event-stream"),
            )),
        ErrorBody,
    ),
)]
pub async fn completions(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<TextCompletionRequest>,
) -> Result<Response, ApiError> {
    let (caller, user_ignored) = params::caller_for_user(caller, body.sampling.user.as_ref())?;
    let agent = caller.model_agent(&runtime, &body.model)?;
    let prompt = prompt_of(&body.prompt)?;
    refuse_unsupported(&body)?;
    let stream = body.stream.unwrap_or(false);
    let n = params::choices(body.n, stream)?;
    let sampling = params::sampling_of(&body.sampling, body.max_tokens)?;
    let mut ignored = Ignored::default();
    ignored.not_taken(&runtime, &agent, &sampling);
    ignored.note("logprobs", body.logprobs.is_some());
    ignored.note("best_of", body.best_of.is_some_and(|best_of| best_of > 1));
    ignored.note("user", user_ignored);
    let agent_name = agent.name.clone();
    let mut submission = caller.submission(agent, prompt);
    submission.overrides = sampling;
    let handles = super::start_choices(&runtime, submission, n)
        .await
        .map_err(ApiError::from)?;
    let run_ids = run_ids_of(&handles);
    let frames = TextFrames {
        id: format!("cmpl-{}", first_id(&handles)),
        model: body.model.clone(),
        created: chrono::Utc::now().timestamp(),
        include_usage: body
            .stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage),
    };
    let response = match (stream, first_alone(handles)) {
        (true, Ok(handle)) => super::stream_response(&runtime, handle, frames, false),
        (_, Ok(handle)) => complete(vec![handle], frames).await,
        (_, Err(handles)) => complete(handles, frames).await,
    };
    Ok(ignored.warn(&agent_name, with_run_headers(response, &run_ids, None)))
}

/// The prompt's text: a string, or a list holding one.
fn prompt_of(prompt: &Prompt) -> Result<String, ApiError> {
    let text = match prompt {
        Prompt::Text(text) => text,
        Prompt::Texts(texts) => match texts.as_slice() {
            [text] => text,
            _ => {
                return Err(ApiError::invalid_request(format!(
                    "`prompt` holds {} prompts; send one per request (its answers are runs of an agent)",
                    texts.len()
                ))
                .with_param("prompt"));
            }
        },
    };
    if text.trim().is_empty() {
        return Err(ApiError::invalid_request("`prompt` is empty").with_param("prompt"));
    }
    Ok(text.clone())
}

/// 400 for what an agent cannot do: echo the prompt, fill in before a suffix; and `logprobs`
/// past OpenAI's cap.
fn refuse_unsupported(body: &TextCompletionRequest) -> Result<(), ApiError> {
    if body.echo == Some(true) {
        return Err(ApiError::invalid_request(
            "`echo` must be false: an agent answers the prompt, it does not continue or score its text",
        )
        .with_param("echo"));
    }
    if body
        .suffix
        .as_deref()
        .is_some_and(|suffix| !suffix.is_empty())
    {
        return Err(ApiError::invalid_request(
            "`suffix` is not supported: an agent answers the prompt, it does not fill in text before a suffix",
        )
        .with_param("suffix"));
    }
    if body.logprobs.is_some_and(|n| n > MAX_LOGPROBS) {
        return Err(ApiError::invalid_request(format!(
            "`logprobs` must be from 0 to {MAX_LOGPROBS}"
        ))
        .with_param("logprobs"));
    }
    Ok(())
}

/// The `text_completion` of a request's runs: one choice each, in order.
async fn complete(handles: Vec<RunHandle>, frames: TextFrames) -> Response {
    let finished = match finished_runs(handles).await {
        Ok(finished) => finished,
        Err(error) => return error.into_response(),
    };
    let answers: Vec<String> = finished
        .iter()
        .map(|run| run.result.answer_text())
        .collect();
    let choices = finished
        .iter()
        .zip(&answers)
        .zip(0..)
        .map(|((run, text), index)| TextChoice {
            text,
            index,
            logprobs: None,
            finish_reason: Some(run.reason),
        })
        .collect();
    let usage = CompletionUsage::sum(finished.iter().map(|run| &run.result.usage));
    axum::Json(frames.body(choices, Some(usage))).into_response()
}

/// Writes `text_completion` bodies and frames: answer text only (reasoning and progress have
/// no place in them).
pub(crate) struct TextFrames {
    id: String,
    model: String,
    created: i64,
    include_usage: bool,
}

impl TextFrames {
    fn body<'a>(
        &'a self,
        choices: Vec<TextChoice<'a>>,
        usage: Option<CompletionUsage>,
    ) -> TextCompletion<'a> {
        TextCompletion {
            id: &self.id,
            object: TextCompletionObject::TextCompletion,
            created: self.created,
            model: &self.model,
            choices,
            usage,
        }
    }

    /// One streamed frame's JSON: `text` in the one choice.
    fn frame_text(&self, text: &str, finish_reason: Option<FinishReason>) -> String {
        let choice = TextChoice {
            text,
            index: 0,
            logprobs: None,
            finish_reason,
        };
        // Borrowed strings and numbers only: serialisation cannot fail.
        serde_json::to_string(&self.body(vec![choice], None)).unwrap_or_default()
    }

    /// The usage frame's JSON: no choices.
    fn usage_text(&self, usage: &UsageTotals) -> String {
        serde_json::to_string(&self.body(Vec::new(), Some(usage.into()))).unwrap_or_default()
    }
}

impl Frames for TextFrames {
    fn opening(&self) -> Option<Frame> {
        None
    }

    fn text(&self, field: TextField, text: &str) -> Option<Frame> {
        match field {
            TextField::Content => Some(Frame::data(self.frame_text(text, None))),
            TextField::Reasoning => None,
        }
    }

    fn tool_calls(&self, _calls: &[ToolCall]) -> Option<Frame> {
        None
    }

    fn finish(&self, reason: FinishReason) -> Frame {
        Frame::data(self.frame_text("", Some(reason)))
    }

    fn usage(&self, usage: &UsageTotals) -> Option<Frame> {
        self.include_usage
            .then(|| Frame::data(self.usage_text(usage)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn frames(include_usage: bool) -> TextFrames {
        TextFrames {
            id: "cmpl-1".into(),
            model: "chat".into(),
            created: 7,
            include_usage,
        }
    }

    fn data(text: String) -> Value {
        serde_json::from_str(&text).expect("parses")
    }

    #[test]
    fn frames_have_openais_text_completion_shape() {
        let frames = frames(true);
        assert_eq!(
            data(frames.frame_text("Hi", None)),
            json!({"id": "cmpl-1", "object": "text_completion", "created": 7, "model": "chat",
                "choices": [{"text": "Hi", "index": 0, "logprobs": null, "finish_reason": null}]})
        );
        assert!(frames.text(TextField::Content, "Hi").is_some());
        assert!(frames.text(TextField::Reasoning, "hm").is_none());
        assert!(frames.opening().is_none());
        assert_eq!(
            data(frames.frame_text("", Some(FinishReason::Stop)))["choices"][0]["finish_reason"],
            "stop"
        );
        let usage = data(frames.usage_text(&UsageTotals::default()));
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["total_tokens"], 0);
        assert!(frames.usage(&UsageTotals::default()).is_some());
        assert!(self::frames(false).usage(&UsageTotals::default()).is_none());
    }

    #[test]
    fn every_stored_run_streams_as_golden_text_completion_frames() {
        use crate::http::shared::goldens::{self, RUN_ID};
        goldens::each("completions", || {
            super::super::CompletionTranslator::new(frames(true), RUN_ID, false)
        });
    }

    #[test]
    fn one_prompt_is_taken() {
        assert_eq!(prompt_of(&Prompt::Text("hi".into())).expect("text"), "hi");
        assert_eq!(
            prompt_of(&Prompt::Texts(vec!["hi".into()])).expect("one"),
            "hi"
        );
        for refused in [
            Prompt::Texts(vec!["a".into(), "b".into()]),
            Prompt::Texts(Vec::new()),
            Prompt::Text("  ".into()),
        ] {
            assert_eq!(
                prompt_of(&refused).expect_err("refused").param.as_deref(),
                Some("prompt")
            );
        }
    }
}

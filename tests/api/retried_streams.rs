//! A stream that breaks off mid-answer and is retried: the text a streaming client receives
//! equals the answer a non-streaming client gets (no `echo: echo: hello world`). When the retry
//! says something else, the runs API marks its text `replace: true` and the OpenAI and
//! Anthropic streams show it after a blank line.

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, json_frames, spawn_app, sse_data};

const ANSWER: &str = "echo: hello world, again";

/// The answer in five pieces, the first attempt cut after two.
fn cut_then_retried(app: &TestApp, retry: &str) {
    let pieces = ["echo", ": hel", "lo wor", "ld, ", "again"];
    app.llm
        .push(Reply::text_in_pieces(&pieces).cut_after_pieces(2));
    let retry_pieces: Vec<&str> = retry.split_inclusive(' ').collect();
    app.llm.push(Reply::text_in_pieces(&retry_pieces));
}

async fn openai_streamed_text(app: &TestApp) -> String {
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let data = sse_data(app.post_json("/v1/chat/completions", &body).await).await;
    json_frames(&data)
        .iter()
        .filter_map(|f| {
            f["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn an_openai_stream_retried_after_a_break_carries_the_answer_once() {
    let app = spawn_app().await;
    cut_then_retried(&app, ANSWER);
    assert_eq!(openai_streamed_text(&app).await, ANSWER);
    assert_eq!(app.llm.request_count(), 2, "the break was retried");
}

#[tokio::test]
async fn an_anthropic_stream_retried_after_a_break_carries_the_answer_once() {
    let app = spawn_app().await;
    cut_then_retried(&app, ANSWER);
    let body = json!({"model": "chat", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let data = sse_data(app.post_json("/v1/messages", &body).await).await;
    let text: String = json_frames(&data)
        .iter()
        .filter(|f| f["type"] == "content_block_delta")
        .filter_map(|f| f["delta"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, ANSWER);
}

#[tokio::test]
async fn run_events_of_a_retried_stream_add_up_to_the_answer() {
    let app = spawn_app().await;
    cut_then_retried(&app, ANSWER);
    let data = sse_data(
        app.post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "stream": true}),
        )
        .await,
    )
    .await;
    let outputs: Vec<Value> = json_frames(&data)
        .into_iter()
        .filter(|f| f.get("text").is_some() && f.get("kind").is_none())
        .collect();
    let text: String = outputs.iter().filter_map(|f| f["text"].as_str()).collect();
    assert!(
        text.ends_with(ANSWER) && text.len() == ANSWER.len(),
        "{text:?}"
    );
    assert!(outputs.iter().all(|f| f.get("replace").is_none()));
}

#[tokio::test]
async fn a_retry_that_says_something_else_is_marked_as_a_replacement() {
    let app = spawn_app().await;
    cut_then_retried(&app, "echo: something else entirely");
    let data = sse_data(
        app.post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "stream": true}),
        )
        .await,
    )
    .await;
    let replacement = json_frames(&data)
        .into_iter()
        .find(|f| f["replace"] == true)
        .expect("a replacing output event");
    assert_eq!(replacement["text"], "echo: something ");

    let app = spawn_app().await;
    cut_then_retried(&app, "echo: something else entirely");
    assert_eq!(
        openai_streamed_text(&app).await,
        "echo: hel\n\necho: something else entirely",
        "an OpenAI client sees the broken-off text, a blank line, the retried answer"
    );
}

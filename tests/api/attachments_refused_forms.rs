//! A chat message sent as a form streams its files into the store as they arrive; when the
//! message is then refused (a later part, a later file, the agent), none of those files stays
//! behind as the caller's.

use reqwest::multipart::Form;
use serde_json::json;

use crate::attachments::{ALICE, PNG, chat_form, file_part, files_of, keyed};
use crate::support::spawn_app_with;

#[tokio::test]
async fn a_refused_form_leaves_none_of_its_files_behind() {
    let app = spawn_app_with(|config| {
        keyed(config);
        config["limits"] = json!({"attachments": {"maxFileBytes": 1000}});
    })
    .await;
    let png = || file_part("pixel.png", "image/png", PNG.to_vec());
    let refusals = [
        (
            "a bad part after the file",
            Form::new()
                .text("message", "look")
                .part("file", png())
                .text("stream", "maybe"),
            "stream",
        ),
        (
            "an agent that does not exist",
            Form::new()
                .text("message", "look")
                .text("agent", "no-such-agent")
                .part("file", png()),
            "agent",
        ),
        (
            "a second file past the per-file limit",
            Form::new()
                .text("message", "look")
                .part("file", png())
                .part("file", file_part("big.txt", "text/plain", vec![b'a'; 1001])),
            "file[1]",
        ),
    ];
    for (what, form, param) in refusals {
        let (status, error) = chat_form(&app, ALICE, "alice", form).await;
        assert!((400..500).contains(&status), "{what}: {status} {error}");
        assert_eq!(error["error"]["param"], param, "{what}: {error}");
        assert!(
            files_of(&app, ALICE).await.is_empty(),
            "{what}: the refused message left a file"
        );
    }
    // The same file with an acceptable message is kept.
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel"));
    let (status, answer) = chat_form(
        &app,
        ALICE,
        "alice",
        Form::new().text("message", "look").part("file", png()),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(files_of(&app, ALICE).await.len(), 1);
}

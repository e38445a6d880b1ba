use std::path::Path;

use serde_json::json;

use super::*;
use crate::agent::SessionRequest;
use crate::config::registry::resolve_agent;
use crate::config::{AgentSpec, parse_config};
use crate::llm::ChatMessage;
use crate::vocabulary::result::{FinalReport, RunStatus};

fn agent(frontmatter: &str) -> Arc<AgentSpec> {
    let config = parse_config(
        json!({"providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://x"}}}),
        "test",
    )
    .expect("config");
    let text = format!("---\nmodels: llm/m\n{frontmatter}---\nYou help.\n");
    let file = crate::config::agent_file::parse_agent_file(&text).expect("agent file");
    Arc::new(resolve_agent(Path::new("/t/chat.ai"), file, &config).expect("agent"))
}

fn request(agent: Arc<AgentSpec>, prompt: &str) -> SessionRequest {
    SessionRequest::for_prompt("run-1".into(), agent, prompt.into())
}

fn answered(text: &str) -> AgentResult {
    AgentResult {
        run_id: "first".into(),
        success: true,
        error: None,
        exit_reason: ExitReason::FinalAnswer,
        final_report: Some(FinalReport {
            status: ReportStatus::Success,
            format: "markdown".into(),
            content: Some(text.into()),
            content_json: None,
            metadata: None,
            ts: 1,
        }),
        conversation: vec![ChatMessage::user("q"), ChatMessage::assistant(text)],
        accounting: Vec::new(),
        usage: UsageTotals {
            input_tokens: 10,
            output_tokens: 5,
            cached_tokens: 0,
            total_tokens: 15,
        },
        cost_usd: 0.5,
        turns: 1,
        duration_ms: 900,
        retry_after_secs: None,
    }
}

#[test]
fn identical_requests_share_a_key_and_any_difference_changes_it() {
    let chat = agent("cache: 1h\n");
    let base = request(chat.clone(), "What is 2+2?");
    let key = CacheKey::for_request(&base);
    assert_eq!(key, CacheKey::for_request(&base.clone()));
    assert_eq!(key.as_str().len(), 64, "hex sha256");

    let mut other_prompt = base.clone();
    other_prompt.prompt = "What is 2+3?".into();
    let mut other_format = base.clone();
    other_format.format = Some("json".into());
    let mut other_schema = base.clone();
    other_schema.schema = Some(json!({"type": "object"}));
    let mut other_history = base.clone();
    other_history.history = vec![ChatMessage::user("earlier")];
    let mut other_temperature = base.clone();
    other_temperature.overrides.temperature = Some(0.0);
    let other_agent = request(agent("cache: 1h\ntemperature: 0.5\n"), "What is 2+2?");
    let mut other_attachment = base.clone();
    other_attachment.attachments = vec![crate::vocabulary::Attachment {
        name: "a.png".into(),
        media_type: "image/png".into(),
        bytes: 1,
        sha256: "00".repeat(32),
        file_id: "file-1".into(),
        content: None,
        url: None,
        text_form: None,
    }];
    for (what, changed) in [
        ("attachment", other_attachment),
        ("prompt", other_prompt),
        ("format", other_format),
        ("schema", other_schema),
        ("history", other_history),
        ("temperature", other_temperature),
        ("agent hash", other_agent),
    ] {
        assert_ne!(key, CacheKey::for_request(&changed), "{what}");
    }
}

#[test]
fn the_owner_is_part_of_every_key() {
    for frontmatter in ["cache: 1h\n", "cache: 1h\nuserScoped: true\n"] {
        let owned_by = |owner: Option<&str>| {
            let mut asked = request(agent(frontmatter), "my tasks");
            asked.user_id = owner.map(str::to_string);
            CacheKey::for_request(&asked)
        };
        let alice = owned_by(Some("alice"));
        assert_eq!(alice, owned_by(Some("alice")), "{frontmatter}");
        assert_ne!(alice, owned_by(Some("bob")), "{frontmatter}");
        assert_ne!(
            owned_by(Some("key:a")),
            owned_by(Some("key:b")),
            "{frontmatter}"
        );
        assert_ne!(alice, owned_by(None), "{frontmatter}");
    }
}

#[test]
fn only_successful_non_empty_answers_are_cacheable() {
    assert!(is_cacheable(&answered("4")));
    assert!(!is_cacheable(&answered("   ")), "empty answer");
    let mut failed = answered("4");
    failed.success = false;
    failed.exit_reason = ExitReason::LlmError;
    assert!(!is_cacheable(&failed));
    let mut synthetic = answered("4");
    if let Some(report) = synthetic.final_report.as_mut() {
        report.status = ReportStatus::Failure;
    }
    assert!(!is_cacheable(&synthetic), "a made-up failure report");
    let mut hit = answered("4");
    hit.exit_reason = ExitReason::Cached;
    assert!(!is_cacheable(&hit), "a cache hit is not stored again");
}

#[test]
fn a_hit_is_the_stored_answer_under_the_new_run_with_no_usage() {
    let request = request(agent("cache: 1h\n"), "q");
    let hit = CachedResult {
        result: answered("4"),
        stored_at: Utc::now(),
    };
    let result = cached_run_result(hit, &request, 3);
    assert_eq!(result.run_id, "run-1");
    assert_eq!(result.exit_reason, ExitReason::Cached);
    assert_eq!(result.status(), RunStatus::Completed);
    assert_eq!(result.answer_text(), "4");
    assert_eq!(
        (result.usage, result.cost_usd, result.turns),
        (UsageTotals::default(), 0.0, 0)
    );
    assert_eq!(result.duration_ms, 3);
    let kinds: Vec<&str> = cached_run_events(&result, &request)
        .iter()
        .map(AgentEvent::kind)
        .collect();
    assert_eq!(
        kinds,
        ["run.started", "output", "final_report", "run.finished"]
    );
}

#[test]
fn the_redis_backend_needs_a_url() {
    let mut config = crate::config::cache::CacheConfig::default();
    assert!(check_config(&config).is_ok());
    config.backend = CacheBackend::Redis;
    let error = check_config(&config).unwrap_err();
    assert!(error.is_config());
    assert!(error.to_string().contains("cache.redis.url"), "{error}");
}

#[test]
fn expiry_is_now_plus_ttl_and_absurd_ttls_are_cut() {
    let now = Utc::now();
    assert_eq!(
        expiry(now, Duration::from_secs(30)),
        now + TimeDelta::seconds(30)
    );
    let far = expiry(now, Duration::from_secs(u64::MAX));
    assert_eq!(far, expiry(now, MAX_TTL));
    assert!(far > now);
}

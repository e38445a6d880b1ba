//! XML-NEXT: the ephemeral per-attempt instructions of the XML transports (contract §11). Never
//! stored in the conversation or cached; rebuilt for every attempt. It carries the turn header,
//! the context fill, what went wrong last time, the tools and their slots, and the final-report
//! slot with the one expected format (and its JSON schema for `json`).

use std::fmt::Write;

use serde_json::Value;

use super::XmlMode;
use crate::llm::ToolDefinition;

/// Everything one XML-NEXT message says.
pub struct NextNotice<'a> {
    pub turn: u32,
    pub max_turns: u32,
    pub attempt: u32,
    pub max_attempts: u32,
    pub context_percent: u64,
    pub nonce: &'a str,
    pub mode: XmlMode,
    /// Tools callable this turn (none on a final turn).
    pub tools: &'a [ToolDefinition],
    /// First slot number of this turn (`xml` mode).
    pub first_slot: u32,
    pub slot_count: u32,
    pub is_final: bool,
    /// The final report is expected (`finalization: report`).
    pub final_slot: bool,
    pub format: &'a str,
    pub schema: Option<&'a Value>,
    /// What was wrong with the previous attempt, one line each.
    pub feedback: &'a [String],
}

pub fn render(notice: &NextNotice<'_>) -> String {
    let mut text = String::from("# System Notice\n\n");
    header(&mut text, notice);
    if !notice.feedback.is_empty() {
        text.push_str("\n## Your previous response could not be used\n\n");
        for line in notice.feedback {
            let _ = writeln!(text, "- {line}");
        }
    }
    if notice.is_final {
        text.push_str("\nThis is the final turn: no tools are available. Answer now with what you already know.\n");
    } else {
        tools(&mut text, notice);
    }
    if notice.final_slot {
        final_slot(&mut text, notice);
    }
    text
}

fn header(text: &mut String, notice: &NextNotice<'_>) {
    let _ = write!(text, "This is turn {} of {}", notice.turn, notice.max_turns);
    if notice.attempt > 1 {
        let _ = write!(
            text,
            ", attempt {} of {}",
            notice.attempt, notice.max_attempts
        );
    }
    let _ = writeln!(
        text,
        ". Your context window is {}% full.",
        notice.context_percent
    );
}

fn tools(text: &mut String, notice: &NextNotice<'_>) {
    if notice.tools.is_empty() {
        return;
    }
    match notice.mode {
        XmlMode::FinalOnly => text
            .push_str("\n## Tools\n\nCall these with native tool calls (never through tags):\n\n"),
        XmlMode::Full => {
            let last = notice.first_slot + notice.slot_count.saturating_sub(1);
            let _ = write!(
                text,
                "\n## Tools\n\nCall a tool by writing a tag with a free slot ({:04} to {last:04}) and JSON arguments:\n\n<ai-agent-{}-{:04} tool=\"TOOL_NAME\">{{\"argument\": \"value\"}}</ai-agent-{}-{:04}>\n\nTools:\n\n",
                notice.first_slot, notice.nonce, notice.first_slot, notice.nonce, notice.first_slot
            );
        }
    }
    for tool in notice.tools {
        let _ = writeln!(
            text,
            "- `{}`: {}\n  arguments schema: {}",
            tool.name,
            tool.description.trim(),
            tool.parameters
        );
    }
    if notice.mode == XmlMode::Full {
        let _ = writeln!(
            text,
            "\nReport progress with <ai-agent-{}-PROGRESS>what you are doing</ai-agent-{}-PROGRESS>.",
            notice.nonce, notice.nonce
        );
    }
}

fn final_slot(text: &mut String, notice: &NextNotice<'_>) {
    let _ = write!(
        text,
        "\n## Final report\n\nWhen you have the answer, write it (format `{format}`) inside exactly this tag; nothing outside it is shown:\n\n<ai-agent-{nonce}-FINAL format=\"{format}\">\nyour answer\n</ai-agent-{nonce}-FINAL>\n",
        format = notice.format,
        nonce = notice.nonce
    );
    if notice.format == "json" {
        let schema = notice
            .schema
            .map_or_else(|| "{\"type\":\"object\"}".to_string(), Value::to_string);
        let _ = writeln!(
            text,
            "\nThe content must be one JSON object valid against this schema:\n{schema}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notice<'a>(
        tools: &'a [ToolDefinition],
        feedback: &'a [String],
        mode: XmlMode,
        is_final: bool,
    ) -> NextNotice<'a> {
        NextNotice {
            turn: 2,
            max_turns: 5,
            attempt: 2,
            max_attempts: 3,
            context_percent: 37,
            nonce: "0a1b2c3d",
            mode,
            tools,
            first_slot: 4,
            slot_count: 3,
            is_final,
            final_slot: true,
            format: "json",
            schema: None,
            feedback,
        }
    }

    #[test]
    fn lists_header_feedback_tools_slots_and_the_final_slot() {
        let tools = [ToolDefinition {
            name: "t__x".into(),
            description: "does x".into(),
            parameters: json!({"type": "object"}),
        }];
        let feedback = ["the tag was empty".to_string()];
        let text = render(&notice(&tools, &feedback, XmlMode::Full, false));
        assert!(text.starts_with("# System Notice\n\nThis is turn 2 of 5, attempt 2 of 3. Your context window is 37% full."), "{text}");
        assert!(text.contains("- the tag was empty"));
        assert!(text.contains("free slot (0004 to 0006)"));
        assert!(text.contains("<ai-agent-0a1b2c3d-0004 tool=\"TOOL_NAME\">"));
        assert!(text.contains("- `t__x`: does x"));
        assert!(text.contains("<ai-agent-0a1b2c3d-FINAL format=\"json\">"));
        assert!(text.contains("valid against this schema:\n{\"type\":\"object\"}"));
    }

    #[test]
    fn a_final_turn_advertises_only_the_final_slot() {
        let tools = [ToolDefinition {
            name: "t__x".into(),
            description: String::new(),
            parameters: json!({}),
        }];
        let text = render(&notice(&tools, &[], XmlMode::Full, true));
        assert!(!text.contains("t__x") && !text.contains("-0004"));
        assert!(text.contains("final turn") && text.contains("-FINAL"));
    }

    #[test]
    fn xml_final_mode_points_tools_to_native_calls() {
        let tools = [ToolDefinition {
            name: "t__x".into(),
            description: String::new(),
            parameters: json!({}),
        }];
        let text = render(&notice(&tools, &[], XmlMode::FinalOnly, false));
        assert!(text.contains("native tool calls"));
        assert!(!text.contains("PROGRESS") && !text.contains("-0004"));
    }
}

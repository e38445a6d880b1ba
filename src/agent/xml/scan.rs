//! Finds the agent's XML tags in a response by substring search (no XML parser, contract §11):
//! `<ai-agent-NONCE-FINAL format="…">…</ai-agent-NONCE-FINAL>`, tool slots
//! `<ai-agent-NONCE-0001 tool="…">…</ai-agent-NONCE-0001>` and `<ai-agent-NONCE-PROGRESS>`.
//!
//! Nothing is dropped silently (seeds/003 RULE 1/2/4): every tag that cannot be used becomes a
//! [`Problem`] whose text is shown to the model on the next attempt.

/// The prefix every tag starts with.
pub const TAG_PREFIX: &str = "ai-agent-";

/// A usable final-report tag. The last valid one in a response wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalTag {
    /// The `format` attribute, if any.
    pub format: Option<String>,
    pub payload: String,
    /// False when the response ended before `</ai-agent-NONCE-FINAL>`.
    pub closed: bool,
}

/// A tool invocation through a numbered slot (`xml` mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolTag {
    pub slot: u32,
    pub tool: String,
    pub payload: String,
}

/// A tag that could not be used, with what the model must be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub final_tag: Option<FinalTag>,
    pub tool_tags: Vec<ToolTag>,
    pub progress: Vec<String>,
    pub problems: Vec<Problem>,
}

/// What the scanner accepts this turn.
#[derive(Debug, Clone)]
pub struct ScanRules<'a> {
    pub nonce: &'a str,
    /// Tool slots are read (`xml` mode); otherwise a slot tag is a problem (`xml-final`).
    pub tool_slots: bool,
    /// The slot numbers advertised this turn (inclusive range).
    pub slots: std::ops::RangeInclusive<u32>,
}

/// Removes a leading `<think>…</think>` block (some models think in the text channel).
pub fn strip_leading_think(text: &str) -> &str {
    let trimmed = text.trim_start();
    let Some(rest) = trimmed.strip_prefix("<think>") else {
        return text;
    };
    match rest.find("</think>") {
        Some(end) => &rest[end + "</think>".len()..],
        None => "",
    }
}

pub fn scan(text: &str, rules: &ScanRules<'_>) -> Scan {
    let text = strip_leading_think(text);
    let mut result = Scan::default();
    let mut cursor = 0;
    let opening = format!("<{TAG_PREFIX}");
    while let Some(found) = text[cursor..].find(&opening) {
        let start = cursor + found;
        cursor = match read_tag(text, start, rules, &mut result) {
            Some(next) => next,
            None => break,
        };
    }
    result
}

/// Reads the tag opening at `start`; returns where scanning continues (None: end of text).
fn read_tag(text: &str, start: usize, rules: &ScanRules<'_>, result: &mut Scan) -> Option<usize> {
    let after_lt = start + 1;
    let Some(close_of_open) = text[after_lt..].find('>').map(|i| after_lt + i) else {
        let fragment: String = text[start..].chars().take(60).collect();
        result.problems.push(Problem(format!(
            "the tag `{fragment}` is never closed with `>`: the response ended inside it"
        )));
        return None;
    };
    let header = &text[after_lt..close_of_open];
    let name_end = header.find(char::is_whitespace).unwrap_or(header.len());
    let name = &header[..name_end];
    let attributes = &header[name_end..];
    let Some((nonce, slot)) = name
        .strip_prefix(TAG_PREFIX)
        .and_then(|rest| rest.split_once('-'))
    else {
        result.problems.push(Problem(format!(
            "`<{name}>` is not a valid tag name; tags are `<{TAG_PREFIX}{}-SLOT>`",
            rules.nonce
        )));
        return Some(close_of_open + 1);
    };
    let closing = format!("</{name}>");
    let body_start = close_of_open + 1;
    let (payload, closed, next) = match text[body_start..].find(&closing) {
        Some(i) => (
            &text[body_start..body_start + i],
            true,
            body_start + i + closing.len(),
        ),
        None => (&text[body_start..], false, text.len()),
    };
    if nonce != rules.nonce {
        result.problems.push(Problem(format!(
            "`<{name}>` uses the nonce `{nonce}`; this session's nonce is `{}`",
            rules.nonce
        )));
        return Some(next);
    }
    match slot {
        "FINAL" => read_final(name, attributes, payload, closed, result),
        "PROGRESS" => read_progress(name, payload, closed, rules, result),
        numbered => read_tool_slot(name, numbered, attributes, payload, closed, rules, result),
    }
    Some(next)
}

fn read_final(name: &str, attributes: &str, payload: &str, closed: bool, result: &mut Scan) {
    if payload.trim().is_empty() {
        result.problems.push(Problem(format!(
            "the final report `<{name}>` is empty; put your whole answer inside it"
        )));
        return;
    }
    let format = attribute(attributes, "format");
    result.final_tag = Some(FinalTag {
        format,
        payload: payload.trim().to_string(),
        closed,
    });
}

fn read_progress(
    name: &str,
    payload: &str,
    closed: bool,
    rules: &ScanRules<'_>,
    result: &mut Scan,
) {
    if !rules.tool_slots {
        result.problems.push(Problem(format!(
            "`<{name}>` is not available in this session; progress is not reported through tags"
        )));
    } else if !closed {
        result
            .problems
            .push(Problem(format!("`<{name}>` has no closing `</{name}>`")));
    } else if !payload.trim().is_empty() {
        result.progress.push(payload.trim().to_string());
    }
}

fn read_tool_slot(
    name: &str,
    slot: &str,
    attributes: &str,
    payload: &str,
    closed: bool,
    rules: &ScanRules<'_>,
    result: &mut Scan,
) {
    let Ok(number) = slot.parse::<u32>() else {
        result.problems.push(Problem(format!(
            "`<{name}>` has an unknown slot `{slot}`; use FINAL or an advertised numbered slot"
        )));
        return;
    };
    if !rules.tool_slots {
        result.problems.push(Problem(format!(
            "`<{name}>` calls a tool through a tag, but in this session tools are called with native tool calls; only the FINAL tag is read"
        )));
        return;
    }
    if !rules.slots.contains(&number) {
        result.problems.push(Problem(format!(
            "`<{name}>` uses slot {number:04}, which is not one of this turn's slots ({:04}–{:04})",
            rules.slots.start(),
            rules.slots.end()
        )));
        return;
    }
    if !closed {
        result.problems.push(Problem(format!(
            "`<{name}>` has no closing `</{name}>`: the call was not made"
        )));
        return;
    }
    let Some(tool) = attribute(attributes, "tool").filter(|t| !t.is_empty()) else {
        result.problems.push(Problem(format!(
            "`<{name}>` has no `tool=\"…\"` attribute naming the tool to call"
        )));
        return;
    };
    if result.tool_tags.iter().any(|t| t.slot == number) {
        result.problems.push(Problem(format!(
            "slot {number:04} is used twice; each call needs its own slot"
        )));
        return;
    }
    result.tool_tags.push(ToolTag {
        slot: number,
        tool,
        payload: payload.trim().to_string(),
    });
}

/// The value of `key="value"` (or single quotes) in a tag's attribute text.
fn attribute(attributes: &str, key: &str) -> Option<String> {
    let mut rest = attributes;
    while let Some(at) = rest.find(key) {
        let before_ok = at == 0 || rest[..at].ends_with(char::is_whitespace);
        let after = rest[at + key.len()..].trim_start();
        if before_ok && let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            let quote = value.chars().next()?;
            if quote == '"' || quote == '\'' {
                let inner = &value[1..];
                return inner.find(quote).map(|end| inner[..end].to_string());
            }
        }
        rest = &rest[at + key.len()..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "0a1b2c3d";

    fn final_rules() -> ScanRules<'static> {
        ScanRules {
            nonce: NONCE,
            tool_slots: false,
            slots: 1..=1,
        }
    }

    fn xml_rules() -> ScanRules<'static> {
        ScanRules {
            nonce: NONCE,
            tool_slots: true,
            slots: 3..=5,
        }
    }

    #[test]
    fn finds_a_final_tag_with_its_format() {
        let scan = scan(
            r#"Some words. <ai-agent-0a1b2c3d-FINAL format="markdown">
# Answer
</ai-agent-0a1b2c3d-FINAL> trailing"#,
            &final_rules(),
        );
        assert_eq!(
            scan.final_tag,
            Some(FinalTag {
                format: Some("markdown".into()),
                payload: "# Answer".into(),
                closed: true
            })
        );
        assert!(scan.problems.is_empty());
    }

    #[test]
    fn the_last_valid_final_tag_wins() {
        let text = "<ai-agent-0a1b2c3d-FINAL format=\"text\">one</ai-agent-0a1b2c3d-FINAL><ai-agent-0a1b2c3d-FINAL format=\"text\">two</ai-agent-0a1b2c3d-FINAL>";
        assert_eq!(
            scan(text, &final_rules()).final_tag.map(|f| f.payload),
            Some("two".into())
        );
    }

    #[test]
    fn an_unclosed_final_tag_is_reported_as_unclosed() {
        let scan = scan(
            "<ai-agent-0a1b2c3d-FINAL format='text'>cut short",
            &final_rules(),
        );
        assert_eq!(
            scan.final_tag,
            Some(FinalTag {
                format: Some("text".into()),
                payload: "cut short".into(),
                closed: false
            })
        );
    }

    #[test]
    fn a_leading_think_block_is_ignored() {
        let text = "<think><ai-agent-0a1b2c3d-FINAL>fake</ai-agent-0a1b2c3d-FINAL></think><ai-agent-0a1b2c3d-FINAL>real</ai-agent-0a1b2c3d-FINAL>";
        assert_eq!(
            scan(text, &final_rules()).final_tag.map(|f| f.payload),
            Some("real".into())
        );
        assert_eq!(strip_leading_think("  <think>never closed"), "");
        assert_eq!(strip_leading_think("no think"), "no think");
    }

    #[test]
    fn every_unusable_tag_is_a_problem_never_a_silent_drop() {
        let cases = [
            (
                "<ai-agent-deadbeef-FINAL>x</ai-agent-deadbeef-FINAL>",
                "nonce `deadbeef`",
            ),
            (
                "<ai-agent-0a1b2c3d-FINAL>   </ai-agent-0a1b2c3d-FINAL>",
                "is empty",
            ),
            (
                "<ai-agent-0a1b2c3d-0001 tool=\"t__x\">{}</ai-agent-0a1b2c3d-0001>",
                "native tool calls",
            ),
            (
                "<ai-agent-0a1b2c3d-WHAT>x</ai-agent-0a1b2c3d-WHAT>",
                "unknown slot `WHAT`",
            ),
            ("<ai-agent-nonce>x", "not a valid tag name"),
            (
                "text <ai-agent-0a1b2c3d-FINAL format=\"te",
                "never closed with `>`",
            ),
            (
                "<ai-agent-0a1b2c3d-PROGRESS>working</ai-agent-0a1b2c3d-PROGRESS>",
                "progress is not reported",
            ),
        ];
        for (text, expected) in cases {
            let scan = scan(text, &final_rules());
            assert_eq!(scan.problems.len(), 1, "{text}");
            assert!(
                scan.problems[0].0.contains(expected),
                "{text}: {:?}",
                scan.problems
            );
            assert!(
                scan.final_tag.is_none() && scan.tool_tags.is_empty(),
                "{text}"
            );
        }
    }

    #[test]
    fn tool_slots_are_read_in_xml_mode_within_the_advertised_range() {
        let text = r#"<ai-agent-0a1b2c3d-0003 tool="test__echo">{"x":1}</ai-agent-0a1b2c3d-0003>
<ai-agent-0a1b2c3d-0004 tool="test__fail">{}</ai-agent-0a1b2c3d-0004>
<ai-agent-0a1b2c3d-0009 tool="test__echo">{}</ai-agent-0a1b2c3d-0009>
<ai-agent-0a1b2c3d-0005>{}</ai-agent-0a1b2c3d-0005>
<ai-agent-0a1b2c3d-0003 tool="test__echo">{}</ai-agent-0a1b2c3d-0003>
<ai-agent-0a1b2c3d-PROGRESS>half done</ai-agent-0a1b2c3d-PROGRESS>
<ai-agent-0a1b2c3d-0004 tool="test__echo">{"unclosed": true}"#;
        let scan = scan(text, &xml_rules());
        let tools: Vec<(u32, &str)> = scan
            .tool_tags
            .iter()
            .map(|t| (t.slot, t.tool.as_str()))
            .collect();
        assert_eq!(tools, vec![(3, "test__echo"), (4, "test__fail")]);
        assert_eq!(scan.tool_tags[0].payload, r#"{"x":1}"#);
        assert_eq!(scan.progress, vec!["half done"]);
        let problems: Vec<&str> = scan.problems.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("slot 0009"));
        assert!(problems[1].contains("no `tool="));
        assert!(problems[2].contains("used twice"));
        assert!(problems[3].contains("no closing"));
    }

    #[test]
    fn attributes_are_read_with_either_quote() {
        assert_eq!(
            attribute(r#" tool="a__b" format='json'"#, "format"),
            Some("json".into())
        );
        assert_eq!(
            attribute(r#" xtool="no" tool = "yes""#, "tool"),
            Some("yes".into())
        );
        assert_eq!(attribute(" format=json", "format"), None);
    }
}

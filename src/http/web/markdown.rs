//! Rendering Markdown for `POST /v1/markdown` without letting hostile text cost the server:
//! text whose block quotes and lists nest past [`MAX_NESTING`] is refused before parsing (the
//! parser's cost grows with the square of that depth), and rendering runs on threads of its
//! own, at most [`RENDER_THREADS`] at once, never on the async workers. A caller waits at most
//! [`RENDER_TIME`] for a thread and its HTML; a render still running then keeps its thread (it
//! cannot be interrupted) but no request, stream or shutdown waits for it: the threads are
//! detached, so the process exits without them.

use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};

/// The deepest block quotes and lists may nest (`> > - x` is 3 deep).
pub const MAX_NESTING: usize = 32;
/// Renders running at once; more wait for a thread, up to [`RENDER_TIME`] in all.
pub const RENDER_THREADS: usize = 2;
/// The longest a request waits for its HTML (a thread included). The heaviest 256 KiB within
/// the nesting bound tried (`> - ` 16 times on every line) takes about 5 s in a debug build; an
/// optimised build is many times faster.
pub const RENDER_TIME: Duration = Duration::from_secs(5);

static RENDER_SLOTS: Semaphore = Semaphore::const_new(RENDER_THREADS);

/// Why no HTML came back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    #[error(
        "`text` nests block quotes and lists {depth} deep; at most {MAX_NESTING} levels are rendered"
    )]
    TooDeep { depth: usize },
    #[error("the Markdown was not rendered within {} s; try again", RENDER_TIME.as_secs())]
    TooSlow,
    #[error("no thread could be started to render the Markdown: {0}")]
    NoThread(String),
}

/// `text` as safe HTML, rendered off the async workers within [`RENDER_TIME`].
pub async fn render_bounded(text: String) -> Result<String, RenderError> {
    let depth = deepest_nesting(&text);
    if depth > MAX_NESTING {
        return Err(RenderError::TooDeep { depth });
    }
    run_bounded(move || render_markdown(&text), RENDER_TIME).await
}

/// Runs `render` on a thread of its own once one of the [`RENDER_THREADS`] slots is free,
/// waiting at most `within` in all. The slot is held until `render` returns, even when the
/// caller stopped waiting, so slow renders never pile up threads.
async fn run_bounded(
    render: impl FnOnce() -> String + Send + 'static,
    within: Duration,
) -> Result<String, RenderError> {
    let rendered = async {
        let slot = RENDER_SLOTS
            .acquire()
            .await
            .map_err(|error| RenderError::NoThread(error.to_string()))?;
        let (sender, html) = oneshot::channel();
        std::thread::Builder::new()
            .name("markdown".into())
            .spawn(move || {
                let _slot = slot;
                let _ = sender.send(render());
            })
            .map_err(|error| RenderError::NoThread(error.to_string()))?;
        html.await
            .map_err(|_| RenderError::NoThread("the render thread panicked".into()))
    };
    tokio::time::timeout(within, rendered)
        .await
        .unwrap_or(Err(RenderError::TooSlow))
}

/// Markdown to HTML that is safe to insert into the page.
pub fn render_markdown(text: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, html};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    // HTML a model writes is shown as the text it is, never as markup.
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut unsafe_html = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut unsafe_html, events);
    ammonia::Builder::default()
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&unsafe_html)
        .to_string()
}

/// How deep block quotes and lists nest in `text`, counted generously in one pass: on each
/// line, the list items it continues by indentation plus every quote (`>`) and list marker
/// (`-`, `+`, `*`, `1.`, `1)`) that starts it. Never less than the parser's depth.
pub fn deepest_nesting(text: &str) -> usize {
    let mut deepest = 0;
    // The content column of each list item still open by indentation.
    let mut open_items: Vec<usize> = Vec::new();
    for line in text.lines() {
        let (indent, mut rest) = split_indent(line);
        if rest.is_empty() {
            continue;
        }
        while open_items.last().is_some_and(|&column| indent < column) {
            open_items.pop();
        }
        let mut depth = open_items.len();
        let mut column = indent;
        while let Some((marker, is_item)) = container_marker(rest) {
            depth += 1;
            let (spaces, after) = split_indent(&rest[marker..]);
            column += marker + spaces;
            if is_item {
                open_items.push(column);
            }
            rest = after;
        }
        deepest = deepest.max(depth);
    }
    deepest
}

/// The width of `line`'s leading spaces and tabs (a tab counts 4) and the rest of it.
fn split_indent(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    let width = line[..line.len() - rest.len()]
        .chars()
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    (width, rest)
}

/// The length of the block quote or list marker `text` starts with, and whether it is a list
/// item.
fn container_marker(text: &str) -> Option<(usize, bool)> {
    let bytes = text.as_bytes();
    let ends_marker = |at: usize| bytes.get(at).is_none_or(|b| matches!(b, b' ' | b'\t'));
    match bytes.first()? {
        b'>' => Some((1, false)),
        b'-' | b'+' | b'*' if ends_marker(1) => Some((1, true)),
        b'0'..=b'9' => {
            let digits = bytes
                .iter()
                .take(10)
                .take_while(|b| b.is_ascii_digit())
                .count();
            (digits <= 9
                && matches!(bytes.get(digits), Some(b'.' | b')'))
                && ends_marker(digits + 1))
            .then_some((digits + 1, true))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_counts_quotes_and_list_markers_and_list_indentation() {
        assert_eq!(deepest_nesting("plain text\n\nmore"), 0);
        assert_eq!(deepest_nesting("> quoted"), 1);
        assert_eq!(deepest_nesting(">>> x"), 3);
        assert_eq!(deepest_nesting("> > - 1. x"), 4);
        assert_eq!(deepest_nesting("- a\n- b\n  - c\n    1) d\n- e"), 3);
        assert_eq!(deepest_nesting("- a\n\n  text of a\n- b"), 1);
        assert_eq!(deepest_nesting("-not a list\n1.5 no\n**bold**"), 0);
        assert_eq!(deepest_nesting(&">".repeat(80_000)), 80_000);
    }

    #[test]
    fn thirty_two_levels_render_and_thirty_three_are_refused() {
        let at_limit = format!("{}deep\n", "> ".repeat(MAX_NESTING));
        assert_eq!(deepest_nesting(&at_limit), MAX_NESTING);
        let html = render_markdown(&at_limit);
        assert_eq!(html.matches("<blockquote>").count(), MAX_NESTING, "{html}");
        let past = format!("{}- deep\n", "> ".repeat(MAX_NESTING));
        assert_eq!(deepest_nesting(&past), MAX_NESTING + 1);
    }

    #[tokio::test]
    async fn a_slow_render_is_given_up_and_keeps_its_slot_until_it_ends() {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let slow = run_bounded(
            move || {
                let _ = released.recv();
                String::new()
            },
            Duration::from_millis(100),
        )
        .await;
        assert_eq!(slow, Err(RenderError::TooSlow));
        assert_eq!(
            RENDER_SLOTS.available_permits(),
            RENDER_THREADS - 1,
            "the slow render still holds its slot"
        );
        let quick = run_bounded(|| "ok".into(), Duration::from_secs(5)).await;
        assert_eq!(quick.as_deref(), Ok("ok"), "the other slot renders");
        release.send(()).expect("the slow render waits");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while RENDER_SLOTS.available_permits() < RENDER_THREADS {
            assert!(std::time::Instant::now() < deadline, "the slot comes back");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

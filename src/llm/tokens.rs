//! Token estimation for the context guard: a real BPE (tiktoken's `o200k_base` / `cl100k_base`,
//! shipped inside the `tiktoken-rs` crate) for OpenAI-family models, and a documented
//! approximation elsewhere. Estimates include per-message and per-tool overhead.
//!
//! The approximation counts ASCII characters at 4 per token and every other character as one
//! token (CJK and most scripts tokenize at about a character per token), rounding up. It is
//! deliberately on the high side: the guard must not let a request overflow.

use super::{Attachment, AttachmentKind, ChatMessage, ToolDefinition};

/// Tokens of framing around every message (role, separators), per OpenAI's published counting.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Tokens that prime the assistant's reply in every request.
pub const REPLY_PRIMING_TOKENS: u64 = 3;
/// Tokens one image is counted at (see [`Tokenizer::attachment`]).
pub const IMAGE_TOKENS: u64 = 1600;
/// Tokens one PDF page is counted at.
pub const PDF_PAGE_TOKENS: u64 = 2000;
/// Tokens of framing around every tool definition.
pub const TOOL_OVERHEAD_TOKENS: u64 = 8;

/// How to count tokens for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
    /// Everything else: see the module documentation.
    Approximate,
}

impl Tokenizer {
    /// The tokenizer named in config (`tiktoken:o200k_base`, `tiktoken:cl100k_base`,
    /// `approximate`), else one guessed from the model id.
    pub fn resolve(configured: Option<&str>, model: &str) -> Self {
        match configured.map(str::trim) {
            Some("tiktoken:o200k_base" | "o200k_base") => Self::O200kBase,
            Some("tiktoken:cl100k_base" | "cl100k_base") => Self::Cl100kBase,
            Some(_) => Self::Approximate,
            None => Self::for_model(model),
        }
    }

    fn for_model(model: &str) -> Self {
        let model = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let o200k = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "o1",
            "o3",
            "o4",
            "chatgpt-4o",
        ];
        if o200k.iter().any(|prefix| model.starts_with(prefix)) {
            Self::O200kBase
        } else if model.starts_with("gpt-4") || model.starts_with("gpt-3.5") {
            Self::Cl100kBase
        } else {
            Self::Approximate
        }
    }

    pub fn count(&self, text: &str) -> u64 {
        match self {
            Self::O200kBase => tiktoken_rs::o200k_base_singleton()
                .encode_ordinary(text)
                .len() as u64,
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton()
                .encode_ordinary(text)
                .len() as u64,
            Self::Approximate => approximate(text),
        }
    }

    /// One message as it is sent: overhead, content, attachments and tool calls (reasoning is
    /// not resent).
    pub fn message(&self, message: &ChatMessage) -> u64 {
        let content = message.content.as_deref().map_or(0, |c| self.count(c))
            + message
                .attachments
                .iter()
                .map(|a| self.attachment(a))
                .sum::<u64>();
        let calls: u64 = message
            .tool_calls
            .iter()
            .map(|call| {
                self.count(&call.name) + self.count(&call.arguments) + MESSAGE_OVERHEAD_TOKENS
            })
            .sum();
        MESSAGE_OVERHEAD_TOKENS + content + calls
    }

    /// An attachment as the vendors bill it, on the high side (SPEC §11): an image at the
    /// largest vendor estimate ([`IMAGE_TOKENS`]: Anthropic's for a 1.15-megapixel image;
    /// OpenAI's high detail is at most 1,105, Gemini's 258), a PDF at [`PDF_PAGE_TOKENS`] a page
    /// (its text and the page's image), a text file as its text.
    pub fn attachment(&self, attachment: &Attachment) -> u64 {
        match attachment.kind() {
            AttachmentKind::Image => IMAGE_TOKENS,
            AttachmentKind::Pdf => {
                let pages = attachment.content.as_deref().map_or(1, pdf_pages);
                pages.max(1) * PDF_PAGE_TOKENS
            }
            AttachmentKind::Text => self.count(&attachment.text()),
        }
    }

    /// Messages as one request prompt, reply priming included.
    pub fn messages(&self, messages: &[ChatMessage]) -> u64 {
        messages.iter().map(|m| self.message(m)).sum::<u64>() + REPLY_PRIMING_TOKENS
    }

    /// The tool definitions of a request (`schemaCtxTokens`).
    pub fn tools(&self, tools: &[ToolDefinition]) -> u64 {
        tools
            .iter()
            .map(|tool| {
                TOOL_OVERHEAD_TOKENS
                    + self.count(&tool.name)
                    + self.count(&tool.description)
                    + self.count(&tool.parameters.to_string())
            })
            .sum()
    }
}

/// The pages of a PDF: its `/Type /Page` objects (not `/Pages`, their tree).
fn pdf_pages(content: &[u8]) -> u64 {
    let marker = b"/Type";
    let mut pages = 0;
    let mut rest = content;
    while let Some(at) = rest.windows(marker.len()).position(|w| w == marker) {
        rest = &rest[at + marker.len()..];
        let after: Vec<u8> = rest
            .iter()
            .skip_while(|b| b.is_ascii_whitespace())
            .take(6)
            .copied()
            .collect();
        if after.starts_with(b"/Page") && after.get(5) != Some(&b's') {
            pages += 1;
        }
    }
    pages
}

fn approximate(text: &str) -> u64 {
    let (ascii, other) = text.chars().fold((0u64, 0u64), |(a, o), c| {
        if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
    });
    ascii.div_ceil(4) + other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_tokenizers_count_known_strings() {
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
    }

    #[test]
    fn models_pick_their_tokenizer_and_config_wins() {
        assert_eq!(
            Tokenizer::resolve(None, "gpt-4o-mini"),
            Tokenizer::O200kBase
        );
        assert_eq!(
            Tokenizer::resolve(None, "openai/gpt-4.1"),
            Tokenizer::O200kBase
        );
        assert_eq!(
            Tokenizer::resolve(None, "gpt-4-turbo"),
            Tokenizer::Cl100kBase
        );
        assert_eq!(Tokenizer::resolve(None, "llama3.2"), Tokenizer::Approximate);
        assert_eq!(
            Tokenizer::resolve(Some("tiktoken:cl100k_base"), "llama3.2"),
            Tokenizer::Cl100kBase
        );
        assert_eq!(
            Tokenizer::resolve(Some("approximate"), "gpt-4o"),
            Tokenizer::Approximate
        );
    }

    #[test]
    fn the_approximation_rounds_up_and_counts_other_scripts_per_character() {
        assert_eq!(approximate("abcd"), 1);
        assert_eq!(approximate("abcde"), 2);
        assert_eq!(approximate("日本語"), 3);
        assert_eq!(approximate(""), 0);
    }

    #[test]
    fn messages_and_tools_include_their_overhead() {
        let t = Tokenizer::Approximate;
        let message = ChatMessage::user("abcd");
        assert_eq!(t.message(&message), MESSAGE_OVERHEAD_TOKENS + 1);
        assert_eq!(
            t.messages(&[message.clone(), message]),
            2 * (MESSAGE_OVERHEAD_TOKENS + 1) + REPLY_PRIMING_TOKENS
        );
        let tool = ToolDefinition {
            name: "abcd".into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        };
        assert_eq!(
            t.tools(&[tool]),
            TOOL_OVERHEAD_TOKENS + 2,
            "name and parameters, no description"
        );
    }

    #[test]
    fn images_and_pdf_pages_are_counted() {
        let attachment = |media_type: &str, content: &[u8]| Attachment {
            name: "f".into(),
            media_type: media_type.into(),
            bytes: content.len() as u64,
            sha256: String::new(),
            file_id: String::new(),
            content: Some(std::sync::Arc::from(content)),
            text_form: None,
        };
        let tokenizer = Tokenizer::Approximate;
        let mut message = ChatMessage::user("abcd");
        let plain = tokenizer.message(&message);
        message.attachments = vec![attachment("image/png", b"PNG")];
        assert_eq!(tokenizer.message(&message), plain + IMAGE_TOKENS);
        let pdf = b"<</Type /Pages /Kids []>> <</Type /Page>> <</Type/Page>>";
        message.attachments = vec![attachment("application/pdf", pdf)];
        assert_eq!(tokenizer.message(&message), plain + 2 * PDF_PAGE_TOKENS);
    }
}

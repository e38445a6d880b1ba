//! Token estimation for the context guard: a real BPE (tiktoken's `o200k_base` / `cl100k_base`,
//! shipped inside the `tiktoken-rs` crate) for OpenAI-family models, and a documented
//! approximation elsewhere. Estimates include per-message and per-tool overhead.
//!
//! The approximation counts ASCII characters at 4 per token and every other character as one
//! token (CJK and most scripts tokenize at about a character per token), rounding up. It is
//! deliberately on the high side: the guard must not let a request overflow.
//!
//! An image counts as its vendor bills it, from its width and height ([`ImageBilling`]); an
//! agent whose targets are of several vendors counts each image at the highest of their bills.

use super::settings::ProviderKind;
use super::{Attachment, AttachmentKind, ChatMessage, ToolDefinition};

/// Tokens of framing around every message (role, separators), per OpenAI's published counting.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Tokens that prime the assistant's reply in every request.
pub const REPLY_PRIMING_TOKENS: u64 = 3;
/// Tokens an image whose size cannot be read is counted at (see [`ImageBilling`]).
pub const IMAGE_TOKENS: u64 = 1600;
/// Tokens one PDF page is counted at.
pub const PDF_PAGE_TOKENS: u64 = 2000;
/// Tokens of framing around every tool definition.
pub const TOOL_OVERHEAD_TOKENS: u64 = 8;

/// How to count a model's prompt: its text, and its images as its vendor bills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokenizer {
    pub text: TextTokenizer,
    pub images: ImageBilling,
}

/// How to count text for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextTokenizer {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
    /// Everything else: see the module documentation.
    Approximate,
}

impl Tokenizer {
    /// The approximation for text, images at the highest vendor bill.
    pub const APPROXIMATE: Self = Self {
        text: TextTokenizer::Approximate,
        images: ImageBilling::AnyVendor,
    };

    /// The text tokenizer of [`TextTokenizer::resolve`], images at the highest vendor bill
    /// until [`Tokenizer::billing_images`] says whose.
    pub fn resolve(configured: Option<&str>, model: &str) -> Self {
        Self {
            text: TextTokenizer::resolve(configured, model),
            images: ImageBilling::AnyVendor,
        }
    }

    /// Counts images as `images` bills them.
    pub fn billing_images(self, images: ImageBilling) -> Self {
        Self { images, ..self }
    }

    pub fn count(&self, text: &str) -> u64 {
        self.text.count(text)
    }
}

impl TextTokenizer {
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
}

impl Tokenizer {
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

    /// An attachment as the vendors bill it, on the high side (SPEC §11): an image by its
    /// size as [`ImageBilling`] says ([`IMAGE_TOKENS`] when its size cannot be read), a PDF at
    /// [`PDF_PAGE_TOKENS`] a page (its text and the page's image), a text file as its text.
    pub fn attachment(&self, attachment: &Attachment) -> u64 {
        match attachment.kind() {
            AttachmentKind::Image => attachment
                .content
                .as_deref()
                .and_then(|content| imagesize::blob_size(content).ok())
                .map_or(IMAGE_TOKENS, |size| {
                    self.images.tokens(size.width as u64, size.height as u64)
                }),
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

/// How a vendor bills an image of a given size, as its documentation says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageBilling {
    /// High detail: within 2048×2048, the short side at most 768, then 170 per 512-pixel tile
    /// and 85 more.
    OpenAi,
    /// Within 1568 pixels on the long side and 1.15 megapixels, then width × height / 750.
    Anthropic,
    /// 258 for an image within 384×384, else 258 per 768-pixel tile.
    Gemini,
    /// Any vendor's (a router, a local server, several vendors): the highest of the bills.
    AnyVendor,
}

impl ImageBilling {
    /// How the models of a provider of this kind are billed.
    pub fn of(kind: ProviderKind) -> Self {
        match kind {
            ProviderKind::Openai => Self::OpenAi,
            ProviderKind::Anthropic => Self::Anthropic,
            ProviderKind::Google => Self::Gemini,
            ProviderKind::OpenaiCompatible
            | ProviderKind::Ollama
            | ProviderKind::Openrouter
            | ProviderKind::Scripted => Self::AnyVendor,
        }
    }

    /// The billing every one of `billings` shares, else [`ImageBilling::AnyVendor`].
    pub fn shared(billings: impl IntoIterator<Item = Self>) -> Self {
        let mut billings = billings.into_iter();
        let Some(first) = billings.next() else {
            return Self::AnyVendor;
        };
        if billings.all(|billing| billing == first) {
            first
        } else {
            Self::AnyVendor
        }
    }

    /// The tokens of an image `width` × `height` pixels.
    pub fn tokens(self, width: u64, height: u64) -> u64 {
        let (width, height) = (width.max(1), height.max(1));
        match self {
            Self::OpenAi => openai_image_tokens(width, height),
            Self::Anthropic => anthropic_image_tokens(width, height),
            Self::Gemini => gemini_image_tokens(width, height),
            Self::AnyVendor => openai_image_tokens(width, height)
                .max(anthropic_image_tokens(width, height))
                .max(gemini_image_tokens(width, height)),
        }
    }
}

/// `(width, height)` scaled down (never up) by `factor`, at least a pixel each.
fn scaled(width: u64, height: u64, factor: f64) -> (u64, u64) {
    if factor >= 1.0 {
        return (width, height);
    }
    let scale = |side: u64| ((side as f64 * factor).floor() as u64).max(1);
    (scale(width), scale(height))
}

fn openai_image_tokens(width: u64, height: u64) -> u64 {
    let (width, height) = scaled(width, height, 2048.0 / width.max(height) as f64);
    let (width, height) = scaled(width, height, 768.0 / width.min(height) as f64);
    85 + 170 * width.div_ceil(512) * height.div_ceil(512)
}

fn anthropic_image_tokens(width: u64, height: u64) -> u64 {
    let (width, height) = scaled(width, height, 1568.0 / width.max(height) as f64);
    let to_megapixels = (1_150_000.0 / (width * height) as f64).sqrt();
    let (width, height) = scaled(width, height, to_megapixels);
    (width * height).div_ceil(750)
}

fn gemini_image_tokens(width: u64, height: u64) -> u64 {
    if width <= 384 && height <= 384 {
        return 258;
    }
    258 * width.div_ceil(768) * height.div_ceil(768)
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
        assert_eq!(TextTokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(TextTokenizer::Cl100kBase.count("hello world"), 2);
        assert_eq!(TextTokenizer::O200kBase.count(""), 0);
    }

    #[test]
    fn models_pick_their_tokenizer_and_config_wins() {
        let text = |configured, model| Tokenizer::resolve(configured, model).text;
        assert_eq!(text(None, "gpt-4o-mini"), TextTokenizer::O200kBase);
        assert_eq!(text(None, "openai/gpt-4.1"), TextTokenizer::O200kBase);
        assert_eq!(text(None, "gpt-4-turbo"), TextTokenizer::Cl100kBase);
        assert_eq!(text(None, "llama3.2"), TextTokenizer::Approximate);
        assert_eq!(
            text(Some("tiktoken:cl100k_base"), "llama3.2"),
            TextTokenizer::Cl100kBase
        );
        assert_eq!(
            text(Some("approximate"), "gpt-4o"),
            TextTokenizer::Approximate
        );
    }

    /// The vendors' own worked examples.
    #[test]
    fn images_are_billed_as_each_vendor_documents() {
        // OpenAI: 1024×1024 high detail is 765 tokens; 2048×4096 is 1105.
        assert_eq!(ImageBilling::OpenAi.tokens(1024, 1024), 765);
        assert_eq!(ImageBilling::OpenAi.tokens(2048, 4096), 1105);
        // Anthropic: 1000×1000 is about 1334 tokens; anything larger is scaled to at most
        // 1.15 megapixels, about 1600 tokens.
        assert_eq!(ImageBilling::Anthropic.tokens(1000, 1000), 1334);
        let largest = ImageBilling::Anthropic.tokens(1092, 1092);
        assert!((1500..=1600).contains(&largest), "{largest}");
        assert!(ImageBilling::Anthropic.tokens(8000, 8000) <= 1600);
        // Gemini: 258 within 384×384, else 258 per 768-pixel tile.
        assert_eq!(ImageBilling::Gemini.tokens(384, 384), 258);
        assert_eq!(ImageBilling::Gemini.tokens(1024, 1024), 4 * 258);
        // A small image is cheap; any vendor means the highest bill.
        assert_eq!(ImageBilling::Anthropic.tokens(1, 1), 1);
        assert_eq!(
            ImageBilling::AnyVendor.tokens(1024, 1024),
            ImageBilling::Anthropic.tokens(1024, 1024)
        );
    }

    #[test]
    fn targets_of_one_vendor_bill_as_it_and_mixed_ones_as_any() {
        use ImageBilling::*;
        assert_eq!(ImageBilling::shared([OpenAi, OpenAi]), OpenAi);
        assert_eq!(ImageBilling::shared([OpenAi, Anthropic]), AnyVendor);
        assert_eq!(ImageBilling::shared([]), AnyVendor);
        assert_eq!(ImageBilling::of(ProviderKind::Google), Gemini);
        assert_eq!(ImageBilling::of(ProviderKind::Ollama), AnyVendor);
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
        let t = Tokenizer::APPROXIMATE;
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
            url: None,
            text_form: None,
        };
        let tokenizer = Tokenizer::APPROXIMATE.billing_images(ImageBilling::OpenAi);
        let mut message = ChatMessage::user("abcd");
        let plain = tokenizer.message(&message);
        message.attachments = vec![attachment("image/png", b"PNG")];
        assert_eq!(
            tokenizer.message(&message),
            plain + IMAGE_TOKENS,
            "an image whose size cannot be read counts high"
        );
        message.attachments = vec![attachment("image/png", &png_header(1024, 1024))];
        assert_eq!(tokenizer.message(&message), plain + 765);
        let pdf = b"<</Type /Pages /Kids []>> <</Type /Page>> <</Type/Page>>";
        message.attachments = vec![attachment("application/pdf", pdf)];
        assert_eq!(tokenizer.message(&message), plain + 2 * PDF_PAGE_TOKENS);
    }

    /// The start of a PNG of `width` × `height`: its signature and header chunk, all a size
    /// reader needs.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(width.to_be_bytes());
        png.extend(height.to_be_bytes());
        png.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        png
    }
}

//! A file's media type from its content (magic numbers through `infer`), never from what the
//! client declared: a declared type only chooses among text types when the bytes are UTF-8 text.

/// The bytes of a file's start that sniffing reads.
pub const HEAD_BYTES: usize = 8192;

/// The media type of content that starts with `head`. `is_utf8` says whether the whole content
/// is valid UTF-8; `declared` and `name` only pick among the text types.
pub fn media_type(head: &[u8], is_utf8: bool, declared: Option<&str>, name: &str) -> String {
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_string();
    }
    if !is_utf8 {
        return "application/octet-stream".to_string();
    }
    let declared = declared.map(|d| d.split(';').next().unwrap_or(d).trim().to_ascii_lowercase());
    if let Some(declared) = declared.filter(|d| is_text_type(d)) {
        return declared;
    }
    text_type_of_name(name).to_string()
}

/// The image or PDF type a remote URL's path names by its extension (`…/cat.png?x=1`), for a
/// URL passed to a vendor unread; `None` for anything else (such a URL is fetched and sniffed).
pub fn media_type_of_url(url: &str) -> Option<&'static str> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let (_, extension) = parsed.path().rsplit_once('/')?.1.rsplit_once('.')?;
    match extension.to_ascii_lowercase().as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        "pdf" => Some("application/pdf"),
        _ => None,
    }
}

/// Text types whose content is UTF-8 and a client may name.
fn is_text_type(media_type: &str) -> bool {
    media_type.starts_with("text/") || media_type == "application/json"
}

fn text_type_of_name(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        _ => "text/plain",
    }
}

/// Checks UTF-8 across chunks: a character cut at a chunk's end is completed by the next.
#[derive(Debug, Default)]
pub struct Utf8Check {
    /// The start of a character the last chunk ended inside (at most 3 bytes).
    pending: Vec<u8>,
    invalid: bool,
}

impl Utf8Check {
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.invalid || chunk.is_empty() {
            return;
        }
        let mut joined;
        let bytes = if self.pending.is_empty() {
            chunk
        } else {
            joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(chunk);
            &joined[..]
        };
        match std::str::from_utf8(bytes) {
            Ok(_) => {}
            Err(error) if error.error_len().is_none() => {
                self.pending = bytes[error.valid_up_to()..].to_vec();
            }
            Err(_) => self.invalid = true,
        }
    }

    /// Whether everything fed was UTF-8 (no character left unfinished).
    pub fn is_utf8(&self) -> bool {
        !self.invalid && self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn the_bytes_decide_not_the_declared_type() {
        assert_eq!(
            media_type(PNG, false, Some("image/jpeg"), "x.jpg"),
            "image/png"
        );
        assert_eq!(
            media_type(b"%PDF-1.7\n", true, Some("text/plain"), "a.txt"),
            "application/pdf"
        );
        assert_eq!(
            media_type(b"\x00\x01\x02", false, Some("image/png"), "a.png"),
            "application/octet-stream"
        );
    }

    #[test]
    fn text_types_come_from_the_declaration_or_the_name() {
        assert_eq!(
            media_type(b"# hi", true, Some("text/markdown"), "a"),
            "text/markdown"
        );
        assert_eq!(media_type(b"a,b", true, None, "t.csv"), "text/csv");
        assert_eq!(
            media_type(b"hello", true, Some("image/png"), "a.png"),
            "text/plain"
        );
    }

    #[test]
    fn urls_name_images_and_pdfs_by_their_extension() {
        assert_eq!(
            media_type_of_url("https://x.test/a/Cat.PNG?size=2#top"),
            Some("image/png")
        );
        assert_eq!(
            media_type_of_url("https://x.test/r.pdf"),
            Some("application/pdf")
        );
        assert_eq!(media_type_of_url("https://x.test/notes.txt"), None);
        assert_eq!(media_type_of_url("https://x.test/image"), None);
        assert_eq!(media_type_of_url("https://x.png"), None);
    }

    #[test]
    fn utf8_is_checked_across_chunk_boundaries() {
        let text = "é".as_bytes();
        let mut check = Utf8Check::default();
        check.feed(&text[..1]);
        check.feed(&text[1..]);
        assert!(check.is_utf8());
        let mut cut = Utf8Check::default();
        cut.feed(&text[..1]);
        assert!(!cut.is_utf8());
        let mut bad = Utf8Check::default();
        bad.feed(b"\xff");
        assert!(!bad.is_utf8());
    }
}

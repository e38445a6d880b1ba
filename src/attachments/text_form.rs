//! `attachments: text` (SPEC §11): the text a model that cannot read a PDF gets instead — a
//! note naming the file, then the text of its pages (extracted by `lopdf`), capped at
//! `limits.attachments.maxExtractedTextBytes` and saying so when cut. A PDF that cannot be
//! parsed is refused naming the file. Parsing is CPU work: it runs on the blocking pool.
//! This module only turns bytes into text; which model gets which form is `llm::attachments`'.

use std::sync::Arc;

use crate::vocabulary::{Attachment, AttachmentKind};

/// The most bytes a page's content may inflate to while its text is read (a small
/// compressed stream must not become gigabytes).
const MAX_PAGE_CONTENT_BYTES: usize = 16 * 1024 * 1024;

/// Why a PDF gave no text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct UnreadablePdf(String);

/// The text of a PDF's pages, in order, at most `max_bytes` of it; whether some was cut; and
/// how many pages it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    pub text: String,
    pub cut: bool,
    pub pages: usize,
}

/// Reads the text of `content`, a PDF. Pages whose fonts cannot be decoded give what they
/// can; a file that is no PDF, or whose structure is broken, is an error.
pub fn pdf_text(content: &[u8], max_bytes: usize) -> Result<PdfText, UnreadablePdf> {
    let document =
        lopdf::Document::load_mem(content).map_err(|error| UnreadablePdf(error.to_string()))?;
    let pages: Vec<u32> = document.get_pages().keys().copied().collect();
    let mut text = String::new();
    for page in &pages {
        let chunks = document.extract_text_chunks_with_limit(&[*page], MAX_PAGE_CONTENT_BYTES);
        for chunk in chunks.into_iter().flatten() {
            text.push_str(&chunk);
        }
        if text.trim_end().len() > max_bytes {
            break;
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.truncate(text.trim_end().len());
    let cut = text.len() > max_bytes;
    if cut {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Ok(PdfText {
        text,
        cut,
        pages: pages.len(),
    })
}

/// What the model reads in place of the PDF `attachment`: a note naming it, its text, and a
/// note when the text was cut.
pub fn text_form(attachment: &Attachment, pdf: &PdfText, max_bytes: usize) -> String {
    let mut form = format!(
        "[text extracted from the PDF {} ({} bytes, {} page{}): the model reads PDFs as text]\n{}",
        attachment.name,
        attachment.bytes,
        pdf.pages,
        if pdf.pages == 1 { "" } else { "s" },
        pdf.text.trim_end()
    );
    if pdf.cut {
        form.push_str(&format!(
            "\n[cut: the text of {} passes {max_bytes} bytes; the rest is left out]",
            attachment.name
        ));
    }
    form
}

/// Fills the text form of `attachment` when it is a PDF whose content is loaded and whose text
/// form is not known yet.
pub async fn fill_text_form(
    attachment: &mut Attachment,
    max_bytes: usize,
) -> Result<(), UnreadablePdf> {
    if attachment.kind() != AttachmentKind::Pdf || attachment.text_form.is_some() {
        return Ok(());
    }
    let Some(content) = attachment.content.clone() else {
        return Ok(());
    };
    let pdf = tokio::task::spawn_blocking(move || pdf_text(&content, max_bytes))
        .await
        .map_err(|error| UnreadablePdf(error.to_string()))??;
    attachment.text_form = Some(Arc::from(text_form(attachment, &pdf, max_bytes)));
    Ok(())
}

#[cfg(test)]
#[path = "../../tests/support/pdf.rs"]
mod test_pdf;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_of_every_page_is_read_up_to_the_limit() {
        let pdf = test_pdf::pdf_with_pages(&["first page (one)", "second page"]);
        let read = pdf_text(&pdf, 1000).expect("readable");
        assert_eq!(read.text, "first page (one)\nsecond page");
        assert_eq!((read.cut, read.pages), (false, 2));
        let at_limit = pdf_text(&pdf, read.text.len()).expect("readable");
        assert!(!at_limit.cut, "exactly at the limit nothing is cut");
        let past = pdf_text(&pdf, read.text.len() - 1).expect("readable");
        assert!(past.cut);
        assert_eq!(past.text, "first page (one)\nsecond pag");
    }

    #[test]
    fn a_cut_falls_on_a_character_boundary() {
        let pdf = test_pdf::pdf_with_pages(&["caf\u{e9}"]);
        let read = pdf_text(&pdf, 4).expect("readable");
        assert!(read.cut);
        assert_eq!(read.text, "caf");
    }

    #[test]
    fn what_is_no_pdf_is_unreadable() {
        assert!(pdf_text(b"%PDF-1.4 not really", 100).is_err());
        assert!(pdf_text(b"hello", 100).is_err());
    }
}

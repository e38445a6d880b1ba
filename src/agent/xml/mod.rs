//! The XML transports of contract §11: in `xml-final` the final report travels as an XML tag
//! while other tools stay native; in `xml` every call goes through tags. This module owns the
//! session nonce and slot numbering, tag scanning, XML-NEXT rendering and final-tag streaming.

pub mod next;
pub mod scan;
pub mod stream;

/// Which XML transport a session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XmlMode {
    /// `xml-final`: only the final report is a tag.
    FinalOnly,
    /// `xml`: every tool call and the final report are tags; tools are withheld from the provider.
    Full,
}

/// Per-session XML state: the nonce is fixed, slots keep counting across turns.
#[derive(Debug, Clone)]
pub struct XmlState {
    pub nonce: String,
    pub mode: XmlMode,
    /// The first slot number of the next turn.
    pub next_slot: u32,
}

impl XmlState {
    pub fn new(mode: XmlMode) -> Self {
        Self {
            nonce: new_nonce(),
            mode,
            next_slot: 1,
        }
    }
}

/// 8 lowercase hex digits.
pub fn new_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn nonces_are_eight_lowercase_hex_digits_and_differ() {
        let a = super::new_nonce();
        assert_eq!(a.len(), 8);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, super::new_nonce());
    }
}

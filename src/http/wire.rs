//! What every API family's wire module shares: `string_constant!`, which declares a field whose
//! value never varies (`"object": "chat.completion.chunk"`, `"type": "message"`) as a one-value
//! enum, so the generated OpenAPI document states the exact string instead of "any string".
//! Families keep their own bodies in `<family>/wire.rs`; nothing family-specific belongs here.

/// `string_constant!(ChunkObject::ChatCompletionChunk = "chat.completion.chunk")` declares
/// `enum ChunkObject { ChatCompletionChunk }` serialised as that string.
macro_rules! string_constant {
    ($(#[$doc:meta])* $name:ident :: $variant:ident = $value:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
        pub enum $name {
            #[serde(rename = $value)]
            $variant,
        }
    };
}

pub(crate) use string_constant;

string_constant!(
    /// `"list"`: OpenAI's envelope for a list of objects, used by every listing route.
    ListObject::List = "list"
);

string_constant!(
    /// `"assistant"`: the role of every answer, in the OpenAI and the Anthropic shape.
    AssistantRole::Assistant = "assistant"
);

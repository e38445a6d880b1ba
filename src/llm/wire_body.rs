//! A JSON request body that knows which of its parameters are optional, so an upstream's
//! rejection of one can be answered by dropping it (see [`super::upstream`]).

use serde_json::{Map, Value};

/// A request parameter the body builder may drop: where it sits in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalParam {
    /// Object keys leading to the parameter; the last one is its wire name.
    pub path: &'static [&'static str],
}

impl OptionalParam {
    pub const fn at(path: &'static [&'static str]) -> Self {
        Self { path }
    }

    pub fn name(&self) -> &'static str {
        self.path.last().copied().unwrap_or_default()
    }
}

/// A JSON request body and the optional parameters it carries.
#[derive(Debug, Clone, Default)]
pub struct WireBody {
    pub body: Map<String, Value>,
    pub(super) optional: Vec<OptionalParam>,
}

impl WireBody {
    pub fn new(body: Map<String, Value>) -> Self {
        Self {
            body,
            optional: Vec::new(),
        }
    }

    /// Sets an optional parameter (creating parent objects); `None` leaves it out.
    pub fn set_optional(&mut self, param: OptionalParam, value: Option<Value>) {
        let Some(value) = value else {
            return;
        };
        let Some((last, parents)) = param.path.split_last() else {
            return;
        };
        let mut object = &mut self.body;
        for key in parents {
            let entry = object
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            let Value::Object(inner) = entry else {
                return;
            };
            object = inner;
        }
        object.insert(last.to_string(), value);
        self.optional.push(param);
    }

    pub fn contains(&self, param: OptionalParam) -> bool {
        self.optional.contains(&param)
    }

    pub(super) fn remove(&mut self, param: OptionalParam) {
        self.optional.retain(|p| *p != param);
        let Some((last, parents)) = param.path.split_last() else {
            return;
        };
        let mut object = &mut self.body;
        for key in parents {
            match object.get_mut(*key) {
                Some(Value::Object(inner)) => object = inner,
                _ => return,
            }
        }
        object.remove(*last);
        // An emptied parent (e.g. `options: {}`) would only be noise.
        if let Some((parent_key, grand)) = parents.split_last() {
            let mut holder = &mut self.body;
            for key in grand {
                match holder.get_mut(*key) {
                    Some(Value::Object(inner)) => holder = inner,
                    _ => return,
                }
            }
            if holder
                .get(*parent_key)
                .is_some_and(|v| v.as_object().is_some_and(Map::is_empty))
            {
                holder.remove(*parent_key);
            }
        }
    }

    /// The optional parameter an upstream error message names, if any.
    pub(super) fn named_in(&self, message: &str) -> Option<OptionalParam> {
        let message = normalise(message);
        self.optional
            .iter()
            .copied()
            .find(|p| message.contains(&normalise(p.name())))
    }
}

/// `top_k`, `topK` and `top-k` all become `topk`, so vendors' spellings match each other.
fn normalise(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOP_K: OptionalParam = OptionalParam::at(&["generationConfig", "topK"]);
    const TEMPERATURE: OptionalParam = OptionalParam::at(&["temperature"]);

    #[test]
    fn optional_params_are_set_found_by_any_spelling_and_removed() {
        let mut body = WireBody::new(Map::new());
        body.set_optional(TOP_K, Some(json!(40)));
        body.set_optional(TEMPERATURE, Some(json!(0.2)));
        body.set_optional(OptionalParam::at(&["absent"]), None);
        assert_eq!(
            Value::Object(body.body.clone()),
            json!({"generationConfig": {"topK": 40}, "temperature": 0.2})
        );
        assert_eq!(
            body.named_in("Unsupported parameter: 'top_k' is not supported"),
            Some(TOP_K)
        );
        assert_eq!(body.named_in("something else entirely"), None);
        body.remove(TOP_K);
        assert_eq!(
            Value::Object(body.body.clone()),
            json!({"temperature": 0.2})
        );
        assert!(!body.contains(TOP_K));
    }
}

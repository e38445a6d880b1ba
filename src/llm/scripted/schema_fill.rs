//! A JSON value built from a JSON schema, as the scripted model writes tool arguments and JSON
//! answers: `const`, `enum`, `examples` and `default` first, then by type — objects with their
//! properties, arrays of `minItems` (at least one) items, strings chosen by `format` or by the
//! property's name, numbers inside their bounds and `multipleOf`. Local `$ref`s, `allOf`,
//! `anyOf` and `oneOf` are followed; `pattern` and `not` are not honoured.
//!
//! Pure: no I/O, no randomness; the same schema always gives the same value.

use serde_json::{Map, Number, Value, json};

/// How deep schemas are followed; a recursive schema stops here with an empty value.
const MAX_DEPTH: usize = 16;

/// The most items written in one array, whatever its `minItems` (past it the value is not
/// valid, but a schema cannot make the model write without end).
pub const MAX_ITEMS: u64 = 256;

/// The longest string written to reach a `minLength`, for the same reason.
pub const MAX_STRING_CHARS: u64 = 4096;

/// A string for properties named like these (the whole name or one of its words).
const NAMED_STRINGS: &[(&[&str], &str)] = &[
    (&["email", "mail"], "ada@example.com"),
    (
        &["url", "uri", "link", "website", "href"],
        "https://example.com",
    ),
    (&["timezone", "tz"], "UTC"),
    (&["city"], "Paris"),
    (&["country"], "France"),
    (&["language", "lang", "locale"], "en"),
    (&["currency"], "EUR"),
    (&["date", "day"], "2025-01-01"),
    (&["phone"], "+33 1 23 45 67 89"),
    (&["name", "title", "author", "user"], "Ada Lovelace"),
];

/// Properties named like these receive the context text (the user's request, or the answer).
const TEXT_NAMES: &[&str] = &[
    "prompt",
    "query",
    "q",
    "question",
    "message",
    "text",
    "task",
    "input",
    "content",
    "answer",
    "summary",
    "reply",
    "description",
    "search",
    "topic",
    "request",
    "body",
    "note",
    "notes",
    "comment",
];

/// Which properties of an object are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Properties {
    /// The `required` ones only (tool arguments: optional ones could change what a tool does).
    Required,
    /// Every listed property (answers: the whole shape is shown).
    All,
}

/// Builds values for the schemas of one document (the root `$ref`s resolve against).
pub struct Filler<'a> {
    root: &'a Value,
    properties: Properties,
    /// What text-like properties receive.
    text: &'a str,
}

impl<'a> Filler<'a> {
    pub fn new(root: &'a Value, properties: Properties, text: &'a str) -> Self {
        Self {
            root,
            properties,
            text,
        }
    }

    /// A value valid against the root schema.
    pub fn fill(&self) -> Value {
        self.value(self.root, None, 0, 0)
    }

    /// A value for `schema`; `name` is the property it fills, `variant` tells the items of one
    /// array apart (so `uniqueItems` holds).
    fn value(&self, schema: &Value, name: Option<&str>, variant: u64, depth: usize) -> Value {
        let Value::Object(schema) = schema else {
            // `true` accepts anything; `false` nothing, so nothing better exists than null.
            return match schema {
                Value::Bool(true) => json!("example"),
                _ => Value::Null,
            };
        };
        if depth > MAX_DEPTH {
            return empty_of(schema);
        }
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            let resolved = self.resolve(target).unwrap_or(&Value::Bool(true));
            return self.value(resolved, name, variant, depth + 1);
        }
        if let Some(value) = given_value(schema, variant) {
            return value;
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            let merged = merge_all_of(schema, parts, |target| self.resolve(target));
            return self.value(&Value::Object(merged), name, variant, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(first) = schema
                .get(key)
                .and_then(Value::as_array)
                .and_then(|branches| branches.iter().find(|b| !is_null_schema(b)))
            {
                return self.value(first, name, variant, depth + 1);
            }
        }
        match kind_of(schema) {
            Kind::Object => self.object(schema, depth),
            Kind::Array => self.array(schema, name, depth),
            Kind::String => Value::String(self.string(schema, name, variant)),
            Kind::Integer => integer(schema, variant),
            Kind::Number => number(schema, variant),
            Kind::Boolean => Value::Bool(variant.is_multiple_of(2)),
            Kind::Null => Value::Null,
        }
    }

    /// A local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`).
    fn resolve(&self, target: &str) -> Option<&'a Value> {
        let pointer = target.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn object(&self, schema: &Map<String, Value>, depth: usize) -> Value {
        let listed = schema.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut names = required;
        if self.properties == Properties::All
            || names.len() < min_count(schema, "minProperties") as usize
        {
            names.extend(
                listed
                    .into_iter()
                    .flat_map(|p| p.keys().map(String::as_str)),
            );
        }
        let extra = schema
            .get("additionalProperties")
            .filter(|s| s.is_object())
            .unwrap_or(&Value::Bool(true));
        let mut object = Map::new();
        for name in names {
            if object.contains_key(name) {
                continue;
            }
            let property = listed.and_then(|p| p.get(name)).unwrap_or(extra);
            let value = self.value(property, Some(name), 0, depth + 1);
            object.insert(name.to_string(), value);
        }
        Value::Object(object)
    }

    fn array(&self, schema: &Map<String, Value>, name: Option<&str>, depth: usize) -> Value {
        let prefix: &[Value] = schema
            .get("prefixItems")
            .or_else(|| schema.get("items").filter(|i| i.is_array()))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let rest = schema
            .get("items")
            .filter(|i| !i.is_array())
            .or_else(|| schema.get("additionalItems"))
            .unwrap_or(&Value::Bool(true));
        let wanted = min_count(schema, "minItems").clamp(1, MAX_ITEMS);
        let count = schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .map_or(wanted, |max| wanted.min(max));
        let items = (0..count)
            .map(|n| {
                let item = usize::try_from(n)
                    .ok()
                    .and_then(|i| prefix.get(i))
                    .unwrap_or(rest);
                self.value(item, name, n, depth + 1)
            })
            .collect();
        Value::Array(items)
    }

    fn string(&self, schema: &Map<String, Value>, name: Option<&str>, variant: u64) -> String {
        let base = schema
            .get("format")
            .and_then(Value::as_str)
            .and_then(formatted)
            .map(str::to_string)
            .or_else(|| name.and_then(|n| self.named(n)))
            .unwrap_or_else(|| "example".to_string());
        let mut text = if variant > 0 {
            format!("{base} {}", variant + 1)
        } else {
            base
        };
        let min = min_count(schema, "minLength").min(MAX_STRING_CHARS);
        let max = schema.get("maxLength").and_then(Value::as_u64);
        let length = text.chars().count() as u64;
        if length < min {
            text.extend(std::iter::repeat_n('.', (min - length) as usize));
        }
        if let Some(max) = max.filter(|max| length > *max) {
            text = text.chars().take(max as usize).collect();
        }
        text
    }

    /// The string a property of this name gets, if its name says what it holds.
    fn named(&self, name: &str) -> Option<String> {
        let words: Vec<String> = words_of(name);
        let has = |candidates: &[&str]| words.iter().any(|w| candidates.contains(&w.as_str()));
        if has(TEXT_NAMES) && !self.text.trim().is_empty() {
            return Some(self.text.to_string());
        }
        NAMED_STRINGS
            .iter()
            .find(|(candidates, _)| has(candidates))
            .map(|(_, value)| value.to_string())
    }
}

/// The JSON types a schema can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    Null,
}

impl Kind {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "object" => Self::Object,
            "array" => Self::Array,
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "null" => Self::Null,
            _ => return None,
        })
    }
}

/// The type to write: the named one (the first that is not `null` of a list), else the one the
/// schema's keywords imply.
fn kind_of(schema: &Map<String, Value>) -> Kind {
    let named = match schema.get("type") {
        Some(Value::String(name)) => Kind::parse(name),
        Some(Value::Array(names)) => {
            let kinds: Vec<Kind> = names
                .iter()
                .filter_map(Value::as_str)
                .filter_map(Kind::parse)
                .collect();
            kinds
                .iter()
                .copied()
                .find(|k| *k != Kind::Null)
                .or(kinds.first().copied())
        }
        _ => None,
    };
    named.unwrap_or_else(|| {
        let has = |keys: &[&str]| keys.iter().any(|k| schema.contains_key(*k));
        if has(&[
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
        ]) {
            Kind::Object
        } else if has(&["items", "prefixItems", "minItems", "maxItems"]) {
            Kind::Array
        } else if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) {
            Kind::Number
        } else {
            Kind::String
        }
    })
}

/// A value the schema states outright: `const`, an `enum` member, an example or the default.
fn given_value(schema: &Map<String, Value>, variant: u64) -> Option<Value> {
    if let Some(value) = schema.get("const") {
        return Some(value.clone());
    }
    if let Some(members) = schema.get("enum").and_then(Value::as_array)
        && !members.is_empty()
    {
        let index = usize::try_from(variant).unwrap_or(0) % members.len();
        return members.get(index).cloned();
    }
    if variant > 0 {
        return None;
    }
    schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .or_else(|| schema.get("default"))
        .cloned()
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// `allOf` as one schema: the parts' properties and required names joined, their other
/// keywords taken when the schema itself does not set them.
fn merge_all_of<'a>(
    schema: &Map<String, Value>,
    parts: &'a [Value],
    resolve: impl Fn(&str) -> Option<&'a Value>,
) -> Map<String, Value> {
    let mut merged: Map<String, Value> = schema
        .iter()
        .filter(|(key, _)| key.as_str() != "allOf")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for part in parts {
        let part = match part.get("$ref").and_then(Value::as_str) {
            Some(target) => resolve(target).unwrap_or(part),
            None => part,
        };
        let Some(part) = part.as_object() else {
            continue;
        };
        for (key, value) in part {
            match (key.as_str(), merged.get_mut(key), value) {
                ("properties", Some(Value::Object(into)), Value::Object(from)) => {
                    for (name, property) in from {
                        into.entry(name.clone()).or_insert_with(|| property.clone());
                    }
                }
                ("required", Some(Value::Array(into)), Value::Array(from)) => {
                    let new: Vec<Value> =
                        from.iter().filter(|n| !into.contains(n)).cloned().collect();
                    into.extend(new);
                }
                (_, None, _) => {
                    merged.insert(key.clone(), value.clone());
                }
                _ => {}
            }
        }
    }
    merged
}

/// The smallest value of the schema's kind, for schemas nested past [`MAX_DEPTH`].
fn empty_of(schema: &Map<String, Value>) -> Value {
    match kind_of(schema) {
        Kind::Object => json!({}),
        Kind::Array => json!([]),
        Kind::String => json!(""),
        Kind::Integer | Kind::Number => json!(0),
        Kind::Boolean => json!(false),
        Kind::Null => Value::Null,
    }
}

fn min_count(schema: &Map<String, Value>, key: &str) -> u64 {
    schema.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A sample for a string `format`.
fn formatted(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2025-01-01T12:00:00Z",
        "date" => "2025-01-01",
        "time" => "12:00:00Z",
        "duration" => "PT1H",
        "email" | "idn-email" => "ada@example.com",
        "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => "https://example.com",
        "uuid" => "00000000-0000-4000-8000-000000000000",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        _ => return None,
    })
}

/// The lowercase words of a property name (`userEmail`, `user_email`, `user-email`).
fn words_of(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Numeric bounds of a schema: inclusive `minimum`/`maximum`, and exclusive ones in either
/// draft's form (a number, or `true` beside the inclusive keyword).
struct Bounds {
    low: Option<(f64, bool)>,
    high: Option<(f64, bool)>,
}

impl Bounds {
    fn of(schema: &Map<String, Value>) -> Self {
        let bound = |inclusive: &str, exclusive: &str| {
            let flag = schema.get(exclusive).and_then(Value::as_bool) == Some(true);
            match schema.get(exclusive).and_then(Value::as_f64) {
                Some(value) => Some((value, true)),
                None => schema
                    .get(inclusive)
                    .and_then(Value::as_f64)
                    .map(|v| (v, flag)),
            }
        };
        Self {
            low: bound("minimum", "exclusiveMinimum"),
            high: bound("maximum", "exclusiveMaximum"),
        }
    }
}

fn integer(schema: &Map<String, Value>, variant: u64) -> Value {
    let bounds = Bounds::of(schema);
    let low = bounds.low.map(|(v, exclusive)| {
        let c = v.ceil();
        if exclusive && c == v { c + 1.0 } else { c }
    });
    let high = bounds.high.map(|(v, exclusive)| {
        let f = v.floor();
        if exclusive && f == v { f - 1.0 } else { f }
    });
    let mut value = (1.0 + variant as f64).max(low.unwrap_or(f64::MIN));
    value = value.min(high.unwrap_or(f64::MAX));
    if let Some(step) = schema
        .get("multipleOf")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
    {
        value = (value / step).ceil() * step;
        if high.is_some_and(|h| value > h) {
            value -= step;
        }
    }
    // Bounded above by the schema's own numbers, so the cast saturates at worst.
    json!(value as i64)
}

fn number(schema: &Map<String, Value>, variant: u64) -> Value {
    let bounds = Bounds::of(schema);
    let wanted = 1.5 + variant as f64;
    let fits = |v: f64| {
        bounds
            .low
            .is_none_or(|(l, ex)| if ex { v > l } else { v >= l })
            && bounds
                .high
                .is_none_or(|(h, ex)| if ex { v < h } else { v <= h })
    };
    let mut value = match (bounds.low, bounds.high) {
        _ if fits(wanted) => wanted,
        (Some((l, _)), Some((h, _))) => l + (h - l) / 2.0,
        (Some((l, _)), None) => l + 1.0,
        (None, Some((h, _))) => h - 1.0,
        (None, None) => wanted,
    };
    if let Some(step) = schema
        .get("multipleOf")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
    {
        let start = bounds.low.map_or(value, |(l, _)| l);
        value = (start / step).ceil() * step;
        if !fits(value) {
            value += step;
        }
    }
    Number::from_f64(value).map_or(json!(0), Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(schema: Value, properties: Properties) -> Value {
        Filler::new(&schema, properties, "the user's words").fill()
    }

    /// Fills `schema` and checks the value against it with a real validator.
    fn valid(schema: Value) -> Value {
        let value = fill(schema.clone(), Properties::All);
        let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{value} against {schema}: {errors:?}");
        let value_required = fill(schema.clone(), Properties::Required);
        assert!(
            validator.is_valid(&value_required),
            "{value_required} against {schema}"
        );
        value
    }

    #[test]
    fn objects_get_their_properties_and_strings_their_names() {
        let value = valid(json!({
            "type": "object",
            "required": ["title", "priority", "due"],
            "additionalProperties": false,
            "properties": {
                "title": {"type": "string", "minLength": 3},
                "priority": {"type": "string", "enum": ["high", "low"]},
                "due": {"type": "string", "format": "date"},
                "summary": {"type": "string", "maxLength": 8},
                "done": {"type": "boolean"},
                "estimate": {"type": "number", "minimum": 0, "maximum": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 2}
            }
        }));
        assert_eq!(value["priority"], "high");
        assert_eq!(value["due"], "2025-01-01");
        assert_eq!(value["title"], "Ada Lovelace");
        assert_eq!(
            value["summary"], "the user",
            "the context text, cut at maxLength"
        );
        assert_eq!(value["tags"], json!(["example", "example 2"]));
    }

    #[test]
    fn numbers_stay_inside_bounds_and_steps() {
        for schema in [
            json!({"type": "integer", "minimum": 10, "maximum": 12}),
            json!({"type": "integer", "exclusiveMinimum": 10}),
            json!({"type": "integer", "maximum": -5}),
            json!({"type": "integer", "minimum": 5, "multipleOf": 4}),
            json!({"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 3}),
            json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
            json!({"type": "number", "minimum": 100}),
            json!({"type": "number", "multipleOf": 0.25, "minimum": 0.3}),
            json!({"type": "number", "maximum": -2.5}),
        ] {
            valid(schema);
        }
    }

    #[test]
    fn refs_combinators_tuples_and_nullable_types_are_followed() {
        valid(json!({
            "$defs": {"point": {"type": "object", "required": ["x", "y"],
                                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}},
            "type": "object",
            "required": ["at", "kind", "pair", "maybe", "both"],
            "properties": {
                "at": {"$ref": "#/$defs/point"},
                "kind": {"oneOf": [{"type": "null"}, {"const": "circle"}]},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2, "maxItems": 2},
                "maybe": {"type": ["null", "string"], "format": "email"},
                "both": {"allOf": [
                    {"type": "object", "required": ["a"], "properties": {"a": {"type": "boolean"}}},
                    {"required": ["b"], "properties": {"b": {"type": "string", "format": "uuid"}}}
                ]}
            }
        }));
    }

    #[test]
    fn recursive_schemas_stop() {
        let value = valid(json!({
            "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"
        }));
        assert!(value.is_object());
    }

    #[test]
    fn tool_arguments_fill_only_required_fields_from_the_request() {
        let schema = json!({
            "type": "object",
            "required": ["timezone", "query"],
            "properties": {
                "timezone": {"type": "string", "description": "IANA name"},
                "query": {"type": "string"},
                "limit": {"type": "integer"}
            }
        });
        let value = fill(schema, Properties::Required);
        assert_eq!(
            value,
            json!({"timezone": "UTC", "query": "the user's words"})
        );
    }

    #[test]
    fn examples_and_defaults_win_over_made_up_values() {
        let schema = json!({"type": "object", "required": ["agent", "n"], "properties": {
            "agent": {"type": "string", "examples": ["chat"]},
            "n": {"type": "integer", "default": 7}
        }});
        assert_eq!(
            fill(schema, Properties::Required),
            json!({"agent": "chat", "n": 7})
        );
    }

    #[test]
    fn minimal_and_odd_schemas_still_give_a_value() {
        assert_eq!(fill(json!({}), Properties::All), json!("example"));
        assert_eq!(fill(json!(true), Properties::All), json!("example"));
        assert_eq!(fill(json!({"type": "object"}), Properties::All), json!({}));
        assert_eq!(
            fill(json!({"type": "array", "maxItems": 0}), Properties::All),
            json!([])
        );
        valid(json!({"type": "object", "minProperties": 1, "properties": {"a": {"type": "null"}}}));
    }

    #[test]
    fn arrays_and_padded_strings_stop_at_their_limits() {
        let at = json!({"type": "array", "minItems": MAX_ITEMS, "items": {"type": "integer"}});
        assert_eq!(valid(at).as_array().map(Vec::len), Some(MAX_ITEMS as usize));
        let past = json!({"type": "array", "minItems": MAX_ITEMS + 1});
        let value = fill(past, Properties::All);
        assert_eq!(value.as_array().map(Vec::len), Some(MAX_ITEMS as usize));
        let at = json!({"type": "string", "minLength": MAX_STRING_CHARS});
        assert_eq!(
            valid(at).as_str().map(str::len),
            Some(MAX_STRING_CHARS as usize)
        );
        let past = json!({"type": "string", "minLength": MAX_STRING_CHARS + 1});
        let value = fill(past, Properties::All);
        assert_eq!(
            value.as_str().map(str::len),
            Some(MAX_STRING_CHARS as usize)
        );
    }

    #[test]
    fn property_names_split_into_words() {
        assert_eq!(words_of("userEmail"), ["user", "email"]);
        assert_eq!(words_of("user_email-2"), ["user", "email", "2"]);
        assert_eq!(words_of("URL"), ["url"]);
    }
}

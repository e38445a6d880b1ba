//! Reading an OpenAPI 3 document into operations: each `paths.<path>.<method>` with its
//! path, query and header parameters and its JSON request body, local `$ref`s inlined, and one
//! input schema the model sees. Pure: no I/O, every problem named by its JSON pointer.

use serde_json::{Map, Value, json};

/// The HTTP methods an OpenAPI path item may hold, in document order.
const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];
/// Deepest `$ref` chain inlined; deeper (a recursive schema) becomes `{}`.
const MAX_REF_DEPTH: usize = 16;
/// Longest tool name providers accept (OpenAI's function-name limit).
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParameterIn {
    Path,
    Query,
    Header,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub location: ParameterIn,
}

/// One operation, ready to become a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The `operationId`, or `<method>_<path>` made of safe characters.
    pub id: String,
    pub method: String,
    /// The path template, `{name}` for path parameters.
    pub path: String,
    pub description: String,
    pub parameters: Vec<Parameter>,
    /// Whether the operation takes a JSON body (the `body` argument).
    pub has_body: bool,
    /// The arguments' JSON schema.
    pub input_schema: Value,
}

/// A problem in the document, at a JSON pointer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("at {pointer}: {detail}")]
pub struct DocumentError {
    pub pointer: String,
    pub detail: String,
}

fn problem(pointer: impl Into<String>, detail: impl Into<String>) -> DocumentError {
    DocumentError {
        pointer: pointer.into(),
        detail: detail.into(),
    }
}

/// The document's operations that `offered` accepts (by id), in document order.
pub fn operations(
    document: &Value,
    offered: impl Fn(&str) -> bool,
) -> Result<Vec<Operation>, DocumentError> {
    let version = document.get("openapi").and_then(Value::as_str);
    if !version.is_some_and(|v| v.starts_with('3')) {
        return Err(problem(
            "/openapi",
            "not an OpenAPI 3 document (`openapi: 3.x` is required; Swagger 2 is not read)",
        ));
    }
    let Some(paths) = document.get("paths").and_then(Value::as_object) else {
        return Err(problem("/paths", "must be an object of paths"));
    };
    let mut found = Vec::new();
    for (path, item) in paths {
        let item_pointer = format!("/paths/{}", escape(path));
        let item = resolve(document, item, &item_pointer, 0)?;
        let shared = item.get("parameters").cloned().unwrap_or(json!([]));
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let pointer = format!("{item_pointer}/{method}");
            let id = operation_id(operation, method, path);
            if !offered(&id) {
                continue;
            }
            let shared = (&shared, item_pointer.as_str());
            found.push(read_operation(
                document, operation, shared, &pointer, id, method, path,
            )?);
        }
    }
    Ok(found)
}

fn operation_id(operation: &Value, method: &str, path: &str) -> String {
    let raw = operation
        .get("operationId")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{method}_{path}"), str::to_string);
    let safe: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Runs of `_` are one: `__` separates a tool name's parts.
    let mut collapsed = String::with_capacity(safe.len());
    for c in safe.chars() {
        if !(c == '_' && collapsed.ends_with('_')) {
            collapsed.push(c);
        }
    }
    collapsed.trim_matches('_').to_string()
}

/// `shared` is the path item's own `parameters` with the path item's pointer.
fn read_operation(
    document: &Value,
    operation: &Value,
    shared: (&Value, &str),
    pointer: &str,
    id: String,
    method: &str,
    path: &str,
) -> Result<Operation, DocumentError> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut parameters = Vec::new();
    let own = operation.get("parameters").cloned().unwrap_or(json!([]));
    let (shared, shared_pointer) = shared;
    let listed = shared
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, p)| (format!("{shared_pointer}/parameters/{i}"), p))
        .chain(
            own.as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, p)| (format!("{pointer}/parameters/{i}"), p)),
        )
        .map(|(at, p)| (at, p.clone()))
        .collect::<Vec<_>>();
    for (at, parameter) in listed {
        let parameter = resolve(document, &parameter, &at, 0)?;
        let (name, location) = parameter_place(&parameter, &at)?;
        let mut schema = match parameter.get("schema") {
            Some(schema) => inline_refs(document, schema, &format!("{at}/schema"), 0)?,
            None => json!({"type": "string"}),
        };
        if let (Some(text), Some(object)) = (
            parameter.get("description").and_then(Value::as_str),
            schema.as_object_mut(),
        ) {
            object.insert("description".into(), Value::String(text.to_string()));
        }
        let is_required =
            location == ParameterIn::Path || parameter.get("required") == Some(&Value::Bool(true));
        if is_required && !required.contains(&Value::String(name.clone())) {
            required.push(Value::String(name.clone()));
        }
        // An operation's own parameter replaces a path-level one of the same name.
        parameters.retain(|p: &Parameter| p.name != name);
        properties.insert(name.clone(), schema);
        parameters.push(Parameter { name, location });
    }
    let has_body = match operation.get("requestBody") {
        None => false,
        Some(body) => {
            let at = format!("{pointer}/requestBody");
            let body = resolve(document, body, &at, 0)?;
            let Some(schema) = body.pointer("/content/application~1json/schema") else {
                return Err(problem(
                    at,
                    "only application/json request bodies are read: exclude this operation",
                ));
            };
            let schema = inline_refs(document, schema, &format!("{at}/content"), 0)?;
            properties.insert("body".into(), schema);
            if body.get("required") == Some(&Value::Bool(true)) {
                required.push(Value::String("body".into()));
            }
            true
        }
    };
    let description = ["summary", "description"]
        .iter()
        .filter_map(|key| operation.get(*key).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n");
    Ok(Operation {
        id,
        method: method.to_uppercase(),
        path: path.to_string(),
        description: if description.is_empty() {
            format!("{} {path}", method.to_uppercase())
        } else {
            description
        },
        parameters,
        has_body,
        input_schema: json!({"type": "object", "properties": properties, "required": required}),
    })
}

fn parameter_place(parameter: &Value, at: &str) -> Result<(String, ParameterIn), DocumentError> {
    let name = parameter
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| problem(format!("{at}/name"), "a parameter needs a name"))?;
    let location = match parameter.get("in").and_then(Value::as_str) {
        Some("path") => ParameterIn::Path,
        Some("query") => ParameterIn::Query,
        Some("header") => ParameterIn::Header,
        other => {
            return Err(problem(
                format!("{at}/in"),
                format!("parameters in {other:?} are not supported (path, query, header are)"),
            ));
        }
    };
    if name == "body" {
        return Err(problem(
            format!("{at}/name"),
            "a parameter named `body` clashes with the request body argument",
        ));
    }
    Ok((name.to_string(), location))
}

/// `value` itself, or what its `$ref` points to (followed to the end).
fn resolve(
    document: &Value,
    value: &Value,
    at: &str,
    depth: usize,
) -> Result<Value, DocumentError> {
    match value.get("$ref").and_then(Value::as_str) {
        None => Ok(value.clone()),
        Some(_) if depth >= MAX_REF_DEPTH => Ok(json!({})),
        Some(reference) => {
            let target = follow(document, reference, at)?;
            resolve(document, target, at, depth + 1)
        }
    }
}

/// A copy of `schema` with every local `$ref` replaced by its target, recursively.
fn inline_refs(
    document: &Value,
    schema: &Value,
    at: &str,
    depth: usize,
) -> Result<Value, DocumentError> {
    if depth >= MAX_REF_DEPTH {
        return Ok(json!({}));
    }
    match schema {
        Value::Object(object) => {
            if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
                let target = follow(document, reference, at)?;
                return inline_refs(document, target, at, depth + 1);
            }
            let mut copy = Map::new();
            for (key, item) in object {
                copy.insert(key.clone(), inline_refs(document, item, at, depth)?);
            }
            Ok(Value::Object(copy))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| inline_refs(document, item, at, depth))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn follow<'a>(document: &'a Value, reference: &str, at: &str) -> Result<&'a Value, DocumentError> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(problem(
            at,
            format!("$ref {reference:?} points outside the document (only local refs are read)"),
        ));
    };
    document
        .pointer(pointer)
        .ok_or_else(|| problem(at, format!("$ref {reference:?} points to nothing")))
}

/// A JSON pointer token: `~` and `/` escaped.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn petstore() -> Value {
        json!({
            "openapi": "3.0.3",
            "servers": [{"url": "https://pets.example.com/v1"}],
            "paths": {
                "/pets": {
                    "get": {"operationId": "listPets", "summary": "List pets",
                        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}]},
                    "post": {"operationId": "createPet",
                        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}
                },
                "/pets/{petId}": {
                    "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "get": {"operationId": "showPetById"},
                    "delete": {}
                }
            },
            "components": {"schemas": {"Pet": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "parent": {"$ref": "#/components/schemas/Pet"}}}}}
        })
    }

    #[test]
    fn operations_carry_their_parameters_body_and_schema() {
        let found = operations(&petstore(), |_| true).expect("reads");
        let ids: Vec<&str> = found.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(
            ids,
            ["listPets", "createPet", "showPetById", "delete_pets_petId"]
        );
        assert_eq!(found[0].description, "List pets");
        assert_eq!(
            found[0].input_schema["properties"]["limit"]["type"],
            "integer"
        );
        assert!(found[1].has_body);
        assert_eq!(found[1].input_schema["required"], json!(["body"]));
        assert_eq!(
            found[1].input_schema["properties"]["body"]["properties"]["name"]["type"], "string",
            "the $ref is inlined"
        );
        assert_eq!(found[2].parameters[0].location, ParameterIn::Path);
        assert_eq!(found[2].input_schema["required"], json!(["petId"]));
    }

    #[test]
    fn problems_are_named_by_their_pointer() {
        let mut document = petstore();
        document["paths"]["/pets"]["get"]["parameters"][0]["in"] = json!("cookie");
        let error = operations(&document, |_| true).unwrap_err();
        assert_eq!(error.pointer, "/paths/~1pets/get/parameters/0/in");

        let mut document = petstore();
        document["paths"]["/pets"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
            json!({"$ref": "#/components/schemas/Nope"});
        let error = operations(&document, |_| true).unwrap_err();
        assert!(error.detail.contains("points to nothing"), "{error}");

        let error = operations(&json!({"swagger": "2.0"}), |_| true).unwrap_err();
        assert_eq!(error.pointer, "/openapi");
    }

    #[test]
    fn only_offered_operations_are_read() {
        let found = operations(&petstore(), |id| id.starts_with("list")).expect("reads");
        assert_eq!(found.len(), 1);
    }
}

//! The final report's acceptance, as the session sees it: tool schema, text and JSON content.

use super::*;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde_json::json;

use super::json_content::MAX_LISTED_ERRORS;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn spec(format: &str, schema: Option<Value>) -> FinalReportSpec {
    match FinalReportSpec::new(format, schema.as_ref()) {
        Ok(spec) => spec,
        Err(e) => panic!("spec: {e}"),
    }
}

fn accept(spec: &FinalReportSpec, value: Value) -> AcceptedReport {
    match spec.accept(&args(value)) {
        Ok(report) => report,
        Err(e) => panic!("accept failed: {e}"),
    }
}

fn reject(spec: &FinalReportSpec, value: Value) -> FinalReportError {
    match spec.accept(&args(value)) {
        Ok(report) => panic!("unexpectedly accepted: {report:?}"),
        Err(e) => e,
    }
}

fn items_schema() -> Value {
    json!({
        "type": "object",
        "required": ["title", "items"],
        "properties": {
            "title": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    }
                }
            }
        }
    })
}

#[test]
fn text_schema_shape() {
    for format in TEXT_FORMATS {
        let params = final_report_parameters(format, None);
        assert_eq!(params["type"], "object");
        assert_eq!(params["additionalProperties"], false);
        assert_eq!(
            params["required"],
            json!(["report_format", "report_content"])
        );
        assert_eq!(params["properties"]["report_format"]["type"], "string");
        assert_eq!(params["properties"]["report_format"]["const"], *format);
        assert_eq!(params["properties"]["report_content"]["type"], "string");
        assert_eq!(params["properties"]["report_content"]["minLength"], 1);
        assert_eq!(
            params["properties"]["encoding"]["enum"],
            json!(["raw", "base64"])
        );
        assert_eq!(params["properties"]["encoding"]["default"], "raw");
        assert_eq!(params["properties"]["metadata"]["type"], "object");
        assert!(params["properties"].get("content_json").is_none());
        // The schema itself compiles.
        assert!(jsonschema::validator_for(&params).is_ok());
    }
}

#[test]
fn json_schema_shape() {
    let schema = items_schema();
    let params = final_report_parameters("json", Some(&schema));
    assert_eq!(params["type"], "object");
    assert_eq!(params["additionalProperties"], false);
    assert_eq!(params["required"], json!(["report_format", "content_json"]));
    assert_eq!(params["properties"]["report_format"]["const"], "json");
    assert_eq!(params["properties"]["content_json"], schema);
    assert!(params["properties"].get("report_content").is_none());
    assert!(params["properties"].get("encoding").is_none());
    assert_eq!(params["properties"]["metadata"]["type"], "object");

    let default = final_report_parameters("json", None);
    assert_eq!(
        default["properties"]["content_json"],
        json!({"type": "object"})
    );
    assert_eq!(spec("json", Some(schema)).parameters(), params);
}

#[test]
fn descriptions_name_the_fields() {
    let text = final_report_description("markdown");
    assert!(text.contains("end the session"));
    assert!(text.contains("report_content"));
    assert!(text.contains("\"markdown\""));
    let json_text = final_report_description("json");
    assert!(json_text.contains("content_json"));
    assert!(!json_text.contains("report_content"));
}

#[test]
fn markdown_ok() {
    let spec = spec("markdown", None);
    let report = accept(
        &spec,
        json!({"report_format": "markdown", "report_content": "# Title\n\nBody", "metadata": {"k": 1}}),
    );
    assert_eq!(
        report,
        AcceptedReport {
            format: "markdown".to_owned(),
            content: Some("# Title\n\nBody".to_owned()),
            content_json: None,
            metadata: Some(json!({"k": 1})),
            warnings: vec![],
        }
    );
}

#[test]
fn empty_content_exact_message() {
    let spec = spec("markdown", None);
    for value in [
        json!({"report_format": "markdown", "report_content": ""}),
        json!({"report_format": "markdown", "report_content": "  \n\t "}),
        json!({"report_format": "markdown"}),
        json!({"report_format": "markdown", "report_content": null}),
        json!({"report_format": "markdown", "report_content": 42}),
    ] {
        let err = reject(&spec, value);
        assert_eq!(err, FinalReportError::EmptyContent);
        assert_eq!(
            err.to_string(),
            "final_report requires non-empty report_content."
        );
    }
}

#[test]
fn base64_with_and_without_padding() {
    let spec = spec("text", None);
    let text = "héllo, wörld — 日本 ✓"; // length chosen to need padding
    let padded = STANDARD.encode(text);
    let unpadded = STANDARD_NO_PAD.encode(text);
    assert!(padded.ends_with('='));
    assert_ne!(padded, unpadded);
    for encoded in [padded.clone(), unpadded, format!("  \n{padded}\n  ")] {
        let report = accept(
            &spec,
            json!({"report_format": "text", "report_content": encoded, "encoding": "base64"}),
        );
        assert_eq!(report.content.as_deref(), Some(text));
    }
}

#[test]
fn bad_base64_and_bad_utf8() {
    let spec = spec("text", None);
    let err = reject(
        &spec,
        json!({"report_format": "text", "report_content": "not*base64!", "encoding": "base64"}),
    );
    assert!(matches!(err, FinalReportError::InvalidBase64(_)), "{err:?}");
    assert!(err.to_string().contains("not valid base64"));

    let invalid_utf8 = STANDARD.encode([0xff_u8, 0xfe, 0x41]);
    let err = reject(
        &spec,
        json!({"report_format": "text", "report_content": invalid_utf8, "encoding": "base64"}),
    );
    assert!(matches!(err, FinalReportError::InvalidUtf8(_)), "{err:?}");
    assert!(err.to_string().contains("not valid UTF-8"));

    let blank = STANDARD.encode("   ");
    let err = reject(
        &spec,
        json!({"report_format": "text", "report_content": blank, "encoding": "base64"}),
    );
    assert_eq!(err, FinalReportError::EmptyContent);
}

#[test]
fn unknown_encoding() {
    let spec = spec("text", None);
    let err = reject(
        &spec,
        json!({"report_format": "text", "report_content": "x", "encoding": "hex"}),
    );
    assert_eq!(err, FinalReportError::UnknownEncoding("\"hex\"".to_owned()));
    let report = accept(
        &spec,
        json!({"report_format": "text", "report_content": "x", "encoding": "RAW"}),
    );
    assert_eq!(report.content.as_deref(), Some("x"));
}

#[test]
fn format_mismatch_normalised_with_warning() {
    let spec = spec("json", None);
    let report = accept(
        &spec,
        json!({"report_format": "markdown", "content_json": {"a": 1}}),
    );
    assert_eq!(report.format, "json");
    assert_eq!(
        report.warnings,
        vec!["report_format \"markdown\" does not match the expected \"json\"; normalised"]
    );
    // Case/whitespace differences are not a mismatch.
    let report = accept(
        &spec,
        json!({"report_format": " JSON ", "content_json": {}}),
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn missing_format_normalised() {
    let spec = spec("Markdown", None);
    let report = accept(&spec, json!({"report_content": "hi"}));
    assert_eq!(report.format, "markdown");
    assert_eq!(
        report.warnings,
        vec!["report_format missing; normalised to the expected \"markdown\""]
    );
}

#[test]
fn json_valid() {
    let spec = spec("json", Some(items_schema()));
    let content = json!({"title": "t", "items": [{"name": "a", "tags": ["x"]}]});
    let report = accept(
        &spec,
        json!({"report_format": "json", "content_json": content.clone()}),
    );
    assert_eq!(report.content_json, Some(content));
    assert_eq!(report.content, None);
    assert!(report.warnings.is_empty());
}

#[test]
fn json_sent_as_a_string() {
    let spec = spec("json", Some(items_schema()));
    let report = accept(
        &spec,
        json!({"report_format": "json", "content_json": "{\"title\": \"t\", \"items\": []}"}),
    );
    assert_eq!(
        report.content_json,
        Some(json!({"title": "t", "items": []}))
    );
    assert_eq!(
        report.warnings,
        vec!["content_json was sent as a JSON string; parsed it"]
    );

    // Broken JSON in the string goes through the tool-args repair pipeline.
    let report = accept(
        &spec,
        json!({"report_format": "json", "content_json": "{'title': 't', 'items': [],}"}),
    );
    assert_eq!(
        report.content_json,
        Some(json!({"title": "t", "items": []}))
    );
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    assert!(report.warnings[1].starts_with("content_json repaired: "));

    let err = reject(
        &spec,
        json!({"report_format": "json", "content_json": "hello world"}),
    );
    assert!(
        matches!(err, FinalReportError::UnparseableContentJson(_)),
        "{err:?}"
    );
}

#[test]
fn json_string_kept_when_schema_wants_a_string() {
    let spec = spec("json", Some(json!({"type": "string"})));
    let report = accept(
        &spec,
        json!({"report_format": "json", "content_json": "{\"a\": 1}"}),
    );
    assert_eq!(report.content_json, Some(json!("{\"a\": 1}")));
    assert!(report.warnings.is_empty());
}

#[test]
fn json_nested_stringified_array_repaired() {
    let spec = spec("json", Some(items_schema()));
    let report = accept(
        &spec,
        json!({
            "report_format": "json",
            "content_json": {"title": "t", "items": "[{\"name\": \"a\", \"tags\": \"[\\\"x\\\"]\"}]"}
        }),
    );
    assert_eq!(
        report.content_json,
        Some(json!({"title": "t", "items": [{"name": "a", "tags": ["x"]}]}))
    );
    assert_eq!(
        report.warnings,
        vec![
            "content_json repaired: field `items` was a JSON string",
            "content_json repaired: field `items/0/tags` was a JSON string",
        ]
    );
}

#[test]
fn legit_json_text_field_is_not_repaired() {
    let schema = json!({
        "type": "object",
        "required": ["raw", "n"],
        "properties": {"raw": {"type": "string"}, "n": {"type": "integer"}}
    });
    let spec = spec("json", Some(schema));
    let err = reject(
        &spec,
        json!({"report_format": "json", "content_json": {"raw": "[1, 2]"}}),
    );
    let FinalReportError::SchemaMismatch { errors } = err else {
        panic!("expected SchemaMismatch");
    };
    assert_eq!(errors, vec!["(root): \"n\" is a required property"]);
}

#[test]
fn json_invalid_reports_paths() {
    let spec = spec("json", Some(items_schema()));
    let err = reject(
        &spec,
        json!({"report_format": "json", "content_json": {"title": "t", "items": [{"name": 5}]}}),
    );
    assert_eq!(
        err,
        FinalReportError::SchemaMismatch {
            errors: vec!["/items/0/name: 5 is not of type \"string\"".to_owned()]
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("/items/0/name: 5 is not of type \"string\""),
        "{text}"
    );
    assert!(text.contains(FINAL_REPORT_TOOL));

    let err = reject(&spec, json!({"report_format": "json", "content_json": {}}));
    let FinalReportError::SchemaMismatch { errors } = err else {
        panic!("expected SchemaMismatch");
    };
    assert!(
        errors.iter().all(|e| e.starts_with("(root): ")),
        "{errors:?}"
    );
}

#[test]
fn json_error_list_is_capped() {
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let spec = spec("json", Some(schema));
    let err = reject(
        &spec,
        json!({"report_format": "json", "content_json": (0..15).collect::<Vec<i32>>()}),
    );
    let FinalReportError::SchemaMismatch { errors } = err else {
        panic!("expected SchemaMismatch");
    };
    assert_eq!(errors.len(), MAX_LISTED_ERRORS + 1);
    assert_eq!(errors[0], "/0: 0 is not of type \"string\"");
    assert_eq!(errors[MAX_LISTED_ERRORS], "(and 5 more)");
}

#[test]
fn json_missing_content() {
    let spec = spec("json", None);
    assert_eq!(
        reject(&spec, json!({"report_format": "json"})),
        FinalReportError::MissingContentJson
    );
}

#[test]
fn no_schema_accepts_any_object() {
    let spec = spec("json", None);
    let report = accept(
        &spec,
        json!({"report_format": "json", "content_json": {"anything": [1, {"x": null}]}}),
    );
    assert_eq!(
        report.content_json,
        Some(json!({"anything": [1, {"x": null}]}))
    );
    let err = reject(&spec, json!({"report_format": "json", "content_json": 5}));
    assert!(matches!(err, FinalReportError::SchemaMismatch { .. }));
}

#[test]
fn schema_that_does_not_compile() {
    let bad = json!({"type": "not-a-type"});
    let err = FinalReportSpec::new("json", Some(&bad)).err();
    let Some(SchemaError::InvalidSchema { message }) = err else {
        panic!("expected InvalidSchema, got {err:?}");
    };
    assert!(message.contains("not-a-type"), "{message}");

    let bad_pattern = json!({"type": "string", "pattern": "(unclosed"});
    assert!(matches!(
        FinalReportSpec::new("json", Some(&bad_pattern)),
        Err(SchemaError::InvalidSchema { .. })
    ));
}

#[test]
fn unknown_format() {
    assert_eq!(
        FinalReportSpec::new("pdf", None).err(),
        Some(SchemaError::UnknownFormat("pdf".to_owned()))
    );
    for format in TEXT_FORMATS.iter().chain([&JSON_FORMAT]) {
        assert!(FinalReportSpec::new(format, None).is_ok(), "{format}");
    }
}

#[test]
fn metadata_must_be_an_object() {
    let spec = spec("markdown", None);
    let err = reject(
        &spec,
        json!({"report_format": "markdown", "report_content": "x", "metadata": "note"}),
    );
    assert_eq!(err, FinalReportError::MetadataNotObject("a string"));
    assert_eq!(
        err.to_string(),
        "final_report: metadata must be a JSON object, but it is a string."
    );
    let report = accept(
        &spec,
        json!({"report_format": "markdown", "report_content": "x", "metadata": null}),
    );
    assert_eq!(report.metadata, None);
}

#[test]
fn aliases_content_and_format() {
    let text = spec("markdown", None);
    let report = accept(&text, json!({"format": "markdown", "content": "body"}));
    assert_eq!(report.content.as_deref(), Some("body"));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    let json_spec = spec("json", None);
    let report = accept(&json_spec, json!({"format": "json", "content": {"a": 1}}));
    assert_eq!(report.content_json, Some(json!({"a": 1})));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    let report = accept(
        &json_spec,
        json!({"format": "text", "content": "{\"a\": 1}"}),
    );
    assert_eq!(report.content_json, Some(json!({"a": 1})));
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
}

#[test]
fn unexpected_fields_are_warned_not_rejected() {
    let spec = spec("text", None);
    let report = accept(
        &spec,
        json!({"report_format": "text", "report_content": "x", "extra": 1}),
    );
    assert_eq!(report.warnings, vec!["ignored unexpected field `extra`"]);
}

#[test]
fn a_text_answer_to_a_json_run_must_parse_and_fit_the_schema() {
    let schema =
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let json = spec("json", Some(schema));
    let plain = json
        .accept_text("{\"city\": \"Paris\"}")
        .expect("plain JSON");
    assert_eq!(plain.content_json, Some(json!({"city": "Paris"})));
    let fenced = json
        .accept_text("```json\n{\"city\": \"Paris\"}\n```\n")
        .expect("a fenced block");
    assert_eq!(fenced.content_json, Some(json!({"city": "Paris"})));
    assert!(json.accept_text("The capital is Paris.").is_err(), "prose");
    assert!(
        json.accept_text("{\"town\": \"Paris\"}").is_err(),
        "JSON off the schema"
    );
    assert!(
        json.accept_text("```json\n{\"city\": 1}\n```").is_err(),
        "fenced, off the schema"
    );

    let markdown = spec("markdown", None);
    let text = markdown
        .accept_text("## Paris")
        .expect("text formats take text");
    assert_eq!(text.content.as_deref(), Some("## Paris"));
}

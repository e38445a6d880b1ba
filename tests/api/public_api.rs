//! The library's public API (SPEC §16) as rustdoc sees it, kept as a snapshot so that every
//! change to it shows in review. rustdoc's JSON output is read with `RUSTC_BOOTSTRAP=1` on the
//! stable toolchain (its format is unstable; only the item paths and kinds are used), in its own
//! target directory so the test build is not invalidated.
//!
//! Accept a deliberate change with
//! `INSTA_UPDATE=always cargo test --test api the_public_api_matches_its_snapshot`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn the_public_api_matches_its_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = root.join("target").join("public-api");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTDOCFLAGS")
        .args(["rustdoc", "--lib", "--quiet", "--target-dir"])
        .arg(&target)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        // Hidden modules are documented so that the items the library re-exports from them
        // are listed whole (fields, variants, methods); the walk skips the hidden modules.
        .arg("--document-hidden-items")
        .output()
        .expect("cargo rustdoc runs");
    assert!(
        output.status.success(),
        "cargo rustdoc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text =
        std::fs::read_to_string(target.join("doc").join("agentd.json")).expect("rustdoc JSON");
    let document: Value = serde_json::from_str(&text).expect("rustdoc JSON parses");
    let items = PublicItems::of(&document);
    insta::assert_snapshot!(
        "public_api",
        items.lines.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Every public item reachable from the crate root, one line each: `kind path`.
struct PublicItems<'a> {
    index: &'a serde_json::Map<String, Value>,
    lines: BTreeSet<String>,
    visited: BTreeSet<String>,
}

impl<'a> PublicItems<'a> {
    fn of(document: &'a Value) -> Self {
        let index = document["index"].as_object().expect("an index");
        let mut items = Self {
            index,
            lines: BTreeSet::new(),
            visited: BTreeSet::new(),
        };
        let root = id_text(&document["root"]);
        items.module(&root, "agentd");
        items
    }

    fn item(&self, id: &Value) -> Option<&'a Value> {
        self.index.get(&id_text(id))
    }

    fn module(&mut self, id: &str, path: &str) {
        if !self.visited.insert(format!("{id} {path}")) {
            return;
        }
        let Some(module) = self.index.get(id) else {
            return;
        };
        for child in module["inner"]["module"]["items"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(item) = self.item(child) else {
                continue;
            };
            if item["visibility"] != "public" || is_hidden(item) {
                continue;
            }
            self.public(item, path);
        }
    }

    /// One public item of the module at `path` (a re-export is listed under its new path).
    fn public(&mut self, item: &'a Value, path: &str) {
        let (kind, inner) = kind_of(item);
        if kind == "use" {
            let name = inner["name"].as_str().unwrap_or_default();
            match self.item(&inner["id"]) {
                Some(target) if inner["is_glob"] != true => {
                    let (target_kind, _) = kind_of(target);
                    if target_kind == "module" {
                        self.module(&id_text(&inner["id"]), &format!("{path}::{name}"));
                    } else {
                        self.named(target, &format!("{path}::{name}"));
                    }
                }
                _ => {
                    let source = inner["source"].as_str().unwrap_or_default();
                    self.lines
                        .insert(format!("pub use {path}::{name} = {source}"));
                }
            }
            return;
        }
        let name = item["name"].as_str().unwrap_or_default();
        self.named(item, &format!("{path}::{name}"));
    }

    fn named(&mut self, item: &'a Value, path: &str) {
        let (kind, inner) = kind_of(item);
        self.lines.insert(format!("{kind} {path}"));
        match kind.as_str() {
            "module" => self.module(&id_text(&item["id"]), path),
            "struct" => {
                self.fields(inner, path);
                self.inherent_methods(inner, path);
            }
            "enum" => {
                for variant in inner["variants"].as_array().into_iter().flatten() {
                    if let Some(variant) = self.item(variant) {
                        let name = variant["name"].as_str().unwrap_or_default();
                        self.lines.insert(format!("variant {path}::{name}"));
                    }
                }
                self.inherent_methods(inner, path);
            }
            "trait" => {
                for member in inner["items"].as_array().into_iter().flatten() {
                    if let Some(member) = self.item(member) {
                        let (member_kind, _) = kind_of(member);
                        let name = member["name"].as_str().unwrap_or_default();
                        self.lines.insert(format!("{member_kind} {path}::{name}"));
                    }
                }
            }
            _ => {}
        }
    }

    fn fields(&mut self, inner: &Value, path: &str) {
        let plain = &inner["kind"]["plain"]["fields"];
        for field in plain.as_array().into_iter().flatten() {
            if let Some(field) = self.item(field).filter(|f| f["visibility"] == "public") {
                let name = field["name"].as_str().unwrap_or_default();
                self.lines.insert(format!("field {path}.{name}"));
            }
        }
    }

    fn inherent_methods(&mut self, inner: &Value, path: &str) {
        for implementation in inner["impls"].as_array().into_iter().flatten() {
            let Some(implementation) = self.item(implementation) else {
                continue;
            };
            let (_, block) = kind_of(implementation);
            if !block["trait"].is_null() || block["synthetic"] == true {
                continue;
            }
            for member in block["items"].as_array().into_iter().flatten() {
                if let Some(member) = self.item(member).filter(|m| m["visibility"] == "public") {
                    let (member_kind, _) = kind_of(member);
                    let name = member["name"].as_str().unwrap_or_default();
                    self.lines.insert(format!("{member_kind} {path}::{name}"));
                }
            }
        }
    }
}

/// `#[doc(hidden)]`: the server's modules, not the library's API.
fn is_hidden(item: &Value) -> bool {
    item["attrs"].to_string().contains("hidden")
}

static NULL: Value = Value::Null;

/// An item's kind (`struct`, `function`, …) and what rustdoc says of it.
fn kind_of(item: &Value) -> (String, &Value) {
    item["inner"]
        .as_object()
        .and_then(|inner| inner.iter().next())
        .map(|(kind, inner)| (kind.clone(), inner))
        .unwrap_or_else(|| ("unknown".into(), &NULL))
}

/// rustdoc ids are numbers in the index's keys, written as text.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

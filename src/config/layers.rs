//! Owns the six configuration layers: where they live, loading each one (JSON + its own
//! `.ai-agent.env` + placeholder expansion), and deep-merging them into one JSON value.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::env_file::{EnvFileError, parse_env_file};
use super::expand::{ExpandError, expand_layer};

/// File name of the config file in the cwd, prompt and binary directories.
pub const LOCAL_CONFIG_FILE: &str = ".ai-agent.json";
/// Config file inside `$HOME`, relative to it.
pub const HOME_CONFIG_FILE: &str = ".ai-agent/ai-agent.json";
/// System-wide config file.
pub const SYSTEM_CONFIG_FILE: &str = "/etc/ai-agent/ai-agent.json";
/// Env file read from the same directory as each layer's JSON file.
pub const ENV_FILE_NAME: &str = ".ai-agent.env";

/// Which of the six layers a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// `--config <path>`.
    Explicit,
    /// `<cwd>/.ai-agent.json`.
    WorkingDir,
    /// `<prompt dir>/.ai-agent.json`.
    PromptDir,
    /// `<binary dir>/.ai-agent.json`.
    BinaryDir,
    /// `$HOME/.ai-agent/ai-agent.json`.
    Home,
    /// `/etc/ai-agent/ai-agent.json`.
    System,
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Explicit => "--config",
            Self::WorkingDir => "cwd",
            Self::PromptDir => "prompt dir",
            Self::BinaryDir => "binary dir",
            Self::Home => "home",
            Self::System => "system",
        })
    }
}

/// One place a config file may be read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSource {
    /// Which layer this is.
    pub kind: LayerKind,
    /// Path of the JSON file.
    pub path: PathBuf,
    /// When true a missing file is an error; otherwise it is skipped.
    pub required: bool,
}

/// A layer that was read, parsed and expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedLayer {
    /// Where it came from.
    pub source: LayerSource,
    /// Its JSON object, placeholders already expanded.
    pub value: Value,
}

/// Why loading the layers failed. Every variant names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The `--config` file does not exist.
    #[error("config file {} given with --config does not exist", path.display())]
    ExplicitMissing {
        /// The path given.
        path: PathBuf,
    },
    /// A config or env file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A config file is not valid JSON.
    #[error("invalid JSON in {} at line {line}, column {column}: {message}", path.display())]
    InvalidJson {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// A config file's top-level value is not a JSON object.
    #[error("config file {} must contain a JSON object at the top level", path.display())]
    NotAnObject {
        /// The file.
        path: PathBuf,
    },
    /// A layer's `.ai-agent.env` could not be parsed.
    #[error("env file {}: {source}", path.display())]
    EnvFile {
        /// The env file.
        path: PathBuf,
        /// The parse error (with line number).
        #[source]
        source: EnvFileError,
    },
    /// Placeholder expansion failed (the error names the layer file).
    #[error(transparent)]
    Expand(#[from] ExpandError),
}

/// The six sources in priority order (highest first), deduplicated by canonical path where
/// the file exists (the higher-priority entry is kept). The prompt directory is only used
/// when given and different from `cwd`.
pub fn standard_sources(
    explicit: Option<&Path>,
    prompt_dir: Option<&Path>,
    cwd: &Path,
    binary_dir: Option<&Path>,
    home: Option<&Path>,
) -> Vec<LayerSource> {
    let optional = |kind, path: PathBuf| LayerSource {
        kind,
        path,
        required: false,
    };
    let mut candidates = Vec::with_capacity(6);
    if let Some(path) = explicit {
        candidates.push(LayerSource {
            kind: LayerKind::Explicit,
            path: path.to_path_buf(),
            required: true,
        });
    }
    candidates.push(optional(LayerKind::WorkingDir, cwd.join(LOCAL_CONFIG_FILE)));
    if let Some(dir) = prompt_dir
        && !same_dir(dir, cwd)
    {
        candidates.push(optional(LayerKind::PromptDir, dir.join(LOCAL_CONFIG_FILE)));
    }
    if let Some(dir) = binary_dir {
        candidates.push(optional(LayerKind::BinaryDir, dir.join(LOCAL_CONFIG_FILE)));
    }
    if let Some(dir) = home {
        candidates.push(optional(LayerKind::Home, dir.join(HOME_CONFIG_FILE)));
    }
    candidates.push(optional(
        LayerKind::System,
        PathBuf::from(SYSTEM_CONFIG_FILE),
    ));
    dedup_sources(candidates)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Drops later sources that point at the same file as an earlier one. Existing files are
/// compared by canonical path, missing ones by their literal path.
fn dedup_sources(candidates: Vec<LayerSource>) -> Vec<LayerSource> {
    let mut seen: Vec<PathBuf> = Vec::with_capacity(candidates.len());
    let mut out = Vec::with_capacity(candidates.len());
    for source in candidates {
        let key = std::fs::canonicalize(&source.path).unwrap_or_else(|_| source.path.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(source);
    }
    out
}

/// Reads each existing source (a missing optional one is skipped, a missing required one is
/// an error), parses its JSON (the top level must be an object), reads the sibling
/// `.ai-agent.env`, and expands placeholders with lookup = that layer's env file, then
/// `process_env`. Env files are scoped: one layer's variables are invisible to the others.
/// The result keeps the order of `sources`.
pub fn load_layers(
    sources: &[LayerSource],
    process_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<LoadedLayer>, LayerError> {
    let mut layers = Vec::with_capacity(sources.len());
    for source in sources {
        if let Some(layer) = load_layer(source, process_env)? {
            layers.push(layer);
        }
    }
    Ok(layers)
}

fn load_layer(
    source: &LayerSource,
    process_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<LoadedLayer>, LayerError> {
    let path = &source.path;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if source.required {
                return Err(LayerError::ExplicitMissing { path: path.clone() });
            }
            return Ok(None);
        }
        Err(source) => {
            return Err(LayerError::Unreadable {
                path: path.clone(),
                source,
            });
        }
    };
    let mut value: Value = serde_json::from_str(&text).map_err(|e| invalid_json(path, &e))?;
    if !value.is_object() {
        return Err(LayerError::NotAnObject { path: path.clone() });
    }
    let env = read_env_file(&env_file_path(path))?;
    let lookup = |name: &str| env.get(name).cloned().or_else(|| process_env(name));
    expand_layer(&mut value, &path.display().to_string(), &lookup)?;
    Ok(Some(LoadedLayer {
        source: source.clone(),
        value,
    }))
}

fn invalid_json(path: &Path, e: &serde_json::Error) -> LayerError {
    let (line, column) = (e.line(), e.column());
    let full = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
    LayerError::InvalidJson {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// The `.ai-agent.env` next to a layer's JSON file.
fn env_file_path(config_path: &Path) -> PathBuf {
    match config_path.parent() {
        Some(dir) => dir.join(ENV_FILE_NAME),
        None => PathBuf::from(ENV_FILE_NAME),
    }
}

/// Reads and parses an env file; a missing one yields no variables.
fn read_env_file(path: &Path) -> Result<BTreeMap<String, String>, LayerError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(LayerError::Unreadable {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse_env_file(&text).map_err(|source| LayerError::EnvFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Where the merge currently is, as far as the special rules care.
#[derive(Clone, Copy)]
enum MergeAt {
    Root,
    /// Inside the top-level `queues` object.
    Queues,
    /// Inside `queues.<name>`.
    Queue,
    Elsewhere,
}

impl MergeAt {
    fn child(self, key: &str) -> Self {
        match (self, key) {
            (Self::Root, "queues") => Self::Queues,
            (Self::Queues, _) => Self::Queue,
            _ => Self::Elsewhere,
        }
    }
}

/// Deep-merges `higher` over `lower`: objects merge key by key recursively; any other value
/// (arrays and `null` included) in `higher` replaces the one in `lower`.
///
/// Exception (from the config contract): `queues.<name>.concurrent` — when both sides
/// define it as numbers, the larger number wins, whichever layer it comes from, so that a
/// lower layer can never be silently throttled by a higher one. Values are compared as
/// JSON numbers; if either side is not a number the normal rule (higher wins) applies.
pub fn deep_merge(lower: &mut Value, higher: Value) {
    merge_at(lower, higher, MergeAt::Root);
}

fn merge_at(lower: &mut Value, higher: Value, at: MergeAt) {
    match (lower, higher) {
        (Value::Object(lower_map), Value::Object(higher_map)) => {
            merge_maps(lower_map, higher_map, at);
        }
        (lower, higher) => *lower = higher,
    }
}

fn merge_maps(lower: &mut Map<String, Value>, higher: Map<String, Value>, at: MergeAt) {
    for (key, higher_value) in higher {
        let child_at = at.child(&key);
        match lower.get_mut(&key) {
            Some(lower_value) => {
                if matches!(at, MergeAt::Queue) && key == "concurrent" {
                    merge_concurrent(lower_value, higher_value);
                } else {
                    merge_at(lower_value, higher_value, child_at);
                }
            }
            None => {
                lower.insert(key, higher_value);
            }
        }
    }
}

/// `queues.<name>.concurrent`: the higher number wins regardless of layer.
fn merge_concurrent(lower: &mut Value, higher: Value) {
    let keep_lower = match (lower.as_number(), higher.as_number()) {
        (Some(l), Some(h)) => number_gt(l, h),
        _ => false,
    };
    if !keep_lower {
        *lower = higher;
    }
}

/// `a > b` for JSON numbers, exact for integers.
fn number_gt(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return a > b;
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return a > b;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// Merges loaded layers (given highest priority first) into one value: the lowest layer
/// first, each higher layer deep-merged over it. No layers gives `{}`.
pub fn merge_layers(layers: &[LoadedLayer]) -> Value {
    let mut merged = Value::Object(Map::new());
    for layer in layers.iter().rev() {
        deep_merge(&mut merged, layer.value.clone());
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;
    use tempfile::TempDir;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&path, text).unwrap();
        path
    }

    fn src(kind: LayerKind, path: PathBuf) -> LayerSource {
        LayerSource {
            kind,
            path,
            required: kind == LayerKind::Explicit,
        }
    }

    #[test]
    fn kind_display() {
        assert_eq!(LayerKind::Explicit.to_string(), "--config");
        assert_eq!(LayerKind::WorkingDir.to_string(), "cwd");
        assert_eq!(LayerKind::PromptDir.to_string(), "prompt dir");
        assert_eq!(LayerKind::BinaryDir.to_string(), "binary dir");
        assert_eq!(LayerKind::Home.to_string(), "home");
        assert_eq!(LayerKind::System.to_string(), "system");
    }

    #[test]
    fn standard_sources_order_and_paths() {
        let cwd = TempDir::new().unwrap();
        let prompt = TempDir::new().unwrap();
        let bin = TempDir::new().unwrap();
        let home = TempDir::new().unwrap();
        let explicit = cwd.path().join("custom.json");
        let sources = standard_sources(
            Some(&explicit),
            Some(prompt.path()),
            cwd.path(),
            Some(bin.path()),
            Some(home.path()),
        );
        let kinds: Vec<_> = sources.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                LayerKind::Explicit,
                LayerKind::WorkingDir,
                LayerKind::PromptDir,
                LayerKind::BinaryDir,
                LayerKind::Home,
                LayerKind::System,
            ]
        );
        assert_eq!(sources[0].path, explicit);
        assert!(sources[0].required);
        assert!(sources[1..].iter().all(|s| !s.required));
        assert_eq!(sources[1].path, cwd.path().join(".ai-agent.json"));
        assert_eq!(sources[2].path, prompt.path().join(".ai-agent.json"));
        assert_eq!(sources[3].path, bin.path().join(".ai-agent.json"));
        assert_eq!(
            sources[4].path,
            home.path().join(".ai-agent").join("ai-agent.json")
        );
        assert_eq!(sources[5].path, Path::new("/etc/ai-agent/ai-agent.json"));
    }

    #[test]
    fn standard_sources_optional_inputs_absent() {
        let cwd = TempDir::new().unwrap();
        let sources = standard_sources(None, None, cwd.path(), None, None);
        let kinds: Vec<_> = sources.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [LayerKind::WorkingDir, LayerKind::System]);
    }

    #[test]
    fn dedup_when_cwd_is_prompt_dir() {
        let cwd = TempDir::new().unwrap();
        write(cwd.path(), ".ai-agent.json", "{}");
        let sources = standard_sources(None, Some(cwd.path()), cwd.path(), None, None);
        assert!(sources.iter().all(|s| s.kind != LayerKind::PromptDir));
        assert_eq!(
            sources
                .iter()
                .filter(|s| s.path == cwd.path().join(".ai-agent.json"))
                .count(),
            1
        );

        // Same directory spelled differently (`dir/.`) is still recognised.
        let dotted = cwd.path().join(".");
        let sources = standard_sources(None, Some(&dotted), cwd.path(), None, None);
        assert!(sources.iter().all(|s| s.kind != LayerKind::PromptDir));
    }

    #[test]
    fn dedup_by_canonical_path_keeps_highest() {
        let cwd = TempDir::new().unwrap();
        write(cwd.path(), ".ai-agent.json", "{}");
        // The binary dir is the cwd, and --config points at the same file.
        let explicit = cwd.path().join("sub").join("..").join(".ai-agent.json");
        fs::create_dir_all(cwd.path().join("sub")).unwrap();
        let sources = standard_sources(Some(&explicit), None, cwd.path(), Some(cwd.path()), None);
        let kinds: Vec<_> = sources.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [LayerKind::Explicit, LayerKind::System]);
    }

    #[test]
    fn precedence_and_deep_merge() {
        let high = TempDir::new().unwrap();
        let low = TempDir::new().unwrap();
        let high_path = write(
            high.path(),
            ".ai-agent.json",
            r#"{"model": "high", "providers": {"openai": {"apiKey": "h"}}}"#,
        );
        let low_path = write(
            low.path(),
            ".ai-agent.json",
            r#"{"model": "low", "onlyLow": 1,
                "providers": {"openai": {"apiKey": "l", "baseUrl": "u"}, "other": {}}}"#,
        );
        let sources = [
            src(LayerKind::WorkingDir, high_path),
            src(LayerKind::Home, low_path),
        ];
        let layers = load_layers(&sources, &no_env).unwrap();
        assert_eq!(layers.len(), 2);
        assert_eq!(layers[0].source.kind, LayerKind::WorkingDir);
        let merged = merge_layers(&layers);
        assert_eq!(
            merged,
            json!({
                "model": "high",
                "onlyLow": 1,
                "providers": {"openai": {"apiKey": "h", "baseUrl": "u"}, "other": {}}
            })
        );
    }

    #[test]
    fn merge_of_no_layers_is_empty_object() {
        assert_eq!(merge_layers(&[]), json!({}));
    }

    #[test]
    fn deep_merge_nested_objects() {
        let mut lower = json!({"a": {"b": {"c": 1, "d": 2}, "e": 3}, "f": 4});
        deep_merge(&mut lower, json!({"a": {"b": {"c": 10, "x": 11}}, "g": 5}));
        assert_eq!(
            lower,
            json!({"a": {"b": {"c": 10, "d": 2, "x": 11}, "e": 3}, "f": 4, "g": 5})
        );
    }

    #[test]
    fn arrays_replaced_not_concatenated() {
        let mut lower = json!({"list": [1, 2, 3], "objs": [{"a": 1}]});
        deep_merge(&mut lower, json!({"list": [9], "objs": [{"b": 2}]}));
        assert_eq!(lower, json!({"list": [9], "objs": [{"b": 2}]}));
    }

    #[test]
    fn null_and_type_changes_replace() {
        let mut lower = json!({"a": {"x": 1}, "b": 1, "c": "s"});
        deep_merge(&mut lower, json!({"a": null, "b": {"y": 2}, "c": [1]}));
        assert_eq!(lower, json!({"a": null, "b": {"y": 2}, "c": [1]}));
    }

    #[test]
    fn queue_concurrency_max_wins() {
        let mut lower = json!({"queues": {
            "fast": {"concurrent": 8, "other": "low"},
            "slow": {"concurrent": 1},
            "onlyLow": {"concurrent": 3}
        }});
        deep_merge(
            &mut lower,
            json!({"queues": {
                "fast": {"concurrent": 2, "other": "high"},
                "slow": {"concurrent": 4},
                "onlyHigh": {"concurrent": 1}
            }}),
        );
        assert_eq!(
            lower,
            json!({"queues": {
                "fast": {"concurrent": 8, "other": "high"},
                "slow": {"concurrent": 4},
                "onlyLow": {"concurrent": 3},
                "onlyHigh": {"concurrent": 1}
            }})
        );
    }

    #[test]
    fn concurrency_rule_only_under_queues() {
        let mut lower = json!({"other": {"q": {"concurrent": 8}}, "concurrent": 8,
                               "nested": {"queues": {"q": {"concurrent": 8}}}});
        deep_merge(
            &mut lower,
            json!({"other": {"q": {"concurrent": 2}}, "concurrent": 2,
                   "nested": {"queues": {"q": {"concurrent": 2}}}}),
        );
        assert_eq!(
            lower,
            json!({"other": {"q": {"concurrent": 2}}, "concurrent": 2,
                   "nested": {"queues": {"q": {"concurrent": 2}}}})
        );
    }

    #[test]
    fn concurrency_non_number_falls_back_to_higher_wins() {
        let mut lower = json!({"queues": {"q": {"concurrent": 8}}});
        deep_merge(&mut lower, json!({"queues": {"q": {"concurrent": "auto"}}}));
        assert_eq!(lower, json!({"queues": {"q": {"concurrent": "auto"}}}));
    }

    #[test]
    fn queue_concurrency_across_three_layers() {
        let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new().unwrap()).collect();
        let values = [2, 7, 5];
        let sources: Vec<LayerSource> = dirs
            .iter()
            .zip(values)
            .map(|(d, n)| {
                let text = format!(r#"{{"queues": {{"default": {{"concurrent": {n}}}}}}}"#);
                src(
                    LayerKind::WorkingDir,
                    write(d.path(), ".ai-agent.json", &text),
                )
            })
            .collect();
        let merged = merge_layers(&load_layers(&sources, &no_env).unwrap());
        assert_eq!(merged, json!({"queues": {"default": {"concurrent": 7}}}));
    }

    #[test]
    fn env_file_scoped_to_its_layer() {
        let high = TempDir::new().unwrap();
        let low = TempDir::new().unwrap();
        let high_path = write(
            high.path(),
            ".ai-agent.json",
            r#"{"providers": {"openai": {"apiKey": "${LOW_ONLY}"}}}"#,
        );
        let low_path = write(low.path(), ".ai-agent.json", r#"{"x": "${LOW_ONLY}"}"#);
        write(low.path(), ".ai-agent.env", "LOW_ONLY=secret\n");

        // The lower layer alone sees its own variable.
        let layers = load_layers(&[src(LayerKind::Home, low_path.clone())], &no_env).unwrap();
        assert_eq!(layers[0].value, json!({"x": "secret"}));

        let sources = [
            src(LayerKind::WorkingDir, high_path.clone()),
            src(LayerKind::Home, low_path),
        ];
        let err = load_layers(&sources, &no_env).unwrap_err();
        let LayerError::Expand(ExpandError::MissingVariable(m)) = &err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(m.layer, high_path.display().to_string());
        assert_eq!(m.key_path, "providers.openai.apiKey");
        assert_eq!(m.variable, "LOW_ONLY");
        assert!(err.to_string().contains(&high_path.display().to_string()));
    }

    #[test]
    fn env_file_beats_process_env() {
        let dir = TempDir::new().unwrap();
        let path = write(
            dir.path(),
            ".ai-agent.json",
            r#"{"a": "${SHARED}", "b": "${PROC_ONLY}", "c": "${EMPTY_IN_FILE:-d}"}"#,
        );
        write(
            dir.path(),
            ".ai-agent.env",
            "# layer vars\nexport SHARED=from-file\nEMPTY_IN_FILE=\n",
        );
        let process_env = |name: &str| match name {
            "SHARED" => Some("from-process".to_owned()),
            "PROC_ONLY" => Some("proc".to_owned()),
            "EMPTY_IN_FILE" => Some("proc-value".to_owned()),
            _ => None,
        };
        let layers = load_layers(&[src(LayerKind::WorkingDir, path)], &process_env).unwrap();
        assert_eq!(
            layers[0].value,
            json!({"a": "from-file", "b": "proc", "c": "d"})
        );
    }

    #[test]
    fn explicit_missing_is_error() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("nope.json");
        let err = load_layers(&[src(LayerKind::Explicit, path.clone())], &no_env).unwrap_err();
        match &err {
            LayerError::ExplicitMissing { path: p } => assert_eq!(p, &path),
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn optional_missing_files_skipped() {
        let dir = TempDir::new().unwrap();
        let present = write(dir.path(), "present/.ai-agent.json", r#"{"a": 1}"#);
        let sources = [
            src(
                LayerKind::WorkingDir,
                dir.path().join("missing/.ai-agent.json"),
            ),
            src(LayerKind::Home, present),
            src(LayerKind::System, dir.path().join("also-missing.json")),
        ];
        let layers = load_layers(&sources, &no_env).unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0].source.kind, LayerKind::Home);
        assert_eq!(merge_layers(&layers), json!({"a": 1}));
    }

    #[test]
    fn invalid_json_names_file_and_line() {
        let dir = TempDir::new().unwrap();
        let path = write(
            dir.path(),
            ".ai-agent.json",
            "{\n  \"a\": 1,\n  \"b\": ,\n}\n",
        );
        let err = load_layers(&[src(LayerKind::WorkingDir, path.clone())], &no_env).unwrap_err();
        match &err {
            LayerError::InvalidJson {
                path: p,
                line,
                column,
                message,
            } => {
                assert_eq!(p, &path);
                assert_eq!(*line, 3);
                assert!(*column > 0);
                assert!(!message.contains("at line"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("line 3"), "{text}");
    }

    #[test]
    fn top_level_must_be_object() {
        let dir = TempDir::new().unwrap();
        let path = write(dir.path(), ".ai-agent.json", "[1, 2]");
        let err = load_layers(&[src(LayerKind::WorkingDir, path.clone())], &no_env).unwrap_err();
        assert!(matches!(&err, LayerError::NotAnObject { path: p } if p == &path));
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn bad_env_file_names_env_file_and_line() {
        let dir = TempDir::new().unwrap();
        let path = write(dir.path(), ".ai-agent.json", "{}");
        let env_path = write(dir.path(), ".ai-agent.env", "A=1\nbroken line\n");
        let err = load_layers(&[src(LayerKind::WorkingDir, path)], &no_env).unwrap_err();
        match &err {
            LayerError::EnvFile { path, source } => {
                assert_eq!(path, &env_path);
                assert_eq!(source.line, 2);
            }
            other => panic!("unexpected {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&env_path.display().to_string()), "{text}");
        assert!(text.contains("line 2"), "{text}");
    }

    #[test]
    fn unreadable_config_is_error() {
        let dir = TempDir::new().unwrap();
        // A directory where the file should be: exists, but cannot be read as a file.
        let path = dir.path().join(".ai-agent.json");
        fs::create_dir_all(&path).unwrap();
        let err = load_layers(&[src(LayerKind::WorkingDir, path.clone())], &no_env).unwrap_err();
        assert!(matches!(&err, LayerError::Unreadable { path: p, .. } if p == &path));
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn protected_placeholders_survive_loading() {
        let dir = TempDir::new().unwrap();
        let path = write(
            dir.path(),
            ".ai-agent.json",
            r#"{"mcpServers": {"s": {"command": "${BIN}", "env": {"T": "${T}"}}},
                "restTools": {"t": {"url": "https://x/${parameters.id}"}}}"#,
        );
        write(dir.path(), ".ai-agent.env", "BIN=/usr/bin/srv\n");
        let layers = load_layers(&[src(LayerKind::WorkingDir, path)], &no_env).unwrap();
        assert_eq!(
            layers[0].value,
            json!({"mcpServers": {"s": {"command": "/usr/bin/srv", "env": {"T": "${T}"}}},
                   "restTools": {"t": {"url": "https://x/${parameters.id}"}}})
        );
    }
}

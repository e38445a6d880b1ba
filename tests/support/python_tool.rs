//! Published Python tools the tests run (`mcp-server-time`, `schemathesis`): found through an
//! environment variable, else in `.ci/venv`, installed there with pip (pinned) when missing so
//! `cargo test` works on a fresh clone; `.ci/run` installs the same versions.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One pinned tool.
pub struct PythonTool {
    /// The command in the venv's `bin/`.
    pub binary: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Overrides where the command is.
    pub env_var: &'static str,
}

/// One pip at a time: tests run in parallel and share the venv.
static INSTALLING: Mutex<()> = Mutex::new(());

/// The tool's command, installed first if it is missing; panics saying how to install it.
pub fn installed(tool: &PythonTool) -> PathBuf {
    if let Some(path) = std::env::var_os(tool.env_var) {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv");
    let binary = venv.join("bin").join(tool.binary);
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let outcome = if binary.exists() {
        Ok(())
    } else {
        install(&venv, &format!("{}=={}", tool.package, tool.version))
    };
    match outcome {
        Ok(()) if binary.exists() => binary,
        other => panic!(
            "{} is missing ({other:?}): install it with `python3 -m venv .ci/venv && \
             .ci/venv/bin/pip install {}=={}`, or point {} at it",
            tool.package, tool.package, tool.version, tool.env_var
        ),
    }
}

fn install(venv: &Path, package: &str) -> Result<(), String> {
    let run = |program: &Path, args: &[&str]| {
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} {args:?} exited with {status}",
                program.display()
            ))
        }
    };
    if !venv.join("bin/pip").exists() {
        run(
            Path::new("python3"),
            &["-m", "venv", &venv.display().to_string()],
        )?;
    }
    run(
        &venv.join("bin/pip"),
        &["install", "--quiet", "--disable-pip-version-check", package],
    )
}

//! Published Python tools and clients the tests run (`mcp-server-time`, `schemathesis`, the SDKs
//! and client libraries): found through an environment variable or in a venv under `.ci/`,
//! installed there with pip (pinned) when missing so `cargo test` works on a fresh clone;
//! `scripts/test` installs the same versions.

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

/// `.ci/VENV/bin/python` able to `import` each of `modules`, after installing the pinned
/// `packages` there when one is missing; panics saying how to install them.
pub fn python_with(venv: &str, modules: &[&str], packages: &[&str]) -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci").join(venv);
    let python = venv.join("bin/python");
    let imports = format!("import {}", modules.join(", "));
    let importable = || {
        std::process::Command::new(&python)
            .args(["-c", &imports])
            .status()
            .is_ok_and(|s| s.success())
    };
    if importable() {
        return python;
    }
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if importable() {
        return python; // Another test installed them meanwhile.
    }
    let outcome = install_all(&venv, packages);
    assert!(
        outcome.is_ok() && importable(),
        "{} cannot `{imports}` ({outcome:?}): run scripts/test --setup-only, or `{} -m pip \
         install {}`",
        venv.display(),
        python.display(),
        packages.join(" ")
    );
    python
}

fn install(venv: &Path, package: &str) -> Result<(), String> {
    install_all(venv, &[package])
}

fn install_all(venv: &Path, packages: &[&str]) -> Result<(), String> {
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
    let mut args = vec!["install", "--quiet", "--disable-pip-version-check"];
    args.extend_from_slice(packages);
    run(&venv.join("bin/pip"), &args)
}

/// Runs `tests/sdk/SCRIPT` with `python` and `args` (killed past two minutes); its stdout once it
/// succeeded, else the test fails with its output.
pub async fn run_sdk_script(python: PathBuf, script: &str, args: &[String]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(script);
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the script ends within 2 minutes")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

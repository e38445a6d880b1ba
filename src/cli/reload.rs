//! `agentd serve`'s hot reload: on SIGHUP, and when a config file or an agent file changes
//! (looked for every `server.reloadCheckSeconds`), the configuration is loaded again with the
//! command line's overrides and its agents handed to [`Runtime::reload_agents`]. A file that does
//! not load is logged as an error and the running agents stay; runs in flight are never touched.

use crate::audit::{Actor, AuditAction, AuditEvent, AuditOutcome};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::signal::unix::Signal;
use tracing::{error, info, warn};

use crate::config::{self, Config, LoadOptions, LoadedConfig};
use crate::runtime::Runtime;

/// What the command line changes in the loaded configuration, applied again at every reload.
#[derive(Debug, Clone, Default)]
pub struct ServeOverrides {
    pub config: Option<PathBuf>,
    pub agents: Vec<PathBuf>,
    pub listen: Option<String>,
    pub database: Option<String>,
}

impl ServeOverrides {
    /// The configuration as `agentd serve` runs it.
    pub fn load(&self) -> Result<LoadedConfig, config::ConfigError> {
        let mut loaded = config::load(&LoadOptions {
            explicit: self.config.clone(),
            prompt_dir: None,
        })?;
        let config = &mut loaded.config;
        config.agents.extend(self.agents.iter().cloned());
        if let Some(listen) = &self.listen {
            config.server.listen = listen.clone();
        }
        if let Some(database) = &self.database {
            config.store.url = database.clone();
        }
        Ok(loaded)
    }
}

/// Watches the files of the running configuration and reloads on change or SIGHUP until
/// dropped (the task is aborted with it).
pub struct Reloader {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reloader {
    pub fn start(
        runtime: Arc<Runtime>,
        overrides: ServeOverrides,
        running: &LoadedConfig,
        hangups: Signal,
    ) -> Self {
        let watch = Watch {
            runtime,
            overrides,
            running_config: running.merged.clone(),
            fingerprint: fingerprint(&running.files, &running.config),
        };
        let every = running.config.server.reload_check_seconds;
        Self {
            task: tokio::spawn(watch.run(hangups, every)),
        }
    }
}

struct Watch {
    runtime: Arc<Runtime>,
    overrides: ServeOverrides,
    /// The merged JSON the process started with: what needs a restart is judged against it.
    running_config: Value,
    fingerprint: Vec<FileStamp>,
}

impl Watch {
    async fn run(mut self, mut hangups: Signal, every_seconds: u64) {
        let mut ticks = (every_seconds > 0).then(|| {
            let mut ticks = tokio::time::interval(Duration::from_secs(every_seconds));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks
        });
        loop {
            let changed = tokio::select! {
                signal = hangups.recv() => match signal {
                    Some(()) => true,
                    None => return,
                },
                () = tick(ticks.as_mut()) => self.files_changed().await,
            };
            if changed {
                self.reload().await;
            }
        }
    }

    async fn files_changed(&self) -> bool {
        let overrides = self.overrides.clone();
        let current = tokio::task::spawn_blocking(move || match overrides.load() {
            Ok(loaded) => fingerprint(&loaded.files, &loaded.config),
            // A configuration that does not load is judged by its own file alone.
            Err(_) => broken_config_stamps(&overrides),
        })
        .await;
        current.map_or(true, |stamps| stamps != self.fingerprint)
    }

    async fn reload(&mut self) {
        let overrides = self.overrides.clone();
        let loaded = match tokio::task::spawn_blocking(move || overrides.load()).await {
            Ok(loaded) => loaded,
            Err(join) => {
                error!(error = %join, "reload: loading the configuration crashed");
                return;
            }
        };
        match loaded {
            Err(problem) => {
                // Remember the broken state so it is reported once, not at every check.
                self.fingerprint = broken_config_stamps(&self.overrides);
                error!(error = %problem, "reload: the configuration does not load; the running agents stay");
            }
            Ok(loaded) => {
                self.fingerprint = fingerprint(&loaded.files, &loaded.config);
                let event = self.apply(&loaded);
                crate::audit::record_or_log(self.runtime.store().as_ref(), event).await;
            }
        }
    }

    /// Applies the reload and says what the audit log records of it.
    fn apply(&self, loaded: &LoadedConfig) -> AuditEvent {
        let audited = |outcome: AuditOutcome, details: serde_json::Value| {
            AuditEvent::new(Actor::system(), AuditAction::ConfigReloaded, "config")
                .with_outcome(outcome)
                .with_details(details)
        };
        match self
            .runtime
            .reload_agents(&loaded.config, &self.running_config, &loaded.merged)
        {
            Ok(report) => {
                info!(
                    agents = self.runtime.agents().len(),
                    added = ?report.added,
                    removed = ?report.removed,
                    changed = ?report.changed,
                    "reload: agents reloaded"
                );
                if !report.needs_restart.is_empty() {
                    warn!(keys = ?report.needs_restart, "reload: these configuration keys changed and apply at the next start");
                }
                audited(
                    AuditOutcome::Success,
                    serde_json::json!({
                        "added": report.added,
                        "removed": report.removed,
                        "changed": report.changed,
                    }),
                )
            }
            Err(problem) => {
                error!(error = %problem, "reload: the new agents cannot run here; the running agents stay");
                audited(
                    AuditOutcome::Failed,
                    serde_json::json!({ "error": problem.to_string() }),
                )
            }
        }
    }
}

/// Waits for the next tick, or forever when the watch is off.
async fn tick(ticks: Option<&mut tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A file as last seen: its path, modification time and length.
#[derive(Debug, Clone, PartialEq)]
struct FileStamp {
    path: PathBuf,
    modified: Option<SystemTime>,
    len: u64,
}

/// The config files and every `.ai` file of the agent directories, sorted.
fn fingerprint(files: &[PathBuf], config: &Config) -> Vec<FileStamp> {
    let agent_files = config.agents.iter().flat_map(|dir| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "ai"))
    });
    let mut stamps: Vec<FileStamp> = files
        .iter()
        .cloned()
        .chain(agent_files)
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            FileStamp {
                modified: meta.as_ref().and_then(|m| m.modified().ok()),
                len: meta.map_or(0, |m| m.len()),
                path,
            }
        })
        .collect();
    stamps.sort_by(|a, b| a.path.cmp(&b.path));
    stamps
}

/// The stamps of the explicit config file alone, when the whole configuration does not load.
fn broken_config_stamps(overrides: &ServeOverrides) -> Vec<FileStamp> {
    fingerprint(overrides.config.as_slice(), &Config::default())
}

//! SIGINT, SIGTERM and SIGHUP for `agentd serve`. The handlers are installed before the listener
//! binds, so a signal that arrives during start-up is never the default "die at once". The first
//! SIGINT or SIGTERM starts the graceful shutdown; a second one exits immediately. SIGHUP reloads
//! the configuration's agents.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};

/// Exit status after a second signal cut the graceful shutdown short.
const EXIT_INTERRUPTED: i32 = 130;

/// Every SIGHUP from now on (a reload request), instead of the default of terminating.
pub fn hangups() -> std::io::Result<tokio::signal::unix::Signal> {
    signal(SignalKind::hangup())
}

/// Resolves at the first SIGINT or SIGTERM.
pub fn install() -> std::io::Result<impl Future<Output = ()> + Send> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down: draining running sessions (a second signal exits at once)");
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            eprintln!("agentd: second signal: exiting now");
            std::process::exit(EXIT_INTERRUPTED);
        });
    })
}

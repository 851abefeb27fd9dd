//! What both daemons do the same way: logging set-up and systemd notifications.

use std::str::FromStr;
use std::time::Duration;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::error::{Error, Result};

/// Installs the global subscriber. `filter` is a level (`info`) or comma-separated
/// `target=level` directives (`info,quinn=warn`); `Targets` instead of `EnvFilter` keeps the regex
/// engine out of the binaries.
pub fn init_logging(filter: &str) -> Result<()> {
    let targets = Targets::from_str(filter).map_err(|e| Error::Config {
        path: "--log".into(),
        message: format!("bad log filter {filter:?}: {e}"),
    })?;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .with(targets)
        .try_init()
        .map_err(|e| Error::Config {
            path: "--log".into(),
            message: e.to_string(),
        })
}

/// Tells systemd the service is ready (a no-op outside systemd).
pub fn notify_ready(status: &str) {
    let _ = sd_notify::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(status),
    ]);
}

pub fn notify_stopping() {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
}

pub fn notify_watchdog() {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
}

/// How often to pet systemd's watchdog: half its timeout, or `None` when it is off.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|timeout| timeout / 2)
}

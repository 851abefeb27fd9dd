//! The coordinator's configuration file (TOML). See `coordinator/coordinator.example.toml`.

use std::net::SocketAddr;
use std::path::PathBuf;

use demeter_common::tls::TlsPaths;
use serde::{Deserialize, Serialize};

use crate::ingest::IngestConfig;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorConfig {
    /// UDP address the QUIC server listens on for agents and CLI peers.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The durable store (a redb file); created if missing.
    #[serde(default = "default_store")]
    pub store: PathBuf,
    /// Log filter: a level (`info`) or `target=level` directives (`info,quinn=warn`).
    #[serde(default = "default_log")]
    pub log: String,
    /// The cluster CA and this coordinator's certificate (role `coordinator`).
    pub tls: TlsPaths,
    #[serde(default)]
    pub ingest: IngestConfig,
    #[serde(default)]
    pub flink: FlinkConfig,
    #[serde(default)]
    pub executor: ExecutorConfig,
    /// Jobs Demeter tunes live (`[[tuning.jobs]]`); see `crate::tuner::settings`.
    #[serde(default)]
    pub tuning: crate::tuner::TuningConfig,
}

/// Where the executor runs TaskManagers, and how the daemon watches jobs (the `[executor]`
/// table).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorConfig {
    /// Cluster name carried in TaskManager specs; the agents map it to a Flink home.
    pub cluster: Option<String>,
    /// Agents that run TaskManagers, in placement order; empty means every connected agent.
    pub agents: Vec<String>,
    /// At start, how long to wait for `agents` to reconnect before resuming operations left
    /// in flight without them (their TaskManager steps then fail and roll back, retried).
    pub resume_wait_secs: u64,
    #[serde(default)]
    pub watchdog: WatchdogConfig,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            cluster: None,
            agents: Vec::new(),
            resume_wait_secs: 120,
            watchdog: WatchdogConfig::default(),
        }
    }
}

/// The job watchdog (the `[executor.watchdog]` table): a registered job that is neither
/// RUNNING nor under an operation for `grace_secs` is restarted from its newest snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    pub enabled: bool,
    /// Lets Flink's own restart strategy work first.
    pub grace_secs: u64,
    /// Seconds between two looks at every job.
    pub interval_secs: u64,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            grace_secs: 60,
            interval_secs: 5,
        }
    }
}

/// How the coordinator reaches Flink (the `[flink]` table).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlinkConfig {
    /// The JobManager's REST API, e.g. `http://127.0.0.1:8081`.
    pub rest_url: String,
}

impl Default for FlinkConfig {
    fn default() -> Self {
        Self {
            rest_url: "http://127.0.0.1:8081".to_string(),
        }
    }
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 7443))
}

fn default_store() -> PathBuf {
    PathBuf::from("/var/lib/demeter/coordinator.redb")
}

fn default_log() -> String {
    "info".to_string()
}

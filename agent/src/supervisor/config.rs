//! The agent config's `[supervisor]` table. See `agent/agent.example.toml`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// TaskManagers are the agent's child processes (local mode, tests, the lab).
    Child,
    /// TaskManagers are `flink-taskmanager@<id>.service` units (production).
    Systemd,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorConfig {
    pub backend: BackendKind,
    /// Milliseconds between SIGTERM (or `systemctl stop`) and SIGKILL when stopping.
    #[serde(default = "default_stop_grace_ms")]
    pub stop_grace_ms: u64,
    /// Child backend: cluster name (as in `TaskManagerSpec::cluster`) → its Flink paths.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterPaths>,
    /// Child backend: put each TaskManager in a cgroup with its CPU limit when the host allows.
    #[serde(default = "yes")]
    pub enforce_cpu: bool,
    #[serde(default)]
    pub systemd: SystemdConfig,
}

/// Where a local Flink cluster lives (what `scripts/flink-lab.sh env NAME` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterPaths {
    /// `FLINK_HOME`: holds `bin/taskmanager.sh`.
    pub flink_home: PathBuf,
    /// `FLINK_CONF_DIR`: the cluster's `config.yaml` (JobManager address and the rest).
    pub conf_dir: PathBuf,
    /// `FLINK_LOG_DIR`: Flink's logs, and the agent's `taskmanager-<id>.out` (stdout/stderr).
    pub log_dir: PathBuf,
    /// `FLINK_PID_DIR`; defaults to `log_dir`. Pid files are per TaskManager
    /// (`FLINK_IDENT_STRING=taskmanager-<id>`), so sharing the cluster's pid dir is safe.
    #[serde(default)]
    pub pid_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SystemdConfig {
    /// The one cluster the units join (their `FLINK_CONF_DIR` is fixed by the unit); orders for
    /// another cluster are refused.
    pub cluster: String,
    /// Unit name before the instance: units are `<unit_prefix><id>.service`.
    pub unit_prefix: String,
    /// Where the instance files `<id>.env` go (the unit's launcher reads them).
    pub env_dir: PathBuf,
    pub systemctl: PathBuf,
    /// Milliseconds between `systemctl show` polls that notice a unit failing.
    pub poll_interval_ms: u64,
}

impl Default for SystemdConfig {
    fn default() -> Self {
        Self {
            cluster: "default".to_string(),
            unit_prefix: "flink-taskmanager@".to_string(),
            env_dir: PathBuf::from("/etc/flink/taskmanagers"),
            systemctl: PathBuf::from("/usr/bin/systemctl"),
            poll_interval_ms: 2000,
        }
    }
}

fn default_stop_grace_ms() -> u64 {
    30_000
}

fn yes() -> bool {
    true
}

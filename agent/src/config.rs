//! The agent's configuration file (TOML). See `agent/agent.example.toml`.

use demeter_common::tls::TlsPaths;
use serde::{Deserialize, Serialize};

use crate::collectors::SamplerConfig;
use crate::supervisor::config::SupervisorConfig;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The coordinator's QUIC address, `host:port` (UDP); a name is resolved at every dial, so
    /// a coordinator that moves is found again.
    pub coordinator: String,
    /// The name in the coordinator's certificate; the agent refuses a coordinator without it.
    #[serde(default = "default_server_name")]
    pub server_name: String,
    /// Log filter: a level (`info`) or `target=level` directives (`info,quinn=warn`).
    #[serde(default = "default_log")]
    pub log: String,
    /// The cluster CA and this node's certificate (role `agent`); the certificate's name is the
    /// agent's identity.
    pub tls: TlsPaths,
    #[serde(default)]
    pub sampling: SamplingConfig,
    #[serde(default)]
    pub collectors: SamplerConfig,
    /// Runs Flink TaskManagers on the coordinator's order; absent = this agent only samples.
    #[serde(default)]
    pub supervisor: Option<SupervisorConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingConfig {
    /// Milliseconds between samples.
    pub interval_ms: u64,
    /// Samples per batch sent to the coordinator.
    pub batch_size: usize,
    /// Most samples kept while the coordinator is unreachable (1 h at 1 Hz by default); beyond
    /// it the oldest are dropped, and the log says which.
    pub buffer_samples: usize,
    /// First reconnect delay in milliseconds; doubles per failed attempt, with jitter.
    pub reconnect_initial_ms: u64,
    /// Longest reconnect delay in milliseconds.
    pub reconnect_max_ms: u64,
    /// On shutdown, how long to wait for the coordinator to acknowledge what is buffered.
    pub shutdown_grace_ms: u64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            interval_ms: 1000,
            batch_size: 5,
            buffer_samples: 3600,
            reconnect_initial_ms: 200,
            reconnect_max_ms: 10_000,
            shutdown_grace_ms: 5_000,
        }
    }
}

fn default_server_name() -> String {
    "coordinator".to_string()
}

fn default_log() -> String {
    "info".to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::supervisor::config::BackendKind;

    #[test]
    fn the_example_config_parses_with_every_supervisor_field() {
        let config: AgentConfig = toml::from_str(include_str!("../agent.example.toml")).unwrap();
        let supervisor = config.supervisor.unwrap();
        assert_eq!(supervisor.backend, BackendKind::Child);
        assert_eq!(supervisor.stop_grace_ms, 30_000);
        let lab = &supervisor.clusters["lab"];
        assert!(lab.pid_dir.is_some());
        assert_eq!(supervisor.systemd.poll_interval_ms, 2000);
    }
}

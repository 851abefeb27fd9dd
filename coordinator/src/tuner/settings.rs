//! The `[tuning]` table of the coordinator's configuration: which registered jobs Demeter tunes
//! live, with which policy, and where their profiling copies run. A registered job not listed
//! here is only watched (the watchdog) and changed on request (`job apply`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::policy::demeter::DemeterConfig;
use crate::profiler::{PortRange, Resources, Times};
use crate::{Error, Result};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuningConfig {
    /// One entry per tuned job (`[[tuning.jobs]]`).
    pub jobs: Vec<JobTuning>,
}

/// How one job is tuned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobTuning {
    /// The registered job's name (`job register --name`).
    pub job: String,
    /// `demeter` (forecast, models, profiling, proactive moves), `reactive` (the Flink
    /// autoscaler's rule, parallelism only) or `static` (never changes anything; for
    /// comparisons).
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Seconds between two readings of production (one policy tick each).
    #[serde(default = "default_period")]
    pub period_secs: u64,
    /// The job's p95 latency metric, read from every non-source vertex (max over subtasks).
    #[serde(default = "default_latency_metric")]
    pub latency_metric: String,
    /// A source gauge holding the rate the sources are asked to emit (the benchmark job's
    /// `targetRateTotal`); without it the offered rate is what the sources emitted plus the
    /// growth of `pendingRecords`.
    #[serde(default)]
    pub offered_rate_metric: Option<String>,
    /// Seed of the policy's randomness (hyperparameter restarts), for reproducible runs.
    #[serde(default)]
    pub seed: u64,
    /// Knobs of the Demeter policy (`[tuning.jobs.demeter]`); unset ones keep their defaults.
    #[serde(default)]
    pub demeter: DemeterConfig,
    /// Where profiling copies run; without it the policy is told every batch measured nothing
    /// and moves only to configurations production itself measured.
    #[serde(default)]
    pub profiling: Option<ProfilingSettings>,
    /// Append every tick the policy sees to this file (JSON lines), so `demeter-coordinator
    /// replay` can show offline what a policy (or other knobs) would have done.
    #[serde(default)]
    pub record_ticks: Option<PathBuf>,
}

/// Profiling copies of one job, small Flink clusters of their own (`[tuning.jobs.profiling]`):
/// the JobManager on the coordinator's host, the TaskManagers on the agents' nodes with the
/// most room or on the coordinator's host ([`CopiesOn`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilingSettings {
    /// Program arguments of a copy; `{rate}` becomes the forecast rate and `{output}` the
    /// copy's own output directory (e.g. `--rate {rate} --output {output}`).
    pub args: String,
    /// The Flink distribution copies run from.
    pub flink_home: PathBuf,
    /// Each copy gets `<work_dir>/<copy>/` and nothing else on disk.
    pub work_dir: PathBuf,
    /// REST and JobManager RPC ports of the copies (copy i takes the i-th free pair).
    #[serde(default = "default_rest_ports")]
    pub rest_ports: PortRange,
    #[serde(default = "default_rpc_ports")]
    pub rpc_ports: PortRange,
    /// Never more than this for all copies together (production always wins: copies are
    /// recalled when production reconfigures, and when free memory falls below the reserve).
    #[serde(default = "default_cap")]
    pub cap: Resources,
    /// Memory (MiB) this host keeps free for production (copies on this host).
    #[serde(default = "default_host_reserve")]
    pub host_reserve_mb: u32,
    /// Where the copies' TaskManagers run.
    #[serde(default)]
    pub copies_on: CopiesOn,
    /// Kept free on every agent's node for production (idle cores and available memory, per
    /// the agent's newest sample); copies go only where more is left.
    #[serde(default = "default_node_reserve")]
    pub node_reserve: Resources,
    /// Whether a node's idle CPU (less the reserve) must hold a copy TaskManager's CPU limit;
    /// `false`: memory only, CPU bounded by the cap and the TaskManagers' CPU limits (for
    /// shared machines whose idle CPU says little, like a CI runner).
    #[serde(default = "yes")]
    pub node_cpu_check: bool,
    /// The agents' cluster name whose `FLINK_HOME` and conf dir copy TaskManagers start from
    /// (they join the copy's JobManager through dynamic properties); default: the executor's
    /// `[executor] cluster`.
    #[serde(default)]
    pub agent_cluster: Option<String>,
    /// The address agents' TaskManagers reach the copies' JobManagers (on this host) at;
    /// anything but loopback makes the copies' JobManagers listen on every interface.
    #[serde(default = "crate::profiler::plan::loopback")]
    pub jobmanager_address: String,
    #[serde(default = "default_jm_memory")]
    pub jm_memory_mb: u32,
    /// Warm-up, measurement window and recovery cap of a copy, in seconds.
    #[serde(default = "default_warmup")]
    pub warmup_secs: u64,
    #[serde(default = "default_measure")]
    pub measure_secs: u64,
    #[serde(default = "default_max_recovery")]
    pub max_recovery_secs: u64,
}

/// Where profiling copies' TaskManagers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopiesOn {
    /// On the agents when any (of `[executor] agents`, or any connected) has a recent sample —
    /// production's TaskManagers run there in the daemon — otherwise on this host, logged.
    #[default]
    Auto,
    /// Only on the agents: a batch without one fails.
    Agents,
    /// Only on the coordinator's host, as child processes.
    Local,
}

impl ProfilingSettings {
    pub fn times(&self) -> Times {
        Times {
            warmup_ms: self.warmup_secs * 1000,
            measure_ms: self.measure_secs * 1000,
            max_recovery_ms: self.max_recovery_secs * 1000,
            ..Times::default()
        }
    }
}

impl JobTuning {
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::Policy(format!("[tuning] job {}: {m}", self.job)));
        if !["demeter", "reactive", "static"].contains(&self.policy.as_str()) {
            return fail(format!(
                "policy {:?} is not demeter, reactive or static",
                self.policy
            ));
        }
        if self.period_secs == 0 {
            return fail("period_secs must be positive".into());
        }
        if let Some(p) = &self.profiling
            && !p.args.contains("{rate}")
        {
            return fail("profiling.args must contain {rate}".into());
        }
        self.demeter.validate()
    }
}

fn default_policy() -> String {
    "demeter".into()
}
fn default_period() -> u64 {
    1
}
fn default_latency_metric() -> String {
    "window.latencyP95Ms".into()
}
fn default_rest_ports() -> PortRange {
    PortRange {
        first: 18500,
        count: 20,
    }
}
fn default_rpc_ports() -> PortRange {
    PortRange {
        first: 16500,
        count: 20,
    }
}
fn default_cap() -> Resources {
    Resources {
        cpu_cores: 4.0,
        memory_mb: 8192.0,
    }
}
fn default_host_reserve() -> u32 {
    2048
}
fn yes() -> bool {
    true
}
fn default_node_reserve() -> Resources {
    Resources {
        cpu_cores: 1.0,
        memory_mb: 2048.0,
    }
}
fn default_jm_memory() -> u32 {
    768
}
fn default_warmup() -> u64 {
    120
}
fn default_measure() -> u64 {
    60
}
fn default_max_recovery() -> u64 {
    180
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_entry_gets_documented_defaults_and_bad_ones_are_refused() {
        let config: TuningConfig = toml::from_str(
            r#"
            [[jobs]]
            job = "bench"
            offered_rate_metric = "targetRateTotal"
            [jobs.demeter]
            optimise_every_s = 60
            [jobs.profiling]
            args = "--rate {rate}"
            flink_home = "/opt/flink"
            work_dir = "/var/lib/demeter/profiling"
            rest_ports = { first = 18600, count = 10 }
            "#,
        )
        .unwrap();
        let job = &config.jobs[0];
        assert_eq!(job.policy, "demeter");
        assert_eq!(job.demeter.optimise_every_s, 60);
        assert_eq!(
            job.demeter.risk_check_every_s,
            DemeterConfig::default().risk_check_every_s
        );
        let profiling = job.profiling.as_ref().unwrap();
        assert_eq!(profiling.rest_ports.first, 18600);
        assert_eq!(profiling.copies_on, CopiesOn::Auto);
        assert_eq!(profiling.jobmanager_address, "127.0.0.1");
        assert_eq!(profiling.node_reserve, default_node_reserve());
        job.validate().unwrap();
        let on_agents: ProfilingSettings = toml::from_str(
            "args = \"--rate {rate}\"\nflink_home = \"/f\"\nwork_dir = \"/w\"\n\
             copies_on = \"agents\"\nnode_reserve = { cpu_cores = 0.5, memory_mb = 1024.0 }\n",
        )
        .unwrap();
        assert_eq!(on_agents.copies_on, CopiesOn::Agents);
        assert_eq!(on_agents.node_reserve.memory_mb, 1024.0);
        assert!(on_agents.node_cpu_check);
        let mut bad = job.clone();
        bad.policy = "oracle".into();
        assert!(bad.validate().unwrap_err().to_string().contains("oracle"));
        let mut bad = job.clone();
        bad.profiling.as_mut().unwrap().args = "--rate 5".into();
        assert!(bad.validate().is_err());
    }
}

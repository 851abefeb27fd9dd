//! The configuration of a managed Flink job and the discrete space Demeter searches.
//!
//! A [`JobConfig`] is what a reconfiguration changes: parallelism, task slots per TaskManager,
//! TaskManager memory and CPU, and the checkpoint interval. Its cost (total CPU and memory) is a
//! *known* function of the configuration, so it is computed here, not learned.
//!
//! A [`SearchSpace`] is a grid per dimension (after the Demeter paper's artifact) plus validity
//! rules, loaded from TOML so a job's registration can carry it. It also maps
//! (configuration, rate) to the Gaussian process' unit-cube inputs.

use std::fmt;

use super::change::to_u32;
pub use super::change::{ConfigChange, apply_change, parse_change};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Number of GP input dimensions: five configuration dimensions and the input rate.
pub const INPUT_DIMS: usize = 6;

/// One deployable configuration of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobConfig {
    pub parallelism: u32,
    pub slots_per_tm: u32,
    pub tm_memory_mb: u32,
    /// CPU per TaskManager in thousandths of a core (integer so configs can be hashed and compared).
    pub tm_cpu_millis: u32,
    pub checkpoint_interval_s: u32,
}

impl JobConfig {
    /// TaskManagers needed: Flink fills every slot of a TaskManager before starting another.
    pub fn task_managers(&self) -> u32 {
        self.parallelism.div_ceil(self.slots_per_tm.max(1))
    }

    /// Same TaskManager process shape (slots, memory, CPU): one's TaskManagers can run the
    /// other without a JVM restart.
    pub fn same_taskmanager_shape(&self, other: &JobConfig) -> bool {
        self.slots_per_tm == other.slots_per_tm
            && self.tm_memory_mb == other.tm_memory_mb
            && self.tm_cpu_millis == other.tm_cpu_millis
    }

    pub fn tm_cpu_cores(&self) -> f64 {
        f64::from(self.tm_cpu_millis) / 1000.0
    }

    /// Total CPU cores allocated to the job (the first cost objective).
    pub fn total_cpu_cores(&self) -> f64 {
        f64::from(self.task_managers()) * self.tm_cpu_cores()
    }

    /// Total memory allocated to the job in MB (the second cost objective).
    pub fn total_memory_mb(&self) -> f64 {
        f64::from(self.task_managers()) * f64::from(self.tm_memory_mb)
    }

    /// Memory each slot gets; what the job's state and buffers actually have to live in.
    pub fn memory_per_slot_mb(&self) -> f64 {
        f64::from(self.tm_memory_mb) / f64::from(self.slots_per_tm.max(1))
    }

    /// CPU each slot gets; slots of one TaskManager share its cores.
    pub fn cpu_per_slot(&self) -> f64 {
        self.tm_cpu_cores() / f64::from(self.slots_per_tm.max(1))
    }

    /// The paper's default and fallback: 24 × (1 CPU, 4 GB, 1 slot), 10 s checkpoints.
    pub fn paper_default() -> Self {
        JobConfig {
            parallelism: 24,
            slots_per_tm: 1,
            tm_memory_mb: 4096,
            tm_cpu_millis: 1000,
            checkpoint_interval_s: 10,
        }
    }
}

impl fmt::Display for JobConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p={},slots={},mem={}m,cpu={},ckpt={}s",
            self.parallelism,
            self.slots_per_tm,
            self.tm_memory_mb,
            self.tm_cpu_cores(),
            self.checkpoint_interval_s
        )
    }
}

/// The grid Demeter chooses configurations from, and the rules a configuration must obey.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchSpace {
    pub parallelism: Vec<u32>,
    pub slots_per_tm: Vec<u32>,
    pub tm_memory_mb: Vec<u32>,
    pub tm_cpu_millis: Vec<u32>,
    pub checkpoint_interval_s: Vec<u32>,
    /// The job's max parallelism (key groups): Flink cannot rescale beyond it.
    pub max_parallelism: u32,
    /// Upper bound on TaskManagers the cluster can host.
    pub max_task_managers: u32,
    /// CPU cores (all TaskManagers together) the cluster can give the job; None: no bound but
    /// `max_task_managers`. A configuration needing more is never proposed or deployed: on a
    /// fixed set of machines it would not start, or would starve its neighbours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_total_cpu_cores: Option<f64>,
    /// Memory (MB, all TaskManagers together) the cluster can give the job; None: no bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_total_memory_mb: Option<f64>,
    /// Below this a slot cannot hold the job's working set; such configs are never proposed.
    pub min_memory_per_slot_mb: u32,
    /// Input rate (events/s) that maps to 1.0 on the GP's rate axis; rates above it extrapolate.
    pub max_rate: f64,
}

impl Default for SearchSpace {
    /// The Demeter paper's grid: 5 × 4 × 4 × 3 × 5 = 1,200 configurations.
    fn default() -> Self {
        SearchSpace {
            parallelism: vec![8, 12, 16, 20, 24],
            slots_per_tm: vec![1, 2, 3, 4],
            tm_memory_mb: vec![1024, 2048, 3072, 4096],
            tm_cpu_millis: vec![1000, 2000, 3000],
            checkpoint_interval_s: vec![10, 30, 50, 70, 90],
            max_parallelism: 128,
            max_task_managers: 24,
            max_total_cpu_cores: None,
            max_total_memory_mb: None,
            min_memory_per_slot_mb: 256,
            max_rate: 40_000.0,
        }
    }
}

impl SearchSpace {
    pub fn from_toml(text: &str) -> Result<Self> {
        let space: SearchSpace =
            toml::from_str(text).map_err(|e| Error::Model(format!("search space: {e}")))?;
        space.check()?;
        Ok(space)
    }

    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::Model(format!("search space: {e}")))
    }

    /// Rejects a space no configuration could come from.
    pub fn check(&self) -> Result<()> {
        let dims: [(&str, &[u32]); 5] = [
            ("parallelism", &self.parallelism),
            ("slots_per_tm", &self.slots_per_tm),
            ("tm_memory_mb", &self.tm_memory_mb),
            ("tm_cpu_millis", &self.tm_cpu_millis),
            ("checkpoint_interval_s", &self.checkpoint_interval_s),
        ];
        for (name, grid) in dims {
            if grid.is_empty() || grid.contains(&0) {
                return Err(Error::Model(format!(
                    "search space: {name} must list positive values"
                )));
            }
        }
        let totals = [self.max_total_cpu_cores, self.max_total_memory_mb];
        if totals
            .into_iter()
            .flatten()
            .any(|t| !(t.is_finite() && t > 0.0))
        {
            return Err(Error::Model(
                "search space: max_total_cpu_cores and max_total_memory_mb must be positive".into(),
            ));
        }
        if !(self.max_rate.is_finite() && self.max_rate > 0.0) {
            return Err(Error::Model(
                "search space: max_rate must be positive".into(),
            ));
        }
        if self.candidates().is_empty() {
            return Err(Error::Model(
                "search space: no configuration satisfies the validity rules".into(),
            ));
        }
        Ok(())
    }

    /// Why `config` may not be deployed, or `None` if it may (it need not lie on the grid:
    /// observations of hand-made configurations are still valid data).
    pub fn violation(&self, config: &JobConfig) -> Option<String> {
        if config.parallelism == 0 || config.slots_per_tm == 0 {
            return Some("parallelism and slots must be positive".into());
        }
        if config.tm_cpu_millis == 0 || config.checkpoint_interval_s == 0 {
            return Some("CPU and checkpoint interval must be positive".into());
        }
        if config.parallelism > self.max_parallelism {
            return Some(format!(
                "parallelism above max parallelism {}",
                self.max_parallelism
            ));
        }
        if config.task_managers() > self.max_task_managers {
            return Some(format!("more than {} TaskManagers", self.max_task_managers));
        }
        if let Some(cores) = self.max_total_cpu_cores
            && config.total_cpu_cores() > cores + 1e-9
        {
            return Some(format!("more than the cluster's {cores} CPU cores"));
        }
        if let Some(memory_mb) = self.max_total_memory_mb
            && config.total_memory_mb() > memory_mb + 1e-9
        {
            return Some(format!("more than the cluster's {memory_mb} MB of memory"));
        }
        if config.memory_per_slot_mb() < f64::from(self.min_memory_per_slot_mb) {
            return Some(format!(
                "less than {} MB per slot",
                self.min_memory_per_slot_mb
            ));
        }
        None
    }

    pub fn is_valid(&self, config: &JobConfig) -> bool {
        self.violation(config).is_none()
    }

    /// Every valid configuration on the grid, in a stable order.
    pub fn candidates(&self) -> Vec<JobConfig> {
        let mut out = Vec::new();
        for &parallelism in &self.parallelism {
            for &slots_per_tm in &self.slots_per_tm {
                for &tm_memory_mb in &self.tm_memory_mb {
                    for &tm_cpu_millis in &self.tm_cpu_millis {
                        for &checkpoint_interval_s in &self.checkpoint_interval_s {
                            let config = JobConfig {
                                parallelism,
                                slots_per_tm,
                                tm_memory_mb,
                                tm_cpu_millis,
                                checkpoint_interval_s,
                            };
                            if self.is_valid(&config) {
                                out.push(config);
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Maps (config, rate) to the GP's inputs in [0, 1]: parallelism, slots, **memory and CPU
    /// per slot** (log scale), checkpoint interval, rate / `max_rate`. Per-slot resources are
    /// what a subtask actually gets (GC pressure, CPU share), so effects that depend on them
    /// are smooth along one axis instead of an interaction of two; the map stays a bijection.
    /// Off-grid values land outside [0, 1], which is extrapolation, not an error.
    pub fn normalise(&self, config: &JobConfig, rate: f64) -> [f64; INPUT_DIMS] {
        let slots = f64::from(config.slots_per_tm.max(1));
        [
            unit(&self.parallelism, config.parallelism),
            unit(&self.slots_per_tm, config.slots_per_tm),
            self.per_slot_axis(&self.tm_memory_mb)
                .position(f64::from(config.tm_memory_mb) / slots),
            self.per_slot_axis(&self.tm_cpu_millis)
                .position(f64::from(config.tm_cpu_millis) / slots),
            unit(&self.checkpoint_interval_s, config.checkpoint_interval_s),
            rate / self.max_rate,
        ]
    }

    /// Inverse of [`normalise`](Self::normalise), rounding to whole units: lets a prior mean
    /// that thinks in configurations be evaluated at the GP's inputs.
    pub fn denormalise(&self, x: &[f64]) -> (JobConfig, f64) {
        let at = |i: usize| x.get(i).copied().unwrap_or(0.5);
        let slots_per_tm = from_unit(&self.slots_per_tm, at(1));
        let per_tm = |grid: &[u32], u: f64| {
            let total = self.per_slot_axis(grid).value_at(u) * f64::from(slots_per_tm);
            to_u32(total).unwrap_or(0).max(1)
        };
        let config = JobConfig {
            parallelism: from_unit(&self.parallelism, at(0)),
            slots_per_tm,
            tm_memory_mb: per_tm(&self.tm_memory_mb, at(2)),
            tm_cpu_millis: per_tm(&self.tm_cpu_millis, at(3)),
            checkpoint_interval_s: from_unit(&self.checkpoint_interval_s, at(4)),
        };
        (config, at(5) * self.max_rate)
    }

    /// Log-scale axis of a per-TaskManager resource divided among its slots.
    fn per_slot_axis(&self, grid: &[u32]) -> LogAxis {
        let (lo, hi) = extent(grid);
        let (few, many) = extent(&self.slots_per_tm);
        LogAxis {
            lo: (lo / many.max(1.0)).ln(),
            hi: (hi / few.max(1.0)).ln(),
        }
    }
}

struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    fn position(&self, value: f64) -> f64 {
        if self.hi <= self.lo {
            return 0.5;
        }
        (value.max(1e-9).ln() - self.lo) / (self.hi - self.lo)
    }

    fn value_at(&self, u: f64) -> f64 {
        (self.lo + u * (self.hi - self.lo)).exp()
    }
}

fn extent(grid: &[u32]) -> (f64, f64) {
    let lo = grid.iter().copied().min().unwrap_or(0);
    let hi = grid.iter().copied().max().unwrap_or(0);
    (f64::from(lo), f64::from(hi))
}

fn unit(grid: &[u32], value: u32) -> f64 {
    let (lo, hi) = extent(grid);
    if hi == lo {
        return 0.5;
    }
    (f64::from(value) - lo) / (hi - lo)
}

fn from_unit(grid: &[u32], u: f64) -> u32 {
    let (lo, hi) = extent(grid);
    to_u32(lo + u * (hi - lo)).unwrap_or(0).max(1)
}

#[cfg(test)]
#[path = "space_tests.rs"]
mod tests;

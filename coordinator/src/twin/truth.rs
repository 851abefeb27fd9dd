//! Ground truth of a simulated Flink job: what a configuration *really* does at a given rate.
//!
//! Tests and benchmarks train the models on observations drawn from here and score them against
//! the noiseless curves. To keep that comparison honest the functional forms deliberately differ
//! from the physics priors in `models::physics` (which must *learn* them, not copy them):
//!
//! | effect            | prior assumes                         | truth here                                          |
//! |-------------------|---------------------------------------|-----------------------------------------------------|
//! | parallelism       | power law `p^α`                       | Universal Scalability Law `p / (1 + σ(p−1) + κp(p−1))` (peaks, then falls) |
//! | CPU per slot      | power law                             | saturating `1 − e^{−c/s}`                           |
//! | memory per slot   | power law                             | no effect above a knee, quadratic GC penalty below  |
//! | checkpointing     | `e^{κ·10/interval}`                   | `1 − cost·(1 + p/16)/interval`: interacts with parallelism |
//! | latency queueing  | `ρ/(1−ρ)` (M/M/1-like)                | `ρ²/(2(1−ρ))` (M/D/1), plus GC pauses and checkpoint-alignment pauses the prior lacks |
//! | overload          | `W·(ρ−1)`                              | p95 of a backlog growing over the window: `0.95·W·(ρ−1)/ρ·…` |
//! | restart           | one constant                          | `base + per_tm·TaskManagers + state restore / p`    |
//! | replay            | half an interval                      | a full interval (failures injected just before a checkpoint, as Demeter's profiler does) and catch-up at a different efficiency |
//!
//! Everything is deterministic given the seeded RNG the caller passes (sans-IO).

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use crate::models::observations::Observation;
use crate::models::physics::{LATENCY_CAP_MS, RECOVERY_CAP_S};
use crate::models::space::JobConfig;
use crate::{Error, Result};

/// The true curves of one job; every field is a knob in the TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundTruth {
    /// Events/s one slot with one full core processes, before any overhead.
    pub slot_capacity: f64,
    /// USL contention (serial fraction) across parallel subtasks.
    pub scaling_contention: f64,
    /// USL coherence cost (pairwise coordination, e.g. shuffles) across subtasks.
    pub scaling_coherence: f64,
    /// Cores per slot at which a slot gets 63 % of the benefit of more CPU.
    pub cpu_saturation_cores: f64,
    /// Memory per slot below which garbage collection starts eating throughput.
    pub gc_knee_mb_per_slot: f64,
    pub gc_strength: f64,
    /// Seconds of processing lost per checkpoint (for 16 subtasks; grows with parallelism).
    pub checkpoint_cost_s: f64,
    pub latency_base_ms: f64,
    /// Scale of the M/D/1 waiting time.
    pub latency_service_ms: f64,
    /// Extra p95 latency at full GC pressure.
    pub gc_pause_ms: f64,
    /// Extra p95 latency from checkpoint alignment at a 10 s interval.
    pub alignment_pause_ms: f64,
    /// Length of a measurement window: how long a backlog can grow when overloaded.
    pub window_s: f64,
    pub restart_base_s: f64,
    pub restart_per_tm_s: f64,
    /// State size in MB: restored in parallel by the subtasks after a restart.
    pub state_mb: f64,
    pub restore_mb_per_s_per_subtask: f64,
    /// Time to notice a failure.
    pub detection_s: f64,
    /// Catch-up throughput relative to steady capacity (batching makes it > 1, cold caches < 1).
    pub catchup_efficiency: f64,
    /// Relative (log-normal) noise on latency, recovery, CPU and memory measurements.
    pub noise: f64,
    /// Absolute noise on the busy fraction.
    pub busy_noise: f64,

    // How changes cost time (read by the simulator; defaults keep older files valid).
    /// Fixed part of an in-place rescale by the adaptive scheduler: cancel the tasks and
    /// redeploy them at the new parallelism. State is then restored at the new parallelism;
    /// nothing is replayed because the rescale waits for a completed checkpoint (FLIP-461).
    #[serde(default = "defaults::rescale_base_s")]
    pub rescale_base_s: f64,
    /// Starting a TaskManager JVM and registering it: paid inside the downtime of a full
    /// restart, and before an in-place scale-up (while the job still runs) for the new TaskManagers.
    #[serde(default = "defaults::tm_start_s")]
    pub tm_start_s: f64,
    /// Fixed part of stop-with-savepoint (trigger, barrier alignment, finalisation).
    #[serde(default = "defaults::savepoint_base_s")]
    pub savepoint_base_s: f64,
    /// Speed at which each subtask writes its share of the state into a savepoint.
    #[serde(default = "defaults::savepoint_mb_per_s_per_subtask")]
    pub savepoint_mb_per_s_per_subtask: f64,
    /// A slot with less memory than this cannot hold the job (out of memory at start): the
    /// deployment never reaches RUNNING and is rolled back. 0 = only the search space's rule.
    #[serde(default)]
    pub min_memory_per_slot_mb: f64,

    /// The nodes production and profiling copies share (`[cluster]` table; optional).
    #[serde(default)]
    pub cluster: Cluster,
}

/// The cluster's capacity: profiling copies get what production leaves. `simulate` holds every
/// policy's configurations to it through the search space's totals (unless `--unbounded`); the
/// twin itself runs whatever production is given.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// Total CPU cores of the nodes; None: the static configuration's plus `spare_share` of it.
    pub cpu_cores: Option<f64>,
    /// Total memory (MB) of the nodes; None: the static configuration's plus `spare_share`.
    pub memory_mb: Option<f64>,
    /// Spare capacity beyond the static configuration when a total is not given: the usual
    /// headroom of a cluster provisioned for the peak default (0.25 = 25 %).
    pub spare_share: f64,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            cpu_cores: None,
            memory_mb: None,
            spare_share: 0.25,
        }
    }
}

impl Cluster {
    /// Total CPU cores and memory (MB), given the static configuration.
    pub fn capacity(&self, static_config: &JobConfig) -> (f64, f64) {
        let scale = 1.0 + self.spare_share.max(0.0);
        (
            self.cpu_cores
                .unwrap_or(static_config.total_cpu_cores() * scale),
            self.memory_mb
                .unwrap_or(static_config.total_memory_mb() * scale),
        )
    }
}

/// Defaults of the change-cost knobs: seconds typical of a small standalone cluster.
mod defaults {
    pub fn rescale_base_s() -> f64 {
        5.0
    }
    pub fn tm_start_s() -> f64 {
        10.0
    }
    pub fn savepoint_base_s() -> f64 {
        2.0
    }
    pub fn savepoint_mb_per_s_per_subtask() -> f64 {
        40.0
    }
}

/// The noiseless outcomes of a configuration at a rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrueOutcomes {
    pub capacity: f64,
    pub busy_fraction: f64,
    pub latency_p95_ms: f64,
    pub recovery_s: f64,
    pub cpu_cores: f64,
    pub memory_mb: f64,
}

impl GroundTruth {
    pub fn from_toml(text: &str) -> Result<Self> {
        let truth: GroundTruth =
            toml::from_str(text).map_err(|e| Error::Model(format!("ground truth: {e}")))?;
        let all_finite_non_negative = [
            truth.slot_capacity,
            truth.scaling_contention,
            truth.scaling_coherence,
            truth.cpu_saturation_cores,
            truth.gc_knee_mb_per_slot,
            truth.gc_strength,
            truth.checkpoint_cost_s,
            truth.latency_base_ms,
            truth.latency_service_ms,
            truth.gc_pause_ms,
            truth.alignment_pause_ms,
            truth.window_s,
            truth.restart_base_s,
            truth.restart_per_tm_s,
            truth.state_mb,
            truth.restore_mb_per_s_per_subtask,
            truth.detection_s,
            truth.catchup_efficiency,
            truth.noise,
            truth.busy_noise,
            truth.rescale_base_s,
            truth.tm_start_s,
            truth.savepoint_base_s,
            truth.savepoint_mb_per_s_per_subtask,
            truth.min_memory_per_slot_mb,
            truth.cluster.cpu_cores.unwrap_or(0.0),
            truth.cluster.memory_mb.unwrap_or(0.0),
            truth.cluster.spare_share,
        ]
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0);
        if !all_finite_non_negative
            || truth.slot_capacity == 0.0
            || truth.cpu_saturation_cores == 0.0
            || truth.restore_mb_per_s_per_subtask == 0.0
            || truth.savepoint_mb_per_s_per_subtask == 0.0
        {
            return Err(Error::Model(
                "ground truth: values must be finite and non-negative; capacity, CPU saturation, restore and savepoint speeds positive".into(),
            ));
        }
        Ok(truth)
    }

    /// How hard garbage collection works, 0 (enough memory per slot) to 1 (starved).
    fn gc_pressure(&self, config: &JobConfig) -> f64 {
        let per_slot = config.memory_per_slot_mb();
        if per_slot >= self.gc_knee_mb_per_slot {
            0.0
        } else {
            (self.gc_knee_mb_per_slot / per_slot - 1.0).min(4.0) / 4.0
        }
    }

    pub fn capacity(&self, config: &JobConfig) -> f64 {
        let p = f64::from(config.parallelism);
        let scaling = p
            / (1.0 + self.scaling_contention * (p - 1.0) + self.scaling_coherence * p * (p - 1.0));
        let saturation = |cores: f64| 1.0 - (-cores / self.cpu_saturation_cores).exp();
        let cpu = saturation(config.cpu_per_slot()) / saturation(1.0);
        let pressure = 4.0 * self.gc_pressure(config);
        let gc = 1.0 / (1.0 + self.gc_strength * pressure * pressure);
        let checkpoint = (1.0
            - self.checkpoint_cost_s * (1.0 + p / 16.0) / f64::from(config.checkpoint_interval_s))
        .max(0.2);
        self.slot_capacity * scaling * cpu * gc * checkpoint
    }

    pub fn outcomes(&self, config: &JobConfig, rate: f64) -> TrueOutcomes {
        let rate = rate.max(0.0);
        let capacity = self.capacity(config);
        let rho = rate / capacity;
        let queue_rho = rho.min(0.98);
        let waiting = self.latency_service_ms * queue_rho * queue_rho / (2.0 * (1.0 - queue_rho));
        let alignment =
            self.alignment_pause_ms * (10.0 / f64::from(config.checkpoint_interval_s)).min(1.0);
        let overload_ms = if rho > 1.0 {
            0.95 * self.window_s * 1000.0 * (rho - 1.0)
        } else {
            0.0
        };
        let latency = (self.latency_base_ms
            + waiting
            + alignment
            + self.gc_pause_ms * self.gc_pressure(config)
            + overload_ms)
            .min(LATENCY_CAP_MS);

        let tms = f64::from(config.task_managers());
        let restart = self.restart_s(config);
        let catchup = capacity * self.catchup_efficiency - rate;
        let recovery = if catchup <= 0.0 {
            RECOVERY_CAP_S
        } else {
            let backlog =
                rate * (self.detection_s + restart + f64::from(config.checkpoint_interval_s));
            (self.detection_s + restart + backlog / catchup).min(RECOVERY_CAP_S)
        };

        let busy = rho.min(1.0);
        let cpu_cores =
            (0.1 * tms + busy * config.total_cpu_cores() * 0.9).min(config.total_cpu_cores());
        let heap_fill = 0.35 + 0.4 * busy + 0.2 * self.gc_pressure(config);
        let memory_mb = (config.total_memory_mb() * heap_fill.min(0.97)).max(1.0);
        TrueOutcomes {
            capacity,
            busy_fraction: busy,
            latency_p95_ms: latency,
            recovery_s: recovery,
            cpu_cores,
            memory_mb,
        }
    }

    /// Restoring the state at `config`'s parallelism: subtasks read their shares in parallel.
    pub fn restore_s(&self, config: &JobConfig) -> f64 {
        self.state_mb / f64::from(config.parallelism.max(1)) / self.restore_mb_per_s_per_subtask
    }

    /// Restarting the job after its tasks were lost: reschedule, TaskManagers re-register, restore.
    pub fn restart_s(&self, config: &JobConfig) -> f64 {
        self.restart_base_s
            + self.restart_per_tm_s * f64::from(config.task_managers())
            + self.restore_s(config)
    }

    /// Seconds the job processes nothing after a failure: detection, then a restart.
    pub fn failure_downtime_s(&self, config: &JobConfig) -> f64 {
        self.detection_s + self.restart_s(config)
    }

    /// Stop-with-savepoint from `config`: every subtask writes its share of the state.
    pub fn savepoint_s(&self, config: &JobConfig) -> f64 {
        self.savepoint_base_s
            + self.state_mb
                / f64::from(config.parallelism.max(1))
                / self.savepoint_mb_per_s_per_subtask
    }

    /// Downtime of an in-place rescale to `to` (parallelism only, TaskManagers already there).
    pub fn in_place_downtime_s(&self, to: &JobConfig) -> f64 {
        self.rescale_base_s + self.restore_s(to)
    }

    /// Downtime of a full restart: savepoint, new TaskManagers started (if `to` needs any),
    /// job restored at `to`.
    pub fn full_restart_downtime_s(&self, from: &JobConfig, to: &JobConfig) -> f64 {
        self.savepoint_s(from) + self.taskmanager_start_s(from, to) + self.restart_s(to)
    }

    /// Seconds spent starting TaskManagers on the way from `from` to `to`: none when `to` runs
    /// on some of `from`'s (a scale-in only stops the spare ones).
    pub fn taskmanager_start_s(&self, from: &JobConfig, to: &JobConfig) -> f64 {
        if from.same_taskmanager_shape(to) && to.task_managers() <= from.task_managers() {
            0.0
        } else {
            self.tm_start_s
        }
    }

    /// Whether `config` can run at all (enough memory per slot to start).
    pub fn can_run(&self, config: &JobConfig) -> bool {
        config.memory_per_slot_mb() >= self.min_memory_per_slot_mb
    }

    /// One noisy measurement of `config` at `rate`, as a profiling run would record it.
    pub fn observe<R: Rng + ?Sized>(
        &self,
        config: &JobConfig,
        rate: f64,
        rng: &mut R,
    ) -> Observation {
        let truth = self.outcomes(config, rate);
        let mut noisy = |value: f64| value * (self.noise * standard_normal(rng)).exp();
        let latency = noisy(truth.latency_p95_ms);
        let recovery = noisy(truth.recovery_s);
        let cpu = noisy(truth.cpu_cores);
        let memory = noisy(truth.memory_mb);
        let busy = (truth.busy_fraction + self.busy_noise * standard_normal(rng)).clamp(0.0, 1.0);
        Observation {
            config: *config,
            rate,
            busy_fraction: Some(busy),
            latency_p95_ms: latency.max(1e-3),
            recovery_s: Some(recovery.max(1e-3)),
            cpu_cores: cpu,
            memory_mb: memory,
        }
    }

    /// `n` measurements of configurations drawn uniformly from `candidates` at rates uniform in
    /// `rates` — the "random profiling" a model is trained on in the benchmarks.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        candidates: &[JobConfig],
        rates: (f64, f64),
        n: usize,
        rng: &mut R,
    ) -> Vec<Observation> {
        if candidates.is_empty() {
            return Vec::new();
        }
        (0..n)
            .map(|_| {
                let config = candidates[rng.random_range(0..candidates.len())];
                let rate = rng.random_range(rates.0..=rates.1);
                self.observe(&config, rate, rng)
            })
            .collect()
    }
}

/// Box–Muller: one standard normal draw from two uniforms.
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
#[path = "truth_tests.rs"]
mod tests;

//! Profiling copies in the twin: each candidate of a batch runs beside production, reading the
//! live input at the ordered rate, for start-up + warm-up + measurement + an injected failure
//! until it recovered (capped), costing its allocated CPU and memory for that time. Its
//! measurement is one noisy draw of the ground truth; the batch reports when its last copy ends.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::change::ROLLBACK_DEADLINE_S;
use super::truth::GroundTruth;
use crate::models::observations::Observation;
use crate::models::space::{JobConfig, SearchSpace};

/// How long a profiling copy runs (design §2: 120 s warm-up, 60 s measurement, then a failure
/// injected just before a checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProfilingTimes {
    pub warmup_s: f64,
    pub measure_s: f64,
    /// A copy that has not recovered after this long is torn down; its recovery is reported
    /// as this value (censored).
    pub recovery_cap_s: f64,
}

impl Default for ProfilingTimes {
    fn default() -> Self {
        ProfilingTimes {
            warmup_s: 120.0,
            measure_s: 60.0,
            recovery_cap_s: 600.0,
        }
    }
}

#[derive(Debug, Clone)]
struct Copy {
    config: JobConfig,
    start: f64,
    end: f64,
    result: Option<Observation>,
}

#[derive(Debug, Clone)]
struct Batch {
    id: u64,
    copies: Vec<Copy>,
    ends_at: f64,
}

/// A finished batch, ready for the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchResult {
    pub batch: u64,
    pub at: f64,
    pub results: Vec<Observation>,
}

/// The profiling copies in flight.
#[derive(Debug, Clone, Default)]
pub struct Profiler {
    times: ProfilingTimes,
    batches: Vec<Batch>,
    /// Copies started so far.
    pub copies_started: u64,
    pub batches_started: u64,
}

impl Profiler {
    pub fn new(times: ProfilingTimes) -> Self {
        Profiler {
            times,
            ..Profiler::default()
        }
    }

    /// Starts one copy per candidate at `now`. The measurement is drawn now (the truth does
    /// not change while the copy runs), so the draw order — and the run — is deterministic.
    #[allow(clippy::too_many_arguments)]
    pub fn start<R: Rng + ?Sized>(
        &mut self,
        now: f64,
        batch: u64,
        candidates: &[JobConfig],
        rate: f64,
        truth: &GroundTruth,
        space: &SearchSpace,
        rng: &mut R,
    ) {
        let mut copies = Vec::with_capacity(candidates.len());
        for config in candidates {
            let startup = truth.tm_start_s + truth.restart_s(config);
            let (duration, result) = if space.is_valid(config) && truth.can_run(config) {
                let mut observation = truth.observe(config, rate, rng);
                let recovery = observation
                    .recovery_s
                    .unwrap_or(self.times.recovery_cap_s)
                    .min(self.times.recovery_cap_s);
                observation.recovery_s = Some(recovery);
                let run = startup + self.times.warmup_s + self.times.measure_s + recovery;
                (run, Some(observation))
            } else {
                // Never reaches RUNNING: torn down at the deadline, nothing measured.
                (startup + ROLLBACK_DEADLINE_S, None)
            };
            copies.push(Copy {
                config: *config,
                start: now,
                end: now + duration,
                result,
            });
        }
        self.copies_started += copies.len() as u64;
        self.batches_started += 1;
        let ends_at = copies.iter().map(|c| c.end).fold(now, f64::max);
        self.batches.push(Batch {
            id: batch,
            copies,
            ends_at,
        });
    }

    /// CPU cores and memory (MB) allocated to copies over `[start, end)`, as averages.
    pub fn allocated(&self, start: f64, end: f64) -> (f64, f64) {
        let (mut cpu, mut memory) = (0.0, 0.0);
        let span = end - start;
        for copy in self.batches.iter().flat_map(|b| &b.copies) {
            let overlap = (copy.end.min(end) - copy.start.max(start)).max(0.0) / span;
            cpu += copy.config.total_cpu_cores() * overlap;
            memory += copy.config.total_memory_mb() * overlap;
        }
        (cpu, memory)
    }

    /// Batches whose last copy ended by `now`, removed from flight.
    pub fn finished(&mut self, now: f64) -> Vec<BatchResult> {
        let (done, running): (Vec<Batch>, Vec<Batch>) = std::mem::take(&mut self.batches)
            .into_iter()
            .partition(|b| b.ends_at <= now);
        self.batches = running;
        done.into_iter()
            .map(|b| BatchResult {
                batch: b.id,
                at: b.ends_at,
                results: b.copies.into_iter().filter_map(|c| c.result).collect(),
            })
            .collect()
    }

    pub fn in_flight(&self) -> usize {
        self.batches.len()
    }
}

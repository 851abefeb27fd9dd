//! Profiling copies in the twin: each candidate of a batch runs beside production, reading the
//! live input at the ordered rate, for start-up + warm-up + measurement + an injected failure
//! until it recovered (capped), costing its allocated CPU and memory for that time. Its
//! measurement is one noisy draw of the ground truth; the batch reports when its last copy ends.
//!
//! Production always wins: copies run only on the cluster's spare capacity (total minus what
//! production holds), one batch at a time. A batch is shrunk to the candidates that fit (in the
//! policy's order), deferred while none fits or another batch runs, and dropped (reported with
//! no results) after waiting `max_defer_s`; a copy is torn down (its measurement lost) when
//! production grows into its room.

use std::collections::VecDeque;

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
    /// A batch that could not start for this long (no room, or another batch running) is
    /// dropped: its rate is stale by then (Demeter's paper profiles every ~15 min).
    pub max_defer_s: f64,
}

impl Default for ProfilingTimes {
    fn default() -> Self {
        ProfilingTimes {
            warmup_s: 120.0,
            measure_s: 60.0,
            recovery_cap_s: 600.0,
            max_defer_s: 900.0,
        }
    }
}

/// CPU cores and memory (MB).
pub type Resources = (f64, f64);

/// What happened to the profiling a policy ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilingStats {
    pub batches_ordered: u64,
    pub batches_started: u64,
    /// Batches that had to wait (no room beside production, or another batch running).
    pub batches_deferred: u64,
    /// Batches dropped after waiting too long (reported to the policy with no results).
    pub batches_expired: u64,
    pub copies_ordered: u64,
    pub copies_started: u64,
    /// Copies left out of a batch because they did not fit beside production.
    pub copies_dropped: u64,
    /// Copies torn down because production needed their room.
    pub copies_preempted: u64,
}

/// A batch waiting for room.
#[derive(Debug, Clone)]
struct Order {
    id: u64,
    at: f64,
    candidates: Vec<JobConfig>,
    rate: f64,
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

/// The profiling copies in flight and the batches waiting for room.
#[derive(Debug, Clone)]
pub struct Profiler {
    times: ProfilingTimes,
    /// Total CPU cores and memory (MB) of the cluster production and the copies share.
    cluster: Resources,
    batches: Vec<Batch>,
    waiting: VecDeque<Order>,
    pub stats: ProfilingStats,
}

impl Profiler {
    pub fn new(times: ProfilingTimes, cluster: Resources) -> Self {
        Profiler {
            times,
            cluster,
            batches: Vec::new(),
            waiting: VecDeque::new(),
            stats: ProfilingStats::default(),
        }
    }

    /// A policy orders a batch at `now`; it starts at once if no batch runs and some of its
    /// candidates fit beside `production`, otherwise it waits.
    pub fn order(&mut self, now: f64, batch: u64, candidates: &[JobConfig], rate: f64) {
        self.stats.batches_ordered += 1;
        self.stats.copies_ordered += candidates.len() as u64;
        self.waiting.push_back(Order {
            id: batch,
            at: now,
            candidates: candidates.to_vec(),
            rate,
        });
    }

    /// Makes room for `production` (tearing down the latest copies first), then starts the
    /// next waiting batch if none runs, and drops batches that waited too long. Call once a
    /// second; `production` is what production holds now (the larger of what it used this
    /// second and what its configuration needs).
    pub fn tick<R: Rng + ?Sized>(
        &mut self,
        now: f64,
        production: Resources,
        truth: &GroundTruth,
        space: &SearchSpace,
        rng: &mut R,
    ) {
        self.make_room(now, production);
        while self.batches.is_empty() {
            let Some(order) = self.waiting.pop_front() else {
                break;
            };
            let late = order.at < now;
            if now - order.at > self.times.max_defer_s {
                self.stats.batches_deferred += 1;
                self.stats.batches_expired += 1;
                self.batches.push(Batch {
                    id: order.id,
                    copies: Vec::new(),
                    ends_at: now,
                });
                break;
            }
            let mut spare = (self.cluster.0 - production.0, self.cluster.1 - production.1);
            let fitting: Vec<JobConfig> = order
                .candidates
                .iter()
                .copied()
                .filter(|c| {
                    let fits = c.total_cpu_cores() <= spare.0 && c.total_memory_mb() <= spare.1;
                    if fits {
                        spare.0 -= c.total_cpu_cores();
                        spare.1 -= c.total_memory_mb();
                    }
                    fits
                })
                .collect();
            if fitting.is_empty() {
                // No room yet: wait at the head of the line.
                self.waiting.push_front(order);
                break;
            }
            self.stats.batches_deferred += u64::from(late);
            self.stats.copies_dropped += (order.candidates.len() - fitting.len()) as u64;
            self.start(now, order.id, &fitting, order.rate, truth, space, rng);
        }
    }

    /// Tears down the most recently started copies until production fits.
    fn make_room(&mut self, now: f64, production: Resources) {
        let mut used = production;
        for copy in self.batches.iter().flat_map(|b| &b.copies) {
            if copy.end > now {
                used.0 += copy.config.total_cpu_cores();
                used.1 += copy.config.total_memory_mb();
            }
        }
        for batch in self.batches.iter_mut().rev() {
            for copy in batch.copies.iter_mut().rev() {
                if used.0 <= self.cluster.0 && used.1 <= self.cluster.1 {
                    return;
                }
                if copy.end > now {
                    used.0 -= copy.config.total_cpu_cores();
                    used.1 -= copy.config.total_memory_mb();
                    copy.end = now.max(copy.start);
                    copy.result = None;
                    self.stats.copies_preempted += 1;
                }
            }
            batch.ends_at = batch.copies.iter().map(|c| c.end).fold(now, f64::max);
        }
    }

    /// Starts one copy per candidate at `now`. The measurement is drawn now (the truth does
    /// not change while the copy runs), so the draw order — and the run — is deterministic.
    #[allow(clippy::too_many_arguments)]
    fn start<R: Rng + ?Sized>(
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
        self.stats.copies_started += copies.len() as u64;
        self.stats.batches_started += 1;
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

    /// Batches ordered and not started yet.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
#[path = "profiling_tests.rs"]
mod tests;

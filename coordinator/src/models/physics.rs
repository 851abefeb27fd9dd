//! Physics-informed prior means (design §2, "Use Flink's physics").
//!
//! Each surrogate is a GP on the residual `y − prior(x)` (in log space), so the prior only has
//! to get the *shape* right; a handful of scalars are fitted to the observations by robust
//! (Huber) least squares, never hand-tuned:
//!
//! - **Capacity** (events/s the job can process): every observation with a busy fraction `b`
//!   at rate `r` measures capacity ≈ `r / b` (DS2 / Flink autoscaler), at any load. Capacity of a
//!   configuration is log-linear:
//!   `ln cap = c0 + α·ln p + β·ln(cpu/slot) + μ·ln(mem/slot / 1 GB) + κ·(10 s / interval)`:
//!   α < 1 is diminishing returns in parallelism, μ the memory/GC effect,
//!   κ the checkpoint cost. Ridge terms pull α towards 1, β towards ½ and the rest towards 0,
//!   so two or three observations already give a usable model.
//! - **Latency** (p95): `base · (1 + k · ρ/(1 − ρ))` with utilisation `ρ = rate / capacity`,
//!   held at its ρ = 0.95 value beyond, plus the backlog a measurement window `W` builds when
//!   ρ > 1 (`W · (ρ − 1)` seconds). Fitted: `base`, `k`, `W`.
//! - **Recovery** after a failure: `restart + d · backlog / (capacity − rate)` where the backlog
//!   is the input that arrived while restarting plus the replay since the last checkpoint
//!   (`rate · (restart + interval/2)`). Fitted: `restart`, `d`. Capped when capacity ≤ rate.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::observations::{CAPACITY_BUSY_BAND, Observation};
use super::space::JobConfig;

/// Latencies above this (1 min) mean "the job is not keeping up"; targets are capped here so
/// log-space residuals stay bounded.
pub const LATENCY_CAP_MS: f64 = 60_000.0;
/// Recovery times above this (1 h) mean "never catches up"; same reason.
pub const RECOVERY_CAP_S: f64 = 3_600.0;

const CAPACITY_FEATURES: usize = 5;
const QUEUE_KNEE: f64 = 0.95;

/// The fitted scalars of the physics priors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhysicsPrior {
    /// Coefficients of `[1, ln p, ln cpu/slot, ln(mem/slot/1 GB), 10/interval]` for ln capacity.
    pub log_capacity: [f64; CAPACITY_FEATURES],
    pub latency_base_ms: f64,
    pub latency_queue_k: f64,
    pub latency_window_s: f64,
    pub restart_s: f64,
    pub drain_factor: f64,
}

impl PhysicsPrior {
    /// Fits all scalars to `observations`. Never fails: with no usable rows a scalar keeps a
    /// neutral default (documented at each fit).
    pub fn fit(observations: &[Observation]) -> Self {
        let mut prior = PhysicsPrior {
            log_capacity: fit_capacity(observations),
            latency_base_ms: 50.0,
            latency_queue_k: 0.1,
            latency_window_s: 60.0,
            restart_s: 30.0,
            drain_factor: 1.0,
        };
        let capacities: Vec<f64> = observations
            .iter()
            .map(|o| prior.capacity(&o.config))
            .collect();
        prior.fit_dynamics(observations, &capacities);
        prior
    }

    /// Refits the latency and recovery scalars given the capacity the model believes for each
    /// observation (e.g. a GP-corrected capacity rather than the log-linear one). Where an
    /// observation measured its own utilisation (busy fraction) that measurement wins: the
    /// shapes are then fitted on what the job really experienced, not on capacity-model errors.
    pub fn fit_dynamics(&mut self, observations: &[Observation], model_capacities: &[f64]) {
        let capacities: Vec<f64> = observations
            .iter()
            .zip(model_capacities)
            .map(|(o, &model)| experienced_capacity(o, model))
            .collect();
        self.fit_latency(observations, &capacities);
        self.fit_recovery(observations, &capacities);
    }

    pub fn capacity(&self, config: &JobConfig) -> f64 {
        let f = capacity_features(config);
        f.iter()
            .zip(&self.log_capacity)
            .map(|(x, c)| x * c)
            .sum::<f64>()
            .exp()
    }

    pub fn latency_ms(&self, config: &JobConfig, rate: f64) -> f64 {
        self.latency_ms_at(self.capacity(config), rate)
    }

    pub fn recovery_s(&self, config: &JobConfig, rate: f64) -> f64 {
        self.recovery_s_at(self.capacity(config), rate, config.checkpoint_interval_s)
    }

    /// Latency of a job with the given capacity at `rate`.
    pub fn latency_ms_at(&self, capacity: f64, rate: f64) -> f64 {
        let rho = rate.max(0.0) / capacity;
        latency_shape(
            rho,
            self.latency_base_ms,
            self.latency_queue_k,
            self.latency_window_s,
        )
    }

    /// Recovery time of a job with the given capacity and checkpoint interval at `rate`.
    pub fn recovery_s_at(&self, capacity: f64, rate: f64, interval_s: u32) -> f64 {
        recovery_shape(
            capacity,
            rate,
            interval_s,
            self.restart_s,
            self.drain_factor,
        )
    }

    /// Latency, in two steps so overload cannot distort the queueing shape: (base, k) on the
    /// rows that were not saturated (a coarse then a fine grid), then the window `W` on the
    /// saturated ones (busy fraction above the band, or ρ ≥ 1). Huber loss in log space.
    /// Without rows the defaults stay.
    fn fit_latency(&mut self, observations: &[Observation], capacities: &[f64]) {
        type Rows = Vec<(f64, f64)>;
        let (saturated, unsaturated): (Rows, Rows) = observations
            .iter()
            .zip(capacities)
            .map(|(o, cap)| (o.rate.max(0.0) / cap, o.latency_p95_ms.ln()))
            .partition(|&(rho, _)| rho >= 1.0);
        let loss = |rows: &[(f64, f64)], base: f64, k: f64, window: f64| {
            huber_loss(
                rows.iter()
                    .map(|&(rho, ln_y)| ln_y - latency_shape(rho, base, k, window).ln()),
            )
        };
        let window = self.latency_window_s;
        if !unsaturated.is_empty() {
            let mut best = (f64::INFINITY, self.latency_base_ms, self.latency_queue_k);
            let mut bases: Vec<f64> = log_grid(5.0, 5_000.0, 31).collect();
            let mut ks: Vec<f64> = log_grid(1e-3, 10.0, 29).collect();
            for _refinement in 0..2 {
                for &base in &bases {
                    for &k in &ks {
                        let l = loss(&unsaturated, base, k, window);
                        if l < best.0 {
                            best = (l, base, k);
                        }
                    }
                }
                bases = log_grid(best.1 / 1.3, best.1 * 1.3, 15).collect();
                ks = log_grid(best.2 / 1.4, best.2 * 1.4, 15).collect();
            }
            (_, self.latency_base_ms, self.latency_queue_k) = best;
        }
        if !saturated.is_empty() {
            let (base, k) = (self.latency_base_ms, self.latency_queue_k);
            let fitted = log_grid(1.0, 1_000.0, 61)
                .map(|w| (loss(&saturated, base, k, w), w))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((_, w)) = fitted {
                self.latency_window_s = w;
            }
        }
    }

    /// Recovery: a grid over (restart, drain factor), Huber loss in log space. Without
    /// recovery measurements the defaults (30 s, 1.0) stay.
    fn fit_recovery(&mut self, observations: &[Observation], capacities: &[f64]) {
        let rows: Vec<(f64, f64, u32, f64)> = observations
            .iter()
            .zip(capacities)
            .filter_map(|(o, &cap)| {
                let r = o.recovery_s?;
                Some((cap, o.rate, o.config.checkpoint_interval_s, r.ln()))
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        let mut best = f64::INFINITY;
        for restart in log_grid(1.0, 600.0, 41) {
            for drain in log_grid(0.25, 4.0, 17) {
                let loss = huber_loss(rows.iter().map(|&(cap, rate, interval, ln_y)| {
                    ln_y - recovery_shape(cap, rate, interval, restart, drain).ln()
                }));
                if loss < best {
                    best = loss;
                    self.restart_s = restart;
                    self.drain_factor = drain;
                }
            }
        }
    }
}

/// The capacity an observation ran with: measured (rate / busy) when the busy fraction is
/// informative; when saturated, the model's belief but never more than the rate; otherwise the
/// model's belief.
fn experienced_capacity(observation: &Observation, model: f64) -> f64 {
    if let Some(measured) = observation.capacity_estimate() {
        return measured;
    }
    match observation.busy_fraction {
        // Saturated: the job was at least fully loaded, ρ ≥ 1.
        Some(busy) if busy > CAPACITY_BUSY_BAND.1 && observation.rate > 0.0 => {
            model.min(observation.rate)
        }
        _ => model,
    }
}

fn capacity_features(config: &JobConfig) -> [f64; CAPACITY_FEATURES] {
    [
        1.0,
        f64::from(config.parallelism).ln(),
        config.cpu_per_slot().ln(),
        (config.memory_per_slot_mb() / 1024.0).ln(),
        10.0 / f64::from(config.checkpoint_interval_s),
    ]
}

/// Robust ridge regression of ln(rate / busy) on the capacity features. Ridge targets: linear
/// scaling in parallelism (α = 1, what DS2 assumes); capacity growing with the square root of
/// a slot's CPU share (β = ½: halfway between "CPU does not matter" and "purely CPU-bound" —
/// with β = 0, which production alone cannot contradict since it runs one CPU share, a quarter
/// core per slot looked as fast as a whole one, and profiling batches were spent on such
/// shapes); no memory or checkpoint effect. The intercept is barely regularised; without any
/// capacity measurement it falls back to 1,000 events/s per slot — a placeholder the GP
/// residual has to correct.
fn fit_capacity(observations: &[Observation]) -> [f64; CAPACITY_FEATURES] {
    let rows: Vec<([f64; CAPACITY_FEATURES], f64)> = observations
        .iter()
        .filter_map(|o| Some((capacity_features(&o.config), o.capacity_estimate()?.ln())))
        .collect();
    let target = [1000f64.ln(), 1.0, 0.5, 0.0, 0.0];
    let ridge = [1e-4, 0.05, 0.05, 0.05, 0.05];
    let mut weights = vec![1.0; rows.len()];
    let mut coeffs = target;
    for _ in 0..10 {
        let mut a = DMatrix::<f64>::zeros(CAPACITY_FEATURES, CAPACITY_FEATURES);
        let mut b = DVector::<f64>::zeros(CAPACITY_FEATURES);
        for (j, (&lambda, &t)) in ridge.iter().zip(&target).enumerate() {
            a[(j, j)] += lambda;
            b[j] += lambda * t;
        }
        for ((x, y), w) in rows.iter().zip(&weights) {
            for i in 0..CAPACITY_FEATURES {
                b[i] += w * x[i] * y;
                for j in 0..CAPACITY_FEATURES {
                    a[(i, j)] += w * x[i] * x[j];
                }
            }
        }
        let Some(solution) = a.cholesky().map(|c| c.solve(&b)) else {
            break;
        };
        coeffs
            .iter_mut()
            .zip(solution.iter())
            .for_each(|(c, s)| *c = *s);
        let residuals: Vec<f64> = rows
            .iter()
            .map(|(x, y)| y - x.iter().zip(&coeffs).map(|(a, c)| a * c).sum::<f64>())
            .collect();
        let delta = huber_delta(&residuals);
        weights = residuals
            .iter()
            .map(|r| {
                if r.abs() <= delta {
                    1.0
                } else {
                    delta / r.abs()
                }
            })
            .collect();
    }
    coeffs
}

/// ρ/(1−ρ), held constant past the knee: beyond it queueing is no longer the story, the
/// backlog term is (keeping the two apart makes `k` and `W` identifiable).
fn queue_factor(rho: f64) -> f64 {
    let rho = rho.clamp(0.0, QUEUE_KNEE);
    rho / (1.0 - rho)
}

fn latency_shape(rho: f64, base_ms: f64, k: f64, window_s: f64) -> f64 {
    let backlog_ms = 1000.0 * window_s * (rho - 1.0).max(0.0);
    (base_ms * (1.0 + k * queue_factor(rho)) + backlog_ms).min(LATENCY_CAP_MS)
}

fn recovery_shape(capacity: f64, rate: f64, interval_s: u32, restart_s: f64, drain: f64) -> f64 {
    let spare = capacity - rate.max(0.0);
    if spare <= 0.0 {
        return RECOVERY_CAP_S;
    }
    let backlog = rate.max(0.0) * (restart_s + f64::from(interval_s) / 2.0);
    (restart_s + drain * backlog / spare).min(RECOVERY_CAP_S)
}

fn log_grid(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
    let step = (hi / lo).ln() / (n.max(2) - 1) as f64;
    (0..n).map(move |i| lo * (step * i as f64).exp())
}

pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
    }
}

/// 1.345 × robust scale (MAD), floored so a perfect fit does not make every point an outlier.
fn huber_delta(residuals: &[f64]) -> f64 {
    let centre = median(residuals);
    let deviations: Vec<f64> = residuals.iter().map(|r| (r - centre).abs()).collect();
    (1.345 * 1.4826 * median(&deviations)).max(0.05)
}

/// Huber loss with a fixed δ of 0.3 in log space (≈ 35 % relative error): squared below,
/// linear above, so one wild measurement cannot drag a fitted scalar.
fn huber_loss(residuals: impl Iterator<Item = f64>) -> f64 {
    const DELTA: f64 = 0.3;
    residuals
        .map(|r| {
            let a = r.abs();
            if a <= DELTA {
                0.5 * a * a
            } else {
                DELTA * (a - 0.5 * DELTA)
            }
        })
        .sum()
}

#[cfg(test)]
#[path = "physics_tests.rs"]
mod tests;

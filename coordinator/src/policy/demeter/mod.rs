//! The Demeter policy (design §4) as a sans-IO state machine.
//!
//! Every tick feeds the forecaster, the health watch and the observation memory. Two kinds of
//! epochs, driven by [`Policy::poll_timeout`]:
//! - a **risk check** every `risk_check_every_s` (and at once when latency is observed over
//!   the QoS or the backlog grows): if the current configuration is predicted to miss the QoS
//!   at the upper quantile of the maximum over the next `risk_horizon_s` (5 min), or is
//!   observed missing it, move now: in place first, sized for the sustained rate (the upper
//!   quantile of the long horizon's maximum, capped by the peak seen, so one move lasts through
//!   a rise) down to the risk rate (the highest that something allowed carries); restarts only
//!   into shapes that carry the peak seen in place; never costlier than a
//!   sufficient safe default (or the safe default when nothing is known);
//! - an **optimisation** every `optimise_every_s`: refresh the surrogates, plan for the point
//!   forecast of the maximum over `horizon_s` (1 h; never below the risk rate), profile if the
//!   model knows too little about the candidates that could save money and the budget allows
//!   (where no copy of them fits beside production, a shape probe on fewer TaskManagers:
//!   `probe.rs`), and move if a candidate saves enough to pay for the change (`choose.rs`); a batch ordered
//!   or running holds back restarts only, not in-place rescales.
//!
//! Every time constant comes from [`DemeterConfig`]; `DemeterConfig::compressed` scales them
//! for a replay of a day in minutes.
//!
//! Hysteresis: cost-saving moves wait `min_dwell_s` after any change (`dwell_after_risk_s`
//! after a QoS-risk move, which was sized for a rise, not chosen for cost) and need a saving of at
//! least `min_saving` that pays for its downtime and catch-up over `expected_dwell_s`;
//! scale-downs use the maximum over the whole horizon, so the rate must be forecast to stay
//! low; risk moves are rate-limited by `risk_cooldown_s` unless a violation is observed.
//!
//! Invariant: no clock, no I/O, no unseeded randomness; the same ticks and seed give the same
//! actions.

mod budget;
mod choose;
mod config;
mod epoch;
mod memory;
mod model;
mod overhead;
mod probe;
mod qos_budget;
mod rates;
mod reach;
mod risk;
#[cfg(test)]
mod tests;
mod watch;

use std::collections::VecDeque;
use std::time::Duration;

use crate::Result;
use crate::models::observations::Observation;
use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::{Action, ForecastSummary, JobTick, Policy, ProfilingRoom, ReconfigureOutcome};

pub use config::DemeterConfig;
use memory::Memory;
use model::Model;
use rates::Rates;
use watch::Watch;

/// Weight of the newest measured downtime in its running average.
const DOWNTIME_SMOOTHING: f64 = 0.3;

/// Builds the policy the `simulate` command and the daemon run.
pub fn demeter_policy(
    space: SearchSpace,
    qos: Qos,
    config: DemeterConfig,
    seed: u64,
) -> Result<DemeterPolicy> {
    DemeterPolicy::new(space, qos, config, seed)
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    to: JobConfig,
    downtime: choose::Downtime,
    since_s: f64,
    /// Ordered for a QoS risk (or the safe default), not for a saving.
    risk: bool,
}

#[derive(Debug)]
pub struct DemeterPolicy {
    candidates: Vec<JobConfig>,
    qos: Qos,
    cfg: DemeterConfig,
    safe: JobConfig,
    /// Safe default's total CPU cores and memory MB: the cost units.
    reference: (f64, f64),
    rates: Rates,
    /// The forecast of the latest decision epoch (for timelines and live views).
    last_forecast: Option<ForecastSummary>,
    memory: Memory,
    watch: Watch,
    model: Model,
    budget: budget::Budget,
    /// Reconfiguration tokens (see `DemeterConfig::max_changes_per_season`).
    changes: budget::Budget,
    current: Option<JobConfig>,
    in_flight: Option<InFlight>,
    profiling: Option<(u64, f64)>,
    /// What copies could get beside production, as last reported (None: unknown).
    room: Option<ProfilingRoom>,
    batches: u64,
    /// None until the policy changed something: the starting configuration was not its choice.
    last_change_s: Option<f64>,
    /// The last change was a QoS-risk move.
    last_change_risk: bool,
    last_risk_move_s: Option<f64>,
    /// Every copy of the last profiling batch missed the QoS.
    last_batch_drowned: bool,
    last_profile_s: Option<f64>,
    /// Learned downtime per [`choose::Downtime`] class.
    downtime_s: [f64; choose::Downtime::COUNT],
    /// Seconds over the QoS changes cost beyond the modelled ones, learned per class.
    overhead: overhead::ChangeOverhead,
    /// Seconds the policy's changes spent over the QoS, and the price factor they set.
    qos_budget: qos_budget::QosBudget,
    /// The job is catching up after a change of the policy's (its seconds over the QoS are
    /// the change's).
    settling_after_change: bool,
    started_s: Option<f64>,
    next_risk_s: f64,
    next_optimise_s: f64,
    actions: VecDeque<Action>,
}

impl DemeterPolicy {
    pub fn new(space: SearchSpace, qos: Qos, cfg: DemeterConfig, seed: u64) -> Result<Self> {
        cfg.validate()?;
        space.check()?;
        let candidates = space.candidates();
        let safe = match cfg.safe_default {
            Some(c) => {
                if let Some(why) = space.violation(&c) {
                    return Err(crate::Error::Model(format!("safe default {c}: {why}")));
                }
                c
            }
            None => safe_default(&space, &candidates),
        };
        let rates = Rates::new(&cfg)?;
        let reference = (safe.total_cpu_cores(), safe.total_memory_mb());
        Ok(DemeterPolicy {
            memory: Memory::new(
                cfg.window_s,
                cfg.window_rate_change,
                space.max_rate,
                cfg.max_production_observations,
                cfg.max_profiling_observations,
            ),
            watch: Watch::new(qos.latency_p95_ms, cfg.health_window_s, cfg.max_catch_up_s),
            model: Model::new(
                space.clone(),
                seed,
                cfg.fit_restarts,
                cfg.full_refit_every_s,
            ),
            budget: budget::Budget::new(cfg.profile_cpu_share * reference.0, cfg.profile_burst_h),
            changes: budget::Budget::tokens(
                cfg.max_changes_per_season / cfg.season_s.max(1) as f64,
                cfg.change_burst,
            ),
            downtime_s: [
                cfg.initial_inplace_downtime_s,
                cfg.initial_restart_downtime_s,
                cfg.initial_restart_downtime_s,
                cfg.initial_inplace_downtime_s,
            ],
            overhead: overhead::ChangeOverhead::default(),
            qos_budget: qos_budget::QosBudget::new(cfg.violation_budget, cfg.max_violation_factor),
            settling_after_change: false,
            candidates,
            qos,
            safe,
            reference,
            rates,
            last_forecast: None,
            current: None,
            in_flight: None,
            profiling: None,
            room: None,
            batches: 0,
            last_change_s: None,
            last_change_risk: false,
            last_risk_move_s: None,
            last_batch_drowned: false,
            last_profile_s: None,
            started_s: None,
            next_risk_s: 0.0,
            next_optimise_s: 0.0,
            actions: VecDeque::new(),
            cfg,
        })
    }

    /// The configuration fallen back to when nothing is known to be feasible.
    pub fn safe_default(&self) -> JobConfig {
        self.safe
    }

    /// Everything the model is fitted on now.
    pub fn observations(&self) -> Vec<Observation> {
        self.memory.observations()
    }

    /// Profiling CPU charged so far, core-seconds.
    pub fn profiling_core_seconds(&self) -> f64 {
        self.budget.spent()
    }

    fn learn_downtime(&mut self, class: choose::Downtime, seconds: f64) {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return;
        }
        let slot = &mut self.downtime_s[class as usize];
        *slot += DOWNTIME_SMOOTHING * (seconds - *slot);
    }

    fn forget_stale_orders(&mut self, now_s: f64) {
        if self
            .in_flight
            .is_some_and(|f| now_s - f.since_s > self.cfg.order_timeout_s as f64)
        {
            tracing::warn!(
                policy = "demeter",
                "reconfiguration never answered; forgotten"
            );
            self.in_flight = None;
        }
        // A batch may be deferred until production leaves room, then runs: generous, but
        // bounded by the policy's own cadences.
        let stale_profile = 3.0 * self.cfg.profile_run_s as f64 + self.cfg.optimise_every_s as f64;
        if self
            .profiling
            .is_some_and(|(_, since)| now_s - since > stale_profile)
        {
            tracing::warn!(
                policy = "demeter",
                "profiling batch never answered; forgotten"
            );
            self.profiling = None;
        }
    }
}

/// The paper's default if the space allows it, else the candidate with the most CPU, then
/// the most memory, then the shortest checkpoint interval... the biggest there is.
fn safe_default(space: &SearchSpace, candidates: &[JobConfig]) -> JobConfig {
    let paper = JobConfig::paper_default();
    if space.is_valid(&paper) {
        return paper;
    }
    candidates
        .iter()
        .copied()
        .max_by(|a, b| {
            a.total_cpu_cores()
                .total_cmp(&b.total_cpu_cores())
                .then(a.total_memory_mb().total_cmp(&b.total_memory_mb()))
                .then(a.parallelism.cmp(&b.parallelism))
        })
        .unwrap_or(paper)
}

fn secs(now: Duration) -> f64 {
    now.as_secs_f64()
}

impl Policy for DemeterPolicy {
    fn name(&self) -> &str {
        "demeter"
    }

    fn handle_profiling_room(&mut self, _now: Duration, room: ProfilingRoom) {
        self.room = Some(room);
    }

    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        let now_s = secs(now);
        if self.started_s.is_none() {
            self.started_s = Some(now_s);
            self.next_risk_s = now_s + self.cfg.risk_check_every_s as f64;
            self.next_optimise_s = now_s + self.cfg.first_decision_after_s as f64;
        }
        self.rates.observe(now.as_secs(), tick.rate);
        if self.in_flight.is_none() {
            self.current = Some(tick.config);
        }
        let facts = self.watch.on_tick(now_s, tick, self.in_flight.is_some());
        let down = tick.phase == crate::policy::JobPhase::Down;
        let over = down
            || tick
                .latency_p95_ms
                .is_some_and(|l| l > self.qos.latency_p95_ms);
        self.overhead
            .on_tick(now_s, over, down && self.in_flight.is_none());
        if self.settling_after_change && !self.watch.catching_up() {
            self.overhead.settled();
        }
        self.settling_after_change &= self.watch.catching_up();
        let ours = self.in_flight.is_some() || self.settling_after_change;
        self.qos_budget.on_tick(now_s, over, ours);
        self.memory.record_tick(now_s, tick, facts.steady);
        if let Some((config, rate, recovery_s)) = facts.recovery
            && let Some((latency, busy)) = self.memory.latest_of(&config)
        {
            let measured = Observation {
                config,
                rate,
                busy_fraction: busy,
                latency_p95_ms: latency,
                recovery_s: Some(recovery_s),
                cpu_cores: tick.cpu_cores,
                memory_mb: tick.memory_mb,
            };
            tracing::debug!(policy = "demeter", %config, rate, recovery_s, "recovery measured");
            self.memory.record_profiled(&[measured]);
        }
        let violated =
            self.watch.seconds_over() >= self.cfg.violation_seconds || self.watch.backlog_growing();
        if violated && self.in_flight.is_none() {
            self.next_risk_s = self.next_risk_s.min(now_s);
        }
    }

    fn handle_profile_results(&mut self, now: Duration, batch: u64, results: &[Observation]) {
        let now_s = secs(now);
        tracing::debug!(
            policy = "demeter",
            batch,
            results = results.len(),
            "profiling results"
        );
        for r in results {
            tracing::debug!(
                policy = "demeter",
                batch,
                config = %r.config,
                rate = r.rate,
                busy = r.busy_fraction,
                latency_ms = r.latency_p95_ms,
                recovery_s = r.recovery_s,
                "profiled copy"
            );
        }
        self.memory.record_profiled(results);
        // Saturated copies teach only where the job cannot run; the next batch may then spend
        // the budget on fewer, larger copies (see `maybe_profile`).
        self.last_batch_drowned = !results.is_empty()
            && results.iter().all(|r| {
                r.capacity_bound().is_some() || r.latency_p95_ms > self.qos.latency_p95_ms
            });
        if self.profiling.is_some_and(|(b, _)| b == batch) {
            self.profiling = None;
            // Decide with the new knowledge at once rather than at the next regular epoch.
            self.next_optimise_s = self.next_optimise_s.min(now_s);
        }
    }

    fn handle_reconfigured(&mut self, now: Duration, outcome: &ReconfigureOutcome) {
        let now_s = secs(now);
        let flight = self.in_flight.take();
        self.last_change_risk = flight.is_some_and(|f| f.risk);
        if let Some(flight) = flight
            && outcome.succeeded
        {
            debug_assert_eq!(flight.to, outcome.running);
            self.learn_downtime(flight.downtime, outcome.downtime_s);
        } else {
            self.overhead.abandon();
        }
        self.current = Some(outcome.running);
        self.last_change_s = Some(now_s);
        self.settling_after_change = true;
        self.memory.close_window();
    }

    fn handle_timeout(&mut self, now: Duration) {
        let now_s = secs(now);
        if self.started_s.is_none() {
            return;
        }
        self.forget_stale_orders(now_s);
        if now_s >= self.next_optimise_s {
            self.next_optimise_s = now_s + self.cfg.optimise_every_s as f64;
            self.next_risk_s = now_s + self.cfg.risk_check_every_s as f64;
            if let Err(e) = self.optimise(now) {
                tracing::warn!(policy = "demeter", error = %e, "optimisation epoch failed");
            }
        } else if now_s >= self.next_risk_s {
            self.next_risk_s = now_s + self.cfg.risk_check_every_s as f64;
            if let Err(e) = self.risk_check(now) {
                tracing::warn!(policy = "demeter", error = %e, "risk check failed");
            }
        }
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.started_s?;
        let next = self.next_risk_s.min(self.next_optimise_s).max(0.0);
        Some(Duration::from_secs_f64(next))
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn forecast(&self) -> Option<ForecastSummary> {
        self.last_forecast
    }
}

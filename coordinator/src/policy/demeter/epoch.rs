//! The two decision epochs of [`DemeterPolicy`]: the risk check and the optimisation.

use std::collections::HashSet;
use std::time::Duration;

use super::choose::{self, Context, Downtime, Moves, Scored, best_move, profile_batch};
use super::memory::{Shape, shape_of};
use super::probe::{Probe, shape_probe};
use super::rates::DecisionRates;
use super::reach::MeasurementNoise;
use super::risk::{
    RISK_MOVE_MIN_GAIN, Seen, cmp_odds, likeliest_move, risk_odds, stronger_than_current,
};
use super::{DemeterPolicy, InFlight};
use crate::Result;
use crate::models::space::JobConfig;
use crate::policy::{Action, ChangeKind, Decision, ForecastSummary, ProfilingRoom, Reason};

/// Rates tried, geometrically from the sustained rate down to the risk rate, for a risk move's
/// target.
const RISK_LEVELS: usize = 5;

/// Which shapes may be restarted into: acceptable at the peak rate with their largest
/// in-place configuration (for moves), or plausibly so (for profiling).
#[derive(Debug, Default)]
struct Carrying {
    carries: HashSet<Shape>,
    may_carry: HashSet<Shape>,
}

impl DemeterPolicy {
    fn context<'a>(&'a self, current: JobConfig, carrying: Option<&'a Carrying>) -> Context<'a> {
        Context {
            qos: &self.qos,
            cfg: &self.cfg,
            reference: self.reference,
            current,
            rate_now: self.rates.now(),
            downtime_s: self.downtime_s,
            overhead_s: self.overhead.extra_s(),
            measured: self.memory.measured_shapes(),
            carries: carrying.map(|c| &c.carries),
            may_carry: carrying.map(|c| &c.may_carry),
            violation_factor: self.qos_budget.price_factor(),
            noise: self.measurement_noise(),
        }
    }

    /// The fitted noise of the latency and recovery surrogates (zero before they are fitted).
    fn measurement_noise(&self) -> MeasurementNoise {
        let (latency_log_sd, recovery_log_sd) = self
            .model
            .surrogate()
            .map_or((0.0, 0.0), |s| s.constraint_noise_sd());
        MeasurementNoise {
            latency_log_sd,
            recovery_log_sd,
        }
    }

    /// The candidates costing at most `max_cost` (and the current configuration) at `rate`:
    /// what costs more can be neither a saving nor an allowed risk move, so it is not predicted;
    /// nor is what the headroom rule excludes whatever its uncertainty.
    fn score_all(&self, current: JobConfig, rate: f64, max_cost: f64) -> Result<Vec<Scored>> {
        let configs = self.with_headroom(&self.cheap_enough(current, max_cost), rate)?;
        self.predict_scored(current, configs, rate)
    }

    /// For a last-resort risk move, when nothing has the headroom (the strongest candidate is
    /// still better than drowning): the candidates costing at most `max_cost` whose median
    /// capacity at `rate` is what [`stronger_than_current`] keeps, and the current one. The
    /// median screen spares the full prediction of the rest: on a job nothing in its cluster
    /// carries, predicting every candidate at each risk check took up to 2 s.
    fn score_stronger(&self, current: JobConfig, rate: f64, max_cost: f64) -> Result<Vec<Scored>> {
        let Some(surrogate) = self.model.surrogate() else {
            return Ok(Vec::new());
        };
        let mut configs = self.cheap_enough(current, max_cost);
        configs.push(current);
        let medians = surrogate.capacity_medians(&configs, rate)?;
        let now = medians.last().copied().unwrap_or(0.0);
        let stronger: Vec<JobConfig> = configs
            .iter()
            .zip(&medians)
            .filter(|(c, median)| {
                **c != current && **median >= RISK_MOVE_MIN_GAIN * now * (1.0 - 1e-9)
            })
            .map(|(c, _)| *c)
            .collect();
        let scored = self.predict_scored(current, stronger, rate)?;
        Ok(stronger_than_current(scored, current))
    }

    /// The candidates other than `current` costing at most `max_cost`.
    fn cheap_enough(&self, current: JobConfig, max_cost: f64) -> Vec<JobConfig> {
        let ctx = self.context(current, None);
        self.candidates
            .iter()
            .copied()
            .filter(|c| ctx.cost(c) <= max_cost * (1.0 + 1e-9) && *c != current)
            .collect()
    }

    /// `configs` and `current`, predicted at `rate` and scored.
    fn predict_scored(
        &self,
        current: JobConfig,
        mut configs: Vec<JobConfig>,
        rate: f64,
    ) -> Result<Vec<Scored>> {
        let Some(surrogate) = self.model.surrogate() else {
            return Ok(Vec::new());
        };
        let ctx = self.context(current, None);
        configs.push(current);
        Ok(surrogate
            .predict_many(&configs, rate)?
            .into_iter()
            .map(|p| Scored::new(&ctx, p))
            .collect())
    }

    /// The configurations in `configs` whose median capacity leaves the headroom
    /// `max_utilisation` at `rate`. The headroom rule judges capacity at or below its median,
    /// so the others are unusable whatever the model's uncertainty: screening them on the
    /// posterior mean (no variance, no triangular solve) spares most of a full prediction.
    fn with_headroom(&self, configs: &[JobConfig], rate: f64) -> Result<Vec<JobConfig>> {
        let Some(surrogate) = self.model.surrogate() else {
            return Ok(configs.to_vec());
        };
        let medians = surrogate.capacity_medians(configs, rate)?;
        Ok(configs
            .iter()
            .zip(medians)
            .filter(|(_, median)| rate <= self.cfg.max_utilisation * median)
            .map(|(c, _)| *c)
            .collect())
    }

    /// Shapes whose largest configuration in the grid (the most an in-place rescale can reach)
    /// is acceptable, or plausible, at `peak`.
    fn carrying(&self, current: JobConfig, peak: f64) -> Result<Carrying> {
        let Some(surrogate) = self.model.surrogate() else {
            return Ok(Carrying::default());
        };
        let mut largest: Vec<JobConfig> = Vec::new();
        for c in &self.candidates {
            match largest.iter_mut().find(|l| shape_of(l) == shape_of(c)) {
                Some(l) if l.parallelism < c.parallelism => *l = *c,
                Some(_) => {}
                None => largest.push(*c),
            }
        }
        let ctx = self.context(current, None);
        let mut carrying = Carrying::default();
        let largest = self.with_headroom(&largest, peak)?;
        for p in surrogate.predict_many(&largest, peak)? {
            let s = Scored::new(&ctx, p);
            let shape = shape_of(&p.config);
            if s.acceptable(&self.cfg) {
                carrying.carries.insert(shape);
            }
            // Plausible: the median capacity has the headroom (unmeasured shapes are uncertain,
            // and profiling is how they become known).
            let median_utilisation = peak / p.capacity.median().max(1e-9);
            if median_utilisation <= self.cfg.max_utilisation
                && s.p_feasible >= self.cfg.min_plausible
            {
                carrying.may_carry.insert(shape);
            }
        }
        Ok(carrying)
    }

    /// P(feasible) of `config` at `rate`.
    pub(super) fn p_feasible(&self, config: JobConfig, rate: f64) -> Result<f64> {
        let Some(s) = self.model.surrogate() else {
            return Ok(1.0);
        };
        let p = s.predict(&config, rate)?;
        tracing::debug!(
            policy = "demeter",
            %config,
            rate,
            capacity = p.capacity.median(),
            capacity_sd = p.capacity.log_sd,
            latency_ms = p.latency_p95_ms.median(),
            latency_sd = p.latency_p95_ms.log_sd,
            recovery_s = p.recovery_s.median(),
            recovery_sd = p.recovery_s.log_sd,
            "prediction"
        );
        Ok(p.p_feasible(&self.qos))
    }

    fn observed_violation(&self) -> bool {
        self.watch.seconds_over() >= self.cfg.violation_seconds || self.watch.backlog_growing()
    }

    fn refresh_model(&mut self, now_s: f64) -> Result<()> {
        let changed = self.memory.take_changed();
        let observations = self.memory.observations();
        let refresh = self.model.refresh(now_s, &observations, changed)?;
        tracing::debug!(
            policy = "demeter",
            n = observations.len(),
            ?refresh,
            "model refreshed"
        );
        Ok(())
    }

    fn decide_rates(&mut self) -> DecisionRates {
        let rates = self.rates.decide();
        tracing::trace!(
            policy = "demeter",
            now = self.rates.now(),
            risk = rates.risk,
            plan = rates.plan,
            expected = rates.expected,
            sustain = rates.sustain,
            peak = rates.peak,
            "decision rates"
        );
        self.last_forecast = Some(rates.summary);
        rates
    }

    pub(super) fn risk_check(&mut self, now: Duration) -> Result<()> {
        let now_s = now.as_secs_f64();
        let Some(current) = self.current else {
            return Ok(());
        };
        if self.in_flight.is_some() || self.watch.catching_up() {
            return Ok(());
        }
        self.refresh_model(now_s)?;
        let rates = self.decide_rates();
        let p_current = self.p_feasible(current, rates.risk)?;
        let observed = self.observed_violation();
        if p_current >= self.cfg.risk_probability && !observed {
            return Ok(());
        }
        let cooling = self
            .last_risk_move_s
            .is_some_and(|t| now_s - t < self.cfg.risk_cooldown_s as f64);
        if cooling && !observed {
            return Ok(());
        }
        self.move_now(now, current, p_current, rates)
    }

    /// The current configuration is (predicted) at risk. The move, in order of preference:
    /// the acceptable candidate best for the plan (cheapest running cost plus change cost),
    /// restarting only into a shape that carries the peak in place if there is one; else the
    /// acceptable one for the risk rate alone; else, best effort, the candidate most likely to
    /// meet the QoS at the risk rate if it is likelier than the current one. Never costlier
    /// than the safe default unless the safe default is believed unable to carry even the
    /// expected rate (the upper quantile alone does not lift the cap: a forecast margin is no
    /// reason to pay more than the operator's own peak configuration).
    fn move_now(
        &mut self,
        now: Duration,
        current: JobConfig,
        p_current: f64,
        rates: DecisionRates,
    ) -> Result<()> {
        let now_s = now.as_secs_f64();
        if self.model.surrogate().is_none() {
            if current != self.safe {
                self.fall_back_to_safe_default(now, current, rates);
            }
            return Ok(());
        }
        let safe_cost = self.context(current, None).cost(&self.safe);
        let safe_enough = self.p_feasible(self.safe, rates.expected)? >= self.cfg.risk_probability;
        let max_cost = if safe_enough {
            safe_cost
        } else {
            self.cfg
                .max_risk_cost
                .map_or(f64::INFINITY, |factor| safe_cost * factor)
        };
        let carrying = self.carrying(current, rates.peak)?;
        let mut found = None;
        // Sized for the sustained rate if anything allowed carries it, else for the highest
        // rate between it and the risk rate that something carries: following a climb one step
        // per check (the 1-h point forecast lags a rise) cost a change per step, each a minute
        // over the QoS. Sizing for the peak seen alone was tried: fewer changes, but up to +0.2
        // cost on other traces (a scaled CARS held peak capacity through every small rise); the
        // calibrated upper quantile caps it where the season does not forecast the peak.
        // Measured (benchmark twin, 6 traces/twins): changes 123 → 109, seconds over the QoS
        // −12 %, cost +3 %.
        let mut levels: Vec<f64> = Vec::with_capacity(RISK_LEVELS);
        levels.extend((0..RISK_LEVELS).map(|k| {
            let f = k as f64 / (RISK_LEVELS - 1) as f64;
            rates.sustain.powf(1.0 - f) * rates.risk.powf(f)
        }));
        // In place if that carries at least the risk rate (a restart is a minute or two over
        // the QoS), then restarts into a shape that carries the peak, then any restart.
        let mut by_level: Vec<Option<Vec<Scored>>> = vec![None; levels.len()];
        let passes = [
            (Moves::InPlace, false),
            (Moves::Any, true),
            (Moves::Any, false),
        ];
        'search: for (moves, restrict) in passes {
            for (k, &rate) in levels.iter().enumerate() {
                if by_level[k].is_none() {
                    let scored = self.score_all(current, rate, max_cost)?;
                    by_level[k] = Some(stronger_than_current(scored, current));
                }
                let Some(scored) = by_level[k].as_deref() else {
                    continue;
                };
                let ctx = self.context(current, restrict.then_some(&carrying));
                let verdict = best_move(&ctx, scored, true, moves);
                if let Some(chosen) = verdict.chosen {
                    let rejected = verdict
                        .best_rejected
                        .map(|(i, why)| (scored[i].numbers(), why));
                    found = Some((rate, scored[chosen.index], rejected));
                    break 'search;
                }
            }
        }
        if found.is_none() {
            let scored = self.score_stronger(current, rates.risk, max_cost)?;
            let ctx = self.context(current, None);
            // Only a violation seen, not one forecast, justifies a leap by restart: its odds
            // are the model's extrapolation, and a restart into one that then drowned cost more
            // than the risk it fled.
            let seen = if self.watch.backlog_growing() {
                Seen::Drowning
            } else if self.observed_violation() {
                Seen::OverQos
            } else {
                Seen::Forecast
            };
            let likeliest = likeliest_move(&ctx, &scored, seen);
            let odds = |s: &Scored| risk_odds(s, &self.cfg);
            let stay = scored.iter().find(|s| s.prediction.config == current);
            let current_p = stay.map_or(p_current, |s| s.usable_probability(&self.cfg));
            let current_odds = stay.map_or((p_current, p_current, f64::NEG_INFINITY), odds);
            if let Some(best) = likeliest
                && cmp_odds(odds(best), current_odds).is_gt()
            {
                let why = format!(
                    "staying: P(feasible) {current_p:.2}; nothing is acceptable at {:.0}/s, the \
                     move is to the likeliest to meet the QoS",
                    rates.risk
                );
                let rejected = stay.map(|s| (s.numbers(), why));
                found = Some((rates.risk, *best, rejected));
            }
        }
        let Some((rate, target, rejected)) = found else {
            tracing::warn!(policy = "demeter", %current, p_current, rate = rates.risk, "at risk, and no candidate is likelier to meet the QoS");
            return Ok(());
        };
        self.last_risk_move_s = Some(now_s);
        let decision = Decision {
            at: now,
            reason: Reason::QosRisk {
                p_feasible: p_current,
            },
            forecast: Some(ForecastSummary {
                upper_max: rate,
                ..rates.summary
            }),
            chosen: Some(target.numbers()),
            best_rejected: rejected,
        };
        self.reconfigure(now_s, current, target.prediction.config, decision);
        Ok(())
    }

    /// Nothing is known yet: the safe default.
    fn fall_back_to_safe_default(
        &mut self,
        now: Duration,
        current: JobConfig,
        rates: DecisionRates,
    ) {
        let now_s = now.as_secs_f64();
        self.last_risk_move_s = Some(now_s);
        let decision = Decision {
            at: now,
            reason: Reason::SafeDefault,
            forecast: Some(rates.summary),
            chosen: None,
            best_rejected: None,
        };
        self.reconfigure(now_s, current, self.safe, decision);
    }

    fn reconfigure(&mut self, now_s: f64, from: JobConfig, to: JobConfig, decision: Decision) {
        let kind = ChangeKind::between(&from, &to);
        self.changes.charge(now_s, 1.0);
        tracing::info!(policy = "demeter", %from, %to, ?kind, reason = ?decision.reason, "reconfigure");
        let class = Downtime::of(&from, &to);
        let rate_now = self.rates.now();
        let modelled = self
            .model
            .surrogate()
            .and_then(|s| s.predict(&to, rate_now).ok())
            .map(|p| {
                choose::modelled_over_qos_s(
                    self.downtime_s[class as usize],
                    p.capacity.median(),
                    rate_now,
                )
            });
        self.overhead.ordered(class, modelled);
        self.in_flight = Some(InFlight {
            to,
            downtime: class,
            since_s: now_s,
            risk: matches!(
                decision.reason,
                Reason::QosRisk { .. } | Reason::SafeDefault
            ),
        });
        self.memory.close_window();
        self.actions
            .push_back(Action::Reconfigure { to, kind, decision });
    }

    pub(super) fn optimise(&mut self, now: Duration) -> Result<()> {
        let now_s = now.as_secs_f64();
        let Some(current) = self.current else {
            return Ok(());
        };
        if self.in_flight.is_some() {
            return Ok(());
        }
        self.refresh_model(now_s)?;
        let rates = self.decide_rates();
        let p_current = self.p_feasible(current, rates.risk)?;
        let must_move = !self.watch.catching_up()
            && (p_current < self.cfg.risk_probability || self.observed_violation());
        let current_cost = self.context(current, None).cost(&current);
        let scored = self.score_all(current, rates.plan, current_cost)?;
        if scored.is_empty() {
            return Ok(());
        }
        let carrying = self.carrying(current, rates.peak)?;
        let profiled = self.maybe_profile(now, current, &rates, &scored, &carrying)?;
        if must_move {
            return self.move_now(now, current, p_current, rates);
        }
        // A saving can wait out a catch-up: a change now stops a job still draining a
        // failure's backlog, and the recovery runs past its QoS (flat trace, seed 3: a restart
        // 108 s into a recovery made it 217 s against 180).
        if self.watch.catching_up() {
            return Ok(());
        }
        let dwell_s = match self.cfg.dwell_after_risk_s {
            Some(after_risk) if self.last_change_risk => after_risk,
            _ => self.cfg.min_dwell_s,
        };
        let dwelling = self
            .last_change_s
            .is_some_and(|t| now_s - t < dwell_s as f64);
        // A saving spends a change the operator tolerates; keep the reserve for QoS risks.
        let limited = self.cfg.max_changes_per_season > 0.0;
        let tokens = self.changes.available(now_s);
        if dwelling || (limited && tokens < 1.0 + self.cfg.change_reserve) {
            return Ok(());
        }
        // A batch ordered now or still running (for no longer than a batch should take) may
        // find a cheaper shape: a move onto a new shape waits for it. Another parallelism of
        // the measured current shape does not depend on what it finds, so it is not held back
        // (profiling batches deferred for room, or a compressed replay, would otherwise starve
        // every move).
        let awaiting = self
            .profiling
            .is_some_and(|(_, since)| now_s - since < self.cfg.profile_run_s as f64);
        let ctx = self.context(current, Some(&carrying));
        let moves = if profiled || awaiting {
            Moves::SameShape
        } else {
            Moves::Any
        };
        let verdict = best_move(&ctx, &scored, false, moves);
        let Some(chosen) = verdict.chosen else {
            // Why the job stays where it is is the question operators ask of a quiet policy;
            // the best candidate's rejection answers it without a stored decision per epoch.
            if let Some((i, why)) = &verdict.best_rejected {
                tracing::debug!(
                    policy = "demeter",
                    current = %current,
                    rate = rates.plan,
                    best_rejected = %scored[*i].prediction.config,
                    why = %why,
                    "staying"
                );
            }
            return Ok(());
        };
        let decision = Decision {
            at: now,
            reason: Reason::Cheaper {
                saving: chosen.saving / current_cost.max(1e-9),
            },
            forecast: Some(rates.summary),
            chosen: Some(scored[chosen.index].numbers()),
            best_rejected: verdict
                .best_rejected
                .map(|(i, why)| (scored[i].numbers(), why)),
        };
        let to = scored[chosen.index].prediction.config;
        self.reconfigure(now_s, current, to, decision);
        Ok(())
    }

    /// Orders a profiling batch when the model knows too little and the budget, the gap and
    /// the absence of a running batch allow. True if one was ordered.
    fn maybe_profile(
        &mut self,
        now: Duration,
        current: JobConfig,
        rates: &DecisionRates,
        scored: &[Scored],
        carrying: &Carrying,
    ) -> Result<bool> {
        let now_s = now.as_secs_f64();
        let gap_ok = self
            .last_profile_s
            .is_none_or(|t| now_s - t >= self.cfg.min_profile_gap_s as f64);
        if self.profiling.is_some() || !gap_ok || self.cfg.max_copies == 0 {
            return Ok(false);
        }
        let mut available = self.budget.available(now_s);
        let ctx = self.context(current, Some(carrying));
        let run_s = self.cfg.profile_run_s as f64;
        // Production always wins: a copy that does not fit beside it now would wait for room,
        // and by the time production shrinks the rate it was ordered for is gone.
        let mut room = self.room.unwrap_or(ProfilingRoom {
            cpu_cores: f64::INFINITY,
            memory_mb: f64::INFINITY,
        });
        let limit = |cores: f64| ProfilingRoom {
            cpu_cores: cores.min(room.cpu_cores),
            memory_mb: room.memory_mb,
        };
        // A copy may take half of what the budget holds, so a batch can compare two: an equal
        // share among `max_copies` left nothing plausible to profile when the job needs most
        // of its cores (the ranking charges each copy its running cost anyway). After a batch
        // that only taught where the job drowns, any copy the budget can pay for may go.
        let per_copy = available / (self.cfg.max_copies.min(2) as f64 * run_s);
        let q = self.cfg.max_copies;
        let mut batch = profile_batch(&ctx, scored, q, limit(per_copy))?;
        if batch.is_none() && self.last_batch_drowned {
            batch = profile_batch(&ctx, scored, q, limit(available / run_s))?;
        }
        let Some(batch) = batch else {
            // Production held its configuration long enough for a shape found now to last.
            let held = self
                .last_change_s
                .is_none_or(|t| now_s - t >= self.cfg.probe_after_s as f64);
            let probe = held
                .then(|| shape_probe(&ctx, scored, room, available, run_s))
                .flatten();
            return Ok(probe.is_some_and(|probe| {
                self.order_probe(now, rates, scored, probe);
                true
            }));
        };
        // Keep the picks (best first) the budget can pay for and the room can hold.
        let mut configs = Vec::new();
        for config in batch.configs {
            let charge = config.total_cpu_cores() * run_s;
            let fits = config.total_cpu_cores() <= room.cpu_cores
                && config.total_memory_mb() <= room.memory_mb;
            if charge <= available && fits {
                available -= charge;
                room.cpu_cores -= config.total_cpu_cores();
                room.memory_mb -= config.total_memory_mb();
                configs.push(config);
            }
        }
        if configs.is_empty() {
            return Ok(false);
        }
        let charge: f64 = configs.iter().map(|c| c.total_cpu_cores() * run_s).sum();
        self.budget.charge(now_s, charge);
        self.batches += 1;
        let id = self.batches;
        self.profiling = Some((id, now_s));
        self.last_profile_s = Some(now_s);
        let numbers = |c: &JobConfig| scored.iter().find(|s| s.prediction.config == *c);
        let best_known = scored
            .iter()
            .filter(|s| s.acceptable(&self.cfg))
            .min_by(|a, b| a.cost.total_cmp(&b.cost));
        let decision = Decision {
            at: now,
            reason: Reason::ProfileUncertain {
                miss_probability: batch.miss_probability,
            },
            forecast: Some(rates.summary),
            chosen: configs.first().and_then(numbers).map(Scored::numbers),
            best_rejected: best_known.map(|s| {
                (
                    s.numbers(),
                    format!(
                        "cheapest acceptable, but P(missing a cheaper feasible one) = {:.2}",
                        batch.miss_probability
                    ),
                )
            }),
        };
        let rate = rates.plan;
        tracing::info!(
            policy = "demeter",
            batch = id,
            copies = configs.len(),
            rate,
            miss = batch.miss_probability,
            "profile"
        );
        self.actions.push_back(Action::Profile {
            batch: id,
            candidates: configs,
            rate,
            decision,
        });
        Ok(true)
    }

    /// Orders `probe` (no batch fits beside production) as a batch of one copy at its share of
    /// the plan rate.
    fn order_probe(
        &mut self,
        now: Duration,
        rates: &DecisionRates,
        scored: &[Scored],
        probe: Probe,
    ) {
        let now_s = now.as_secs_f64();
        let run_s = self.cfg.profile_run_s as f64;
        self.budget
            .charge(now_s, probe.copy.total_cpu_cores() * run_s);
        self.batches += 1;
        let id = self.batches;
        self.profiling = Some((id, now_s));
        self.last_profile_s = Some(now_s);
        let rate = rates.plan * probe.share;
        let numbers = scored
            .iter()
            .find(|s| s.prediction.config == probe.candidate)
            .map(Scored::numbers);
        let decision = Decision {
            at: now,
            reason: Reason::ProfileShape {
                candidate: probe.candidate,
            },
            forecast: Some(rates.summary),
            chosen: numbers,
            best_rejected: None,
        };
        tracing::info!(
            policy = "demeter",
            batch = id,
            candidate = %probe.candidate,
            copy = %probe.copy,
            rate,
            "probe a shape on fewer TaskManagers"
        );
        self.actions.push_back(Action::Profile {
            batch: id,
            candidates: vec![probe.copy],
            rate,
            decision,
        });
    }
}

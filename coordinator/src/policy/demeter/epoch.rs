//! The two decision epochs of [`DemeterPolicy`]: the risk check and the optimisation.

use std::time::Duration;

use super::choose::{Context, Scored, best_move, profile_batch};
use super::{DemeterPolicy, InFlight};
use crate::Result;
use crate::models::forecast::Forecaster;
use crate::models::space::JobConfig;
use crate::policy::{Action, ChangeKind, Decision, ForecastSummary, Reason};

/// Margin on the recent maximum while the forecaster is still warming up.
const WARMUP_MARGIN: f64 = 0.15;

impl DemeterPolicy {
    /// The rate to decide for over `horizon_s`: the forecast's upper quantile of the maximum,
    /// never below the rate now; the recent maximum plus a margin before the first forecast.
    fn decision_rate(&self, horizon_s: u32) -> (f64, ForecastSummary) {
        match self.forecaster.forecast(horizon_s) {
            Some(f) => {
                let rate = f.upper_max.max(self.rate_now);
                let summary = ForecastSummary {
                    horizon_s,
                    point_max: f.point_max,
                    upper_max: rate,
                };
                (rate, summary)
            }
            None => {
                let recent = self.watch.recent_max_rate(900).unwrap_or(self.rate_now);
                let rate = recent * (1.0 + WARMUP_MARGIN);
                let summary = ForecastSummary {
                    horizon_s,
                    point_max: recent,
                    upper_max: rate,
                };
                (rate, summary)
            }
        }
    }

    fn context(&self, current: JobConfig) -> Context<'_> {
        Context {
            qos: &self.qos,
            cfg: &self.cfg,
            reference: self.reference,
            current,
            rate_now: self.rate_now,
            downtime_s: self.downtime_s,
            measured: self.memory.measured_shapes(),
        }
    }

    /// Every candidate (and the current configuration, if off the grid) at `rate`.
    fn score_all(&self, current: JobConfig, rate: f64) -> Result<Vec<Scored>> {
        let Some(surrogate) = self.model.surrogate() else {
            return Ok(Vec::new());
        };
        let mut configs = self.candidates.clone();
        if !configs.contains(&current) {
            configs.push(current);
        }
        let ctx = self.context(current);
        Ok(surrogate
            .predict_many(&configs, rate)?
            .into_iter()
            .map(|p| Scored::new(&ctx, p))
            .collect())
    }

    /// P(feasible) of the current configuration at the risk horizon's upper rate.
    fn current_risk(&self, current: JobConfig) -> Result<(f64, ForecastSummary)> {
        let (rate, summary) = self.decision_rate(self.cfg.risk_horizon_s);
        let p = match self.model.surrogate() {
            Some(s) => {
                let p = s.predict(&current, rate)?;
                tracing::debug!(
                    policy = "demeter",
                    %current,
                    rate,
                    capacity = p.capacity.median(),
                    capacity_sd = p.capacity.log_sd,
                    latency_ms = p.latency_p95_ms.median(),
                    latency_sd = p.latency_p95_ms.log_sd,
                    recovery_s = p.recovery_s.median(),
                    recovery_sd = p.recovery_s.log_sd,
                    "current configuration at the risk horizon"
                );
                p.p_feasible(&self.qos)
            }
            None => 1.0,
        };
        Ok((p, summary))
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

    pub(super) fn risk_check(&mut self, now: Duration) -> Result<()> {
        let now_s = now.as_secs_f64();
        let Some(current) = self.current else {
            return Ok(());
        };
        if self.in_flight.is_some() || self.watch.catching_up() {
            return Ok(());
        }
        self.refresh_model(now_s)?;
        let (p_current, _) = self.current_risk(current)?;
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
        self.move_now(now, current, p_current)
    }

    /// The current configuration is (predicted) at risk: the acceptable candidate best for the
    /// long horizon, at any cost; the safe default when none is acceptable.
    fn move_now(&mut self, now: Duration, current: JobConfig, p_current: f64) -> Result<()> {
        let now_s = now.as_secs_f64();
        // Good for the long horizon if possible; else at least for the risk horizon (a trend
        // extrapolated over an hour can ask for more than any configuration has).
        let mut attempt = None;
        for horizon in [self.cfg.horizon_s, self.cfg.risk_horizon_s] {
            let (rate, forecast) = self.decision_rate(horizon);
            let scored = self.score_all(current, rate)?;
            let verdict = best_move(&self.context(current), &scored, true);
            let found = verdict.chosen.is_some();
            attempt = Some((forecast, scored, verdict));
            if found {
                break;
            }
        }
        let Some((forecast, scored, verdict)) = attempt else {
            return Ok(());
        };
        let rejected = verdict
            .best_rejected
            .map(|(i, why)| (scored[i].numbers(), why));
        let (to, reason, chosen) = match verdict.chosen {
            Some(c) => (
                scored[c.index].prediction.config,
                Reason::QosRisk {
                    p_feasible: p_current,
                },
                Some(scored[c.index].numbers()),
            ),
            None if current != self.safe => {
                let numbers = scored
                    .iter()
                    .find(|s| s.prediction.config == self.safe)
                    .map(Scored::numbers);
                (self.safe, Reason::SafeDefault, numbers)
            }
            None => {
                tracing::warn!(policy = "demeter", %current, p_current, "at risk on the safe default already");
                return Ok(());
            }
        };
        self.last_risk_move_s = Some(now_s);
        let decision = Decision {
            at: now,
            reason,
            forecast: Some(forecast),
            chosen,
            best_rejected: rejected,
        };
        self.reconfigure(now_s, current, to, decision);
        Ok(())
    }

    fn reconfigure(&mut self, now_s: f64, from: JobConfig, to: JobConfig, decision: Decision) {
        let kind = ChangeKind::between(&from, &to);
        tracing::info!(policy = "demeter", %from, %to, ?kind, reason = ?decision.reason, "reconfigure");
        self.in_flight = Some(InFlight {
            to,
            kind,
            since_s: now_s,
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
        let (p_current, _) = self.current_risk(current)?;
        let must_move = !self.watch.catching_up()
            && (p_current < self.cfg.risk_probability || self.observed_violation());
        let (rate, forecast) = self.decision_rate(self.cfg.horizon_s);
        let scored = self.score_all(current, rate)?;
        if scored.is_empty() {
            return Ok(());
        }
        if self.maybe_profile(now, current, rate, forecast, &scored)? && !must_move {
            return Ok(());
        }
        if must_move {
            return self.move_now(now, current, p_current);
        }
        let dwelling = self
            .last_change_s
            .is_some_and(|t| now_s - t < self.cfg.min_dwell_s as f64);
        if self.profiling.is_some() || dwelling {
            return Ok(());
        }
        let ctx = self.context(current);
        let current_cost = ctx.cost(&current);
        let verdict = best_move(&ctx, &scored, false);
        let Some(chosen) = verdict.chosen else {
            return Ok(());
        };
        let decision = Decision {
            at: now,
            reason: Reason::Cheaper {
                saving: chosen.saving / current_cost.max(1e-9),
            },
            forecast: Some(forecast),
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
        rate: f64,
        forecast: ForecastSummary,
        scored: &[Scored],
    ) -> Result<bool> {
        let now_s = now.as_secs_f64();
        let gap_ok = self
            .last_profile_s
            .is_none_or(|t| now_s - t >= self.cfg.min_profile_gap_s as f64);
        if self.profiling.is_some() || !gap_ok || self.cfg.max_copies == 0 {
            return Ok(false);
        }
        let mut available = self.budget.available(now_s);
        let ctx = self.context(current);
        let run_s = self.cfg.profile_run_s as f64;
        // A copy may take its share of what the budget holds, so a batch has several copies.
        let per_copy = available / (self.cfg.max_copies as f64 * run_s);
        let q = self.cfg.max_copies;
        let Some(batch) = profile_batch(&ctx, scored, q, per_copy)? else {
            return Ok(false);
        };
        // Keep the picks (best first) the budget can pay for.
        let mut configs = Vec::new();
        for config in batch.configs {
            let charge = config.total_cpu_cores() * run_s;
            if charge <= available {
                available -= charge;
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
            forecast: Some(forecast),
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
}

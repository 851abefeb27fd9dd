//! The QoS budget of changes: what share of the seconds the policy's own changes have spent
//! over the latency QoS, against the share the operator allows, and the factor by which a
//! change's price rises while that share runs over.
//!
//! Why adaptive: a second over the QoS is priced once, in `violation_cost_s`, but what a change
//! really costs in such seconds depends on the job (state size, TaskManager start, how close
//! to its limit it runs) far more than on the trace. A fixed price that keeps one job inside
//! its budget lets a slower one run over it (measured: the perturbed twin spent 2.2–2.7 % of
//! its seconds over the QoS at the price the benchmark twin spends 1.2 % at).

/// Seconds of virtual history at exactly the budget the estimate starts from: one early change
/// (a minute over the QoS in the first hour is 1.7 % of it) must not read as a trend.
const PRIOR_S: f64 = 6.0 * 3_600.0;

/// Ticks further apart than this count as this long: a gap in observations is not time the
/// job was watched.
const MAX_TICK_S: f64 = 60.0;

#[derive(Debug, Clone)]
pub struct QosBudget {
    /// Share of seconds the policy's changes may spend over the QoS (0: no budget, factor 1).
    share: f64,
    max_factor: f64,
    over_s: f64,
    watched_s: f64,
    last_tick_s: Option<f64>,
    /// The factor last logged: an operator sees the price move, not every tick.
    logged_factor: f64,
}

/// A factor this far from the one last logged is logged again.
const LOG_STEP: f64 = 0.5;

impl QosBudget {
    pub fn new(share: f64, max_factor: f64) -> Self {
        QosBudget {
            share,
            max_factor: max_factor.max(1.0),
            over_s: 0.0,
            watched_s: 0.0,
            last_tick_s: None,
            logged_factor: 1.0,
        }
    }

    /// One observation of production. `over`: down, or its latency over the QoS; `ours`: a
    /// change of the policy's is in flight or the job is still catching up after one.
    pub fn on_tick(&mut self, now_s: f64, over: bool, ours: bool) {
        let dt = self
            .last_tick_s
            .map_or(0.0, |last| (now_s - last).clamp(0.0, MAX_TICK_S));
        self.last_tick_s = Some(now_s);
        self.watched_s += dt;
        if over && ours {
            self.over_s += dt;
        }
        let factor = self.price_factor();
        if (factor - self.logged_factor).abs() >= LOG_STEP {
            self.logged_factor = factor;
            tracing::info!(
                policy = "demeter",
                factor,
                spent_share = self.spent_share(),
                budget = self.share,
                "changes' seconds over the QoS against their budget: change price factor moved"
            );
        }
    }

    /// Share of the watched seconds the changes spent over the QoS, starting from the budget.
    pub fn spent_share(&self) -> f64 {
        (self.over_s + self.share * PRIOR_S) / (self.watched_s + PRIOR_S)
    }

    /// What a second over the QoS is worth now relative to `violation_cost_s`: 1 within the
    /// budget, rising with the overspend up to `max_factor`. Never below 1: the operator's price
    /// is the floor; an underspent budget says the changes were affordable, not that they were
    /// worth more of them (lowering it was not measured).
    pub fn price_factor(&self) -> f64 {
        if self.share <= 0.0 {
            return 1.0;
        }
        (self.spent_share() / self.share).clamp(1.0, self.max_factor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(budget: &mut QosBudget, from_s: f64, seconds: u32, over: bool, ours: bool) -> f64 {
        for i in 0..=seconds {
            budget.on_tick(from_s + f64::from(i), over, ours);
        }
        from_s + f64::from(seconds)
    }

    #[test]
    fn within_the_budget_the_price_stands() {
        let mut b = QosBudget::new(0.01, 4.0);
        let t = watch(&mut b, 0.0, 36_000, false, false);
        watch(&mut b, t, 300, true, true);
        assert_eq!(b.price_factor(), 1.0);
    }

    #[test]
    fn overspending_raises_the_price_up_to_the_cap() {
        let mut b = QosBudget::new(0.01, 4.0);
        let mut t = 0.0;
        // 10 h with 3 % of the seconds over the QoS in changes.
        for _ in 0..10 {
            t = watch(&mut b, t, 3_492, false, false);
            t = watch(&mut b, t, 108, true, true);
        }
        let share = (1080.0 + 216.0) / (36_000.0 + 21_600.0);
        assert!(
            (b.spent_share() - share).abs() < 1e-3,
            "{}",
            b.spent_share()
        );
        assert!((b.price_factor() - share / 0.01).abs() < 0.1);
        t = watch(&mut b, t, 20_000, true, true);
        assert_eq!(b.price_factor(), 4.0);
        let _ = t;
    }

    #[test]
    fn only_the_policys_own_seconds_count_and_gaps_are_capped() {
        let mut b = QosBudget::new(0.01, 4.0);
        let t = watch(&mut b, 0.0, 3_600, true, false);
        assert_eq!(b.price_factor(), 1.0);
        b.on_tick(t + 10_000.0, true, true);
        assert!((b.over_s - MAX_TICK_S).abs() < 1e-9);
    }

    #[test]
    fn no_budget_no_factor() {
        let mut b = QosBudget::new(0.0, 4.0);
        watch(&mut b, 0.0, 600, true, true);
        assert_eq!(b.price_factor(), 1.0);
    }
}

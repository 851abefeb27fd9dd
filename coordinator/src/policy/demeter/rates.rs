//! The rates a decision is made for. Two forecasters, because the two questions differ:
//!
//! - **Is production safe until the policy can next react?** The upper quantile of the maximum
//!   over `risk_horizon_s` (a check interval, a change and its catch-up, with margin), from a
//!   forecaster calibrated at that horizon. Feasibility is always judged at this rate.
//! - **Will a cheaper configuration have to be undone soon?** The point forecast of the maximum
//!   over `horizon_s` (the dwell a change commits to). Its *upper* quantile is not used: before
//!   the daily season is known, the 95 % bound of the next hour's maximum is 2–3 × the point
//!   (a rise the level models cannot foresee), and deciding for it keeps production at peak
//!   size all day although the policy can scale up within a minute or two of a rise.
//!
//! A third number is the highest rate seen over `peak_memory_s`: a TaskManager shape the
//! policy restarts into must carry it by in-place rescaling alone, so the next peak costs a
//! rescale, not another restart.

use std::collections::VecDeque;

use crate::Result;
use crate::models::forecast::{Forecaster, OnlineForecaster};
use crate::policy::ForecastSummary;

use super::config::DemeterConfig;

/// Margin on the recent maximum while a forecaster is still warming up.
const WARMUP_MARGIN: f64 = 0.15;

/// The rates one decision uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionRates {
    /// Upper quantile of the maximum over the risk horizon (never below the rate now).
    pub risk: f64,
    /// What a configuration is chosen for: the larger of `risk` and the point forecast of the
    /// maximum over the long horizon.
    pub plan: f64,
    /// The expected maximum soon: the risk horizon's point forecast (never below the rate
    /// now). What the safe default must be believed unable to carry before a risk move may
    /// cost more (the long horizon's point extrapolates a climb's trend for an hour).
    pub expected: f64,
    /// What a new TaskManager shape must carry in place: the larger of `plan` and the highest
    /// rate seen over the peak memory.
    pub peak: f64,
    /// What a risk move is sized for first, so that one move lasts through a rise: the upper
    /// quantile of the maximum over the long horizon, capped by the highest rate seen over the
    /// peak memory (a rise is not forecast beyond what the season has shown), never below
    /// `plan`. Early on, before a peak is remembered, this is the plan.
    pub sustain: f64,
    pub summary: ForecastSummary,
}

#[derive(Debug, Clone)]
pub struct Rates {
    short: OnlineForecaster,
    long: OnlineForecaster,
    risk_horizon_s: u32,
    horizon_s: u32,
    now: f64,
    recent: VecDeque<f64>,
    /// Before the first forecast, the recent maximum over this many seconds.
    warmup_window: usize,
    /// Resolution of the peak memory (the observation window).
    peak_slot_s: u64,
    /// (slot index, highest rate in the slot), oldest first.
    peaks: VecDeque<(u64, f64)>,
    peak_slots: u64,
}

impl Rates {
    pub fn new(cfg: &DemeterConfig) -> Result<Self> {
        let forecaster = |horizon_s: u32| OnlineForecaster::new(cfg.forecast(horizon_s));
        Ok(Rates {
            short: forecaster(cfg.risk_horizon_s)?,
            long: forecaster(cfg.horizon_s)?,
            risk_horizon_s: cfg.risk_horizon_s,
            horizon_s: cfg.horizon_s,
            now: 0.0,
            recent: VecDeque::new(),
            warmup_window: cfg.warmup_window_s.max(1) as usize,
            peak_slot_s: u64::from(cfg.window_s.max(1)),
            peaks: VecDeque::new(),
            peak_slots: cfg
                .peak_memory_s
                .div_ceil(u64::from(cfg.window_s.max(1)))
                .max(1),
        })
    }

    pub fn observe(&mut self, t_s: u64, rate: f64) {
        if !(rate.is_finite() && rate >= 0.0) {
            return;
        }
        self.short.observe(t_s, rate);
        self.long.observe(t_s, rate);
        self.now = rate;
        self.recent.push_back(rate);
        if self.recent.len() > self.warmup_window {
            self.recent.pop_front();
        }
        let slot = t_s / self.peak_slot_s;
        match self.peaks.back_mut() {
            Some((s, peak)) if *s == slot => *peak = peak.max(rate),
            _ => self.peaks.push_back((slot, rate)),
        }
        while self
            .peaks
            .front()
            .is_some_and(|(s, _)| s + self.peak_slots <= slot)
        {
            self.peaks.pop_front();
        }
    }

    pub fn now(&self) -> f64 {
        self.now
    }

    /// Highest rate over the peak memory.
    pub fn highest_seen(&self) -> f64 {
        self.peaks.iter().map(|p| p.1).fold(self.now, f64::max)
    }

    fn warmup(&self) -> f64 {
        let recent = self.recent.iter().copied().fold(self.now, f64::max);
        recent * (1.0 + WARMUP_MARGIN)
    }

    pub fn decide(&self) -> DecisionRates {
        let short = self.short.forecast(self.risk_horizon_s);
        let risk = short
            .as_ref()
            .map_or_else(|| self.warmup(), |f| f.upper_max)
            .max(self.now);
        let short_point = short.map_or(self.now, |f| f.point_max);
        let long = self.long.forecast(self.horizon_s);
        let long_point = long.as_ref().map_or_else(|| self.warmup(), |f| f.point_max);
        let long_upper = long.map_or(long_point, |f| f.upper_max);
        let plan = risk.max(long_point);
        let sustain = long_upper.min(self.highest_seen()).max(plan);
        DecisionRates {
            risk,
            plan,
            expected: short_point.max(self.now),
            peak: plan.max(self.highest_seen()),
            sustain,
            summary: ForecastSummary {
                horizon_s: self.horizon_s,
                point_max: long_point,
                upper_max: plan,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_peak_for_its_memory_only() {
        let cfg = DemeterConfig {
            peak_memory_s: 600,
            ..DemeterConfig::default()
        };
        let mut rates = Rates::new(&cfg).unwrap_or_else(|e| panic!("{e}"));
        for t in 0..300 {
            rates.observe(t, if t == 100 { 5_000.0 } else { 1_000.0 });
        }
        assert_eq!(rates.highest_seen(), 5_000.0);
        for t in 300..1_000 {
            rates.observe(t, 1_000.0);
        }
        assert_eq!(rates.highest_seen(), 1_000.0);
    }

    #[test]
    fn plans_for_at_least_the_risk_rate_and_the_rate_now() {
        let mut rates = Rates::new(&DemeterConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        for t in 0..7_200u64 {
            // A slow daily-like swell: 10k ± 2k over two hours.
            let rate = 10_000.0 + 2_000.0 * (t as f64 / 7_200.0 * std::f64::consts::TAU).sin();
            rates.observe(t, rate);
            if t % 600 == 599 {
                let d = rates.decide();
                assert!(d.risk >= rates.now(), "{d:?}");
                assert!(d.plan >= d.risk && d.peak >= d.plan, "{d:?}");
                assert!(d.sustain >= d.plan && d.sustain <= d.peak, "{d:?}");
                assert!(d.expected <= d.plan, "{d:?}");
                assert!(
                    d.plan < 2.0 * 12_000.0,
                    "the plan stays near the series: {d:?}"
                );
            }
        }
    }

    #[test]
    fn a_risk_move_is_sized_beyond_the_plan_only_up_to_the_peak_seen() {
        let mut rates = Rates::new(&DemeterConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        let mut above_plan = 0;
        for t in 0..6 * 7_200u64 {
            // Noise-free two-hour swells between 10k and 20k.
            let phase = (t % 7_200) as f64 / 7_200.0;
            let rate = 15_000.0 - 5_000.0 * (phase * std::f64::consts::TAU).cos();
            rates.observe(t, rate);
            if t > 7_200 && t % 300 == 0 {
                let d = rates.decide();
                assert!(d.sustain >= d.plan, "{d:?}");
                assert!(
                    d.sustain <= rates.highest_seen().max(d.plan) + 1e-9,
                    "{d:?}"
                );
                if d.sustain > d.plan * 1.01 {
                    above_plan += 1;
                }
            }
        }
        assert!(
            above_plan > 0,
            "the long horizon's upper quantile never lifted a risk move above the plan"
        );
    }
}

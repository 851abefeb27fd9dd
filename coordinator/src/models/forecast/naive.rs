//! Baselines the forecaster must beat, with the old design's upper bound (point × 1.10).

use std::collections::VecDeque;

use super::holt::{HoltParams, RobustHolt};
use super::period::PeriodTracker;
use super::{Forecast, Forecaster, SeasonConfig};

/// Margin of the baselines' upper bound: the previous design's "max of the forecast × 1.10".
pub const BASELINE_MARGIN: f64 = 0.10;

fn baseline_forecast(horizon_s: u32, point_max: f64, period_s: Option<u64>) -> Forecast {
    Forecast {
        horizon_s,
        point_max,
        upper_max: point_max * (1.0 + BASELINE_MARGIN),
        quantile: f64::NAN,
        calibrated: false,
        period_s,
        step_s: 1,
        path: Vec::new(),
    }
}

/// Which naive rule to apply when no period is known (or as the only rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NaiveRule {
    /// The last observed rate.
    LastValue,
    /// The maximum of the last `horizon_s` seconds.
    WindowMax,
}

/// Seasonal naive: the maximum of the same window one period ago, with the period the online
/// detector could know at that time; before a period is known, a naive rule.
#[derive(Debug, Clone)]
pub struct SeasonalNaive {
    periods: Option<PeriodTracker>,
    fallback: NaiveRule,
    /// 1-s rates from `first_t` on (NaN where missing), as long as the longest period + a day.
    rates: VecDeque<f64>,
    first_t: u64,
    capacity: usize,
}

impl SeasonalNaive {
    /// `season`: None for a plain naive forecaster.
    pub fn new(season: Option<SeasonConfig>, fallback: NaiveRule) -> Self {
        let max_period_s = season
            .as_ref()
            .map_or(SeasonConfig::default().max_period_s, |s| s.max_period_s);
        Self {
            capacity: (max_period_s + 86_400) as usize,
            periods: season.map(PeriodTracker::new),
            fallback,
            rates: VecDeque::new(),
            first_t: 0,
        }
    }

    fn rate_at(&self, t: u64) -> Option<f64> {
        let offset = t.checked_sub(self.first_t)? as usize;
        self.rates.get(offset).copied().filter(|r| r.is_finite())
    }

    fn max_over(&self, from_exclusive: u64, to_inclusive: u64) -> Option<f64> {
        (from_exclusive + 1..=to_inclusive)
            .filter_map(|t| self.rate_at(t))
            .reduce(f64::max)
    }
}

impl Forecaster for SeasonalNaive {
    fn observe(&mut self, t_s: u64, rate: f64) {
        if !rate.is_finite() || rate < 0.0 {
            return;
        }
        if self.rates.is_empty() {
            self.first_t = t_s;
        }
        let next = self.first_t + self.rates.len() as u64;
        if t_s < next {
            return;
        }
        for _ in next..t_s {
            self.rates.push_back(f64::NAN);
        }
        self.rates.push_back(rate);
        while self.rates.len() > self.capacity {
            self.rates.pop_front();
            self.first_t += 1;
        }
        if let Some(periods) = &mut self.periods {
            periods.push(t_s, rate);
        }
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        let now = (self.first_t + self.rates.len() as u64).checked_sub(1)?;
        let h = u64::from(horizon_s);
        let period_s = self.periods.as_ref().and_then(PeriodTracker::period_s);
        let seasonal =
            period_s.and_then(|p| self.max_over(now.checked_sub(p)?, now.checked_sub(p)? + h));
        let point = match (seasonal, self.fallback) {
            (Some(max), _) => max,
            (None, NaiveRule::LastValue) => self.rate_at(now)?,
            (None, NaiveRule::WindowMax) => self.max_over(now.saturating_sub(h), now)?,
        };
        Some(baseline_forecast(horizon_s, point, period_s))
    }
}

/// Textbook damped Holt (no robustness, fixed parameters, no season) on 60-s means.
#[derive(Debug, Clone)]
pub struct HoltBaseline {
    model: RobustHolt,
    bucket_s: u64,
    open: Option<(u64, f64, u32)>,
    last_closed: Option<u64>,
    last_t: Option<u64>,
}

impl HoltBaseline {
    pub fn new(bucket_s: u64, params: HoltParams) -> Self {
        Self {
            model: RobustHolt::new(params, false),
            bucket_s: bucket_s.max(1),
            open: None,
            last_closed: None,
            last_t: None,
        }
    }
}

impl Default for HoltBaseline {
    fn default() -> Self {
        Self::new(
            60,
            HoltParams {
                alpha: 0.5,
                beta: 0.1,
                phi: 0.9,
            },
        )
    }
}

impl Forecaster for HoltBaseline {
    fn observe(&mut self, t_s: u64, rate: f64) {
        if !rate.is_finite() || self.last_t.is_some_and(|last| t_s <= last) {
            return;
        }
        self.last_t = Some(t_s);
        let index = t_s / self.bucket_s;
        match self.open {
            Some((open, sum, n)) if open == index => self.open = Some((open, sum + rate, n + 1)),
            Some((open, sum, n)) => {
                let skipped = self.last_closed.map_or(0, |l| open.saturating_sub(l + 1));
                self.model.skip(skipped);
                self.model.update(sum / f64::from(n));
                self.last_closed = Some(open);
                self.open = Some((index, rate, 1));
            }
            None => self.open = Some((index, rate, 1)),
        }
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        let (now, last_closed) = (self.last_t?, self.last_closed?);
        let last = (now + u64::from(horizon_s)) / self.bucket_s;
        let point = (1..=last.saturating_sub(last_closed).max(1))
            .map(|steps| self.model.forecast(steps))
            .fold(f64::NEG_INFINITY, f64::max);
        Some(baseline_forecast(horizon_s, point.max(0.0), None))
    }
}

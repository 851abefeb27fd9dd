//! Additive Holt–Winters with a damped trend: the textbook seasonal baseline the forecaster is
//! compared against. Fixed smoothing parameters (no fitting, so nothing is ever tuned on the
//! window being scored), on 60-s means; the period comes online from a [`PeriodTracker`] (the
//! same detector the main model uses), and the seasonal indices start from the classical
//! decomposition of the history seen so far whenever the detected period changes.
//!
//! To be judged on the same quantity as the main model it forecasts the *maximum* 1-s rate:
//! the maximum of its path plus the typical peak above a bucket's mean, and an upper quantile of
//! that maximum from its own past errors (the same split-conformal calibrator as the main model).

use super::calibration::MaxCalibrator;
use super::period::PeriodTracker;
use super::season::seasonal_profile;
use super::{BASELINE_MARGIN, Forecast, Forecaster, SeasonConfig};

/// Smoothing of the typical peak above the bucket mean (as in the main model).
const EXCESS_RATE: f64 = 0.02;
/// Scored windows kept and needed for the conformal upper bound (12 h and 30 min of origins).
const CALIBRATION_WINDOW: usize = 720;
const MIN_CALIBRATION_SCORES: usize = 30;
/// A gap longer than this restarts level and trend (the seasonal indices are kept).
const RESET_AFTER_GAP_S: u64 = 1_800;

/// Smoothing parameters in the error-correction form (Hyndman & Athanasopoulos, ETS(A,Ad,A)):
/// with one-step error e, level += φ·trend + α·e, trend = φ·trend + β·e, season += γ·e.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoltWintersParams {
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    /// Trend damping per bucket (0, 1].
    pub phi: f64,
}

impl Default for HoltWintersParams {
    /// The damped Holt baseline's level and trend settings plus a slow seasonal update: each
    /// index is revisited only once per cycle.
    fn default() -> Self {
        Self {
            alpha: 0.5,
            beta: 0.1,
            gamma: 0.1,
            phi: 0.9,
        }
    }
}

#[derive(Debug, Clone)]
pub struct HoltWinters {
    params: HoltWintersParams,
    bucket_s: u64,
    horizon_s: u32,
    quantile: f64,
    periods: PeriodTracker,
    /// Open bucket: (index, sum, count, peak).
    open: Option<(u64, f64, u32, f64)>,
    last_closed: Option<u64>,
    last_t: Option<u64>,
    level: f64,
    trend: f64,
    initialised: bool,
    /// One index per bucket of the period, by absolute bucket index modulo the period; empty
    /// while no period is known.
    season: Vec<f64>,
    excess: f64,
    closed: u64,
    calibrator: MaxCalibrator,
}

impl HoltWinters {
    /// `horizon_s`: the horizon the upper quantile is calibrated for. The season's resolution is
    /// the bucket width.
    pub fn new(
        params: HoltWintersParams,
        season: SeasonConfig,
        horizon_s: u32,
        quantile: f64,
    ) -> Self {
        let bucket_s = u64::from(season.resolution_s.max(1));
        let horizon_buckets = u64::from(horizon_s).div_ceil(bucket_s).max(1);
        Self {
            params,
            bucket_s,
            horizon_s,
            quantile,
            periods: PeriodTracker::new(season),
            open: None,
            last_closed: None,
            last_t: None,
            level: 0.0,
            trend: 0.0,
            initialised: false,
            season: Vec::new(),
            excess: 0.0,
            closed: 0,
            calibrator: MaxCalibrator::new(
                quantile,
                horizon_buckets,
                CALIBRATION_WINDOW,
                MIN_CALIBRATION_SCORES,
            ),
        }
    }

    pub fn period_s(&self) -> Option<u64> {
        (!self.season.is_empty()).then(|| self.season.len() as u64 * self.bucket_s)
    }

    fn seasonal(&self, index: u64) -> f64 {
        match self.season.len() {
            0 => 0.0,
            p => self.season[(index % p as u64) as usize],
        }
    }

    /// Level + trend + season `steps` buckets after the last closed one.
    fn path(
        &self,
        last_closed: u64,
        steps: impl Iterator<Item = u64>,
    ) -> impl Iterator<Item = f64> {
        let phi = self.params.phi;
        let (mut power, mut damped, mut k) = (1.0, 0.0, 0u64);
        steps.map(move |target| {
            while k < target {
                k += 1;
                power *= phi;
                damped += power;
            }
            self.level + self.trend * damped + self.seasonal(last_closed + target)
        })
    }

    /// Point maximum over buckets `(last_closed, ...]` covering `(now, now + horizon_s]`.
    fn point_max(&self, now: u64, horizon_s: u32) -> Option<f64> {
        let last_closed = self.last_closed?;
        if !self.initialised {
            return None;
        }
        let first = ((now + 1) / self.bucket_s).max(last_closed + 1) - last_closed;
        let last =
            ((now + u64::from(horizon_s)) / self.bucket_s).max(last_closed + 1) - last_closed;
        let max = self
            .path(last_closed, first..=last)
            .fold(f64::NEG_INFINITY, f64::max);
        Some(max.max(0.0) + self.excess.max(0.0))
    }

    fn upper(&self, point: f64, horizon_s: u32) -> (f64, bool) {
        let spread = (f64::from(horizon_s) / f64::from(self.horizon_s.max(1))).sqrt();
        match self.calibrator.upper(point, spread) {
            Some(upper) => (upper, true),
            None => (point * (1.0 + BASELINE_MARGIN), false),
        }
    }

    fn on_bucket(&mut self, index: u64, mean: f64, peak: f64) {
        self.calibrator.observe(index, peak);
        self.closed += 1;
        let rate = EXCESS_RATE.max(1.0 / self.closed as f64);
        self.excess += rate * (peak - mean - self.excess);
        let skipped = self.last_closed.map_or(0, |l| index.saturating_sub(l + 1));
        if skipped * self.bucket_s > RESET_AFTER_GAP_S {
            self.initialised = false;
        }
        self.update(index, mean, skipped);
        self.last_closed = Some(index);
        if self.periods.push(index * self.bucket_s, mean) {
            self.adopt_period(index);
        }
        let now = (index + 1) * self.bucket_s - 1;
        if let Some(point) = self.point_max(now, self.horizon_s) {
            let (upper, _) = self.upper(point, self.horizon_s);
            self.calibrator.record(index, point, upper);
        }
    }

    fn update(&mut self, index: u64, y: f64, skipped: u64) {
        let HoltWintersParams {
            alpha,
            beta,
            gamma,
            phi,
        } = self.params;
        let s = self.seasonal(index);
        if !self.initialised {
            (self.level, self.trend, self.initialised) = (y - s, 0.0, true);
            return;
        }
        // Through a gap the forecast stands in for the missing buckets.
        for _ in 0..skipped {
            self.level += phi * self.trend;
            self.trend *= phi;
        }
        let predicted = self.level + phi * self.trend;
        let error = y - predicted - s;
        self.level = predicted + alpha * error;
        self.trend = phi * self.trend + beta * error;
        if !self.season.is_empty() {
            let p = self.season.len() as u64;
            self.season[(index % p) as usize] = s + gamma * error;
        }
    }

    /// Re-estimates the seasonal indices when the detected period changed; level + season at
    /// the last bucket stays where it was.
    fn adopt_period(&mut self, index: u64) {
        let lag = self.periods.period_slots();
        if lag == Some(self.season.len()) || (lag.is_none() && self.season.is_empty()) {
            return;
        }
        let before = self.seasonal(index);
        let history = self.periods.history();
        self.season = lag
            .and_then(|lag| seasonal_profile(&history.filled(), history.first_index(), lag))
            .unwrap_or_default();
        self.level += before - self.seasonal(index);
    }
}

impl Forecaster for HoltWinters {
    fn observe(&mut self, t_s: u64, rate: f64) {
        if !rate.is_finite() || rate < 0.0 || self.last_t.is_some_and(|last| t_s <= last) {
            return;
        }
        self.last_t = Some(t_s);
        let index = t_s / self.bucket_s;
        match self.open {
            Some((open, sum, n, peak)) if open == index => {
                self.open = Some((open, sum + rate, n + 1, peak.max(rate)));
            }
            Some((open, sum, n, peak)) => {
                self.on_bucket(open, sum / f64::from(n), peak);
                self.open = Some((index, rate, 1, rate));
            }
            None => self.open = Some((index, rate, 1, rate)),
        }
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        let now = self.last_t?;
        let point_max = self.point_max(now, horizon_s)?;
        let (upper_max, calibrated) = self.upper(point_max, horizon_s);
        Some(Forecast {
            horizon_s,
            point_max,
            upper_max,
            quantile: self.quantile,
            calibrated,
            period_s: self.period_s(),
            step_s: self.bucket_s as u32,
            path: Vec::new(),
        })
    }
}

#[cfg(test)]
#[path = "holt_winters_tests.rs"]
mod tests;

//! Online forecast of a job's input rate: the maximum rate over the next `horizon_s` seconds, as
//! a point forecast and a calibrated upper quantile, updated with every 1-s observation.
//!
//! Model ([`OnlineForecaster`]): 1-s rates → 10-s buckets (median level: robust to spikes and
//! dropped samples; max peak) → seasonal profile at 60-s resolution (period detected by
//! autocorrelation of differences, or configured such as daily; only used after one and a half
//! cycles, so with less data it degrades to level + trend) → bank of 7 robust (Huber-clipped)
//! exponential-smoothing models (no / damped / undamped trend, three memories), each run on the
//! raw and on the deseasonalised levels, weighted by their recent error *on the horizon maximum*
//! → point maximum of the combined path plus the typical peak-over-level inside a bucket →
//! upper quantile by split-conformal prediction on the model's own past errors of the horizon
//! maximum (log ratios, rolling 12 h) with adaptive conformal inference against drift. Before
//! 30 scored windows exist the upper bound is the point × (1 + `warmup_margin`), flagged
//! `calibrated: false`. Everything is online: each forecast is scored only after its window has
//! passed. Memory per job is under 100 kB (mostly the 60-s level history: 2 × the longest
//! period + 2 h); an update costs ~0.2 µs on average, a forecast a few µs, the hourly season
//! refresh ~0.3 ms (figures from the benchmark, on a shared 2-core machine).
//!
//! Why our own rather than `augurs` (Grafana's `augurs-ets` 0.10 + `augurs-mstl`, compared in
//! `benches/forecast.rs` behind the `augurs` feature): augurs is batch, so it must refit per
//! forecast (21–31 ms on up to a day of 60-s means, vs a few µs here); its ETS has no seasonal
//! models (seasonality only through MSTL); its intervals are Gaussian per step, not for the
//! maximum over the horizon, and covered the true maximum at only 67–80 % of origins for a
//! nominal 95 %. Refitted every minute on the two 18-hour traces it was less accurate (MASE
//! 0.635 / 0.341 vs 0.429 / 0.263 here, on the maximum over the next 10 minutes). It would
//! also have added rand 0.8 and several other crates to the production tree.
//!
//! Baselines (`benches/forecast.rs`, [`baselines`]): naive, seasonal naive, damped Holt and
//! additive damped Holt–Winters ([`HoltWinters`]: period from the same online detector, upper
//! quantile from its own errors; MASE 0.652 / 0.354 on the two traces vs 0.429 / 0.263 here).
//!
//! Known limits: one seasonal period at a time (the best-correlated), not several as MSTL;
//! other horizons than the calibrated one get the calibrated margin scaled by √(h / H); after a
//! gap longer than `reset_after_gap_s` the level models restart and the first forecast comes
//! with the next closed bucket.

mod bank;
mod bucket;
mod calibration;
mod evaluate;
mod holt;
mod holt_winters;
mod horizon;
mod naive;
mod online;
mod period;
mod season;
#[cfg(test)]
mod tests;

pub use bucket::{Bucket, BucketAggregator};
pub use evaluate::{EvalConfig, Scores, baselines, evaluate};
pub use holt::{HoltParams, RobustHolt};
pub use holt_winters::{HoltWinters, HoltWintersParams};
pub use naive::{BASELINE_MARGIN, HoltBaseline, NaiveRule, SeasonalNaive};
pub use online::OnlineForecaster;
pub use period::PeriodTracker;
pub use season::{CoarseHistory, Season, choose_period, detect_period, seasonal_profile};

use crate::{Error, Result};

/// Forecast of the maximum rate over `(now, now + horizon_s]`, `now` being the last observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    pub horizon_s: u32,
    /// Point forecast of the maximum 1-s rate in the horizon (events/s).
    pub point_max: f64,
    /// Upper `quantile` of that maximum.
    pub upper_max: f64,
    /// NaN for the baselines, whose upper bound is a fixed margin, not a quantile.
    pub quantile: f64,
    /// Whether `upper_max` comes from scored past errors (false: a fixed margin during warm-up).
    pub calibrated: bool,
    /// Seasonal period in use, if any.
    pub period_s: Option<u64>,
    /// Width of each path step in seconds.
    pub step_s: u32,
    /// Expected mean rate per step over the horizon (may be empty for simple baselines).
    pub path: Vec<f64>,
}

/// An online forecaster. Time is an argument: observations must come in increasing `t_s`;
/// late or duplicate ones are ignored.
pub trait Forecaster {
    fn observe(&mut self, t_s: u64, rate: f64);
    /// None until the model has seen enough data to say anything.
    fn forecast(&self, horizon_s: u32) -> Option<Forecast>;
}

impl<F: Forecaster + ?Sized> Forecaster for Box<F> {
    fn observe(&mut self, t_s: u64, rate: f64) {
        (**self).observe(t_s, rate);
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        (**self).forecast(horizon_s)
    }
}

/// Seasonality settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SeasonConfig {
    /// Resolution of the history used for detection and of the seasonal profile.
    pub resolution_s: u32,
    /// Periods known in advance (e.g. daily); used once 1.5 cycles are in the history.
    pub known_periods_s: Vec<u64>,
    /// Also search for other periods in `[min_period_s, max_period_s]`.
    pub detect: bool,
    pub min_period_s: u64,
    pub max_period_s: u64,
    /// Autocorrelation (of differences) a period needs to be used.
    pub min_autocorrelation: f64,
    /// How often detection and the profile are redone (seconds of data).
    pub refresh_every_s: u64,
}

impl Default for SeasonConfig {
    fn default() -> Self {
        Self {
            resolution_s: 60,
            known_periods_s: vec![86_400],
            detect: true,
            min_period_s: 1_200,
            max_period_s: 2 * 86_400,
            min_autocorrelation: 0.5,
            refresh_every_s: 3_600,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ForecastConfig {
    /// Aggregation of 1-s observations.
    pub bucket_s: u32,
    /// Horizon the upper quantile is calibrated for (other horizons are rescaled).
    pub horizon_s: u32,
    pub quantile: f64,
    pub season: SeasonConfig,
    /// Scored forecasts kept for calibration, one per `calibrate_every_s`.
    pub calibration_window: usize,
    pub calibrate_every_s: u64,
    /// Scored forecasts needed before the conformal bound replaces `warmup_margin`.
    pub min_calibration_scores: usize,
    /// Relative margin of the upper bound before calibration (0.10 = +10 %).
    pub warmup_margin: f64,
    /// A gap longer than this restarts the level models (the old level says little).
    pub reset_after_gap_s: u64,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        Self {
            bucket_s: 10,
            horizon_s: 600,
            quantile: 0.95,
            season: SeasonConfig::default(),
            calibration_window: 720,
            calibrate_every_s: 60,
            min_calibration_scores: 30,
            warmup_margin: 0.10,
            reset_after_gap_s: 1_800,
        }
    }
}

impl ForecastConfig {
    pub fn validate(&self) -> Result<()> {
        let fail = |m: &str| Err(Error::Model(format!("forecast config: {m}")));
        // Upper bounds keep memory per job small and the arithmetic far from overflow.
        if self.bucket_s == 0 || self.bucket_s > 300 || self.horizon_s < self.bucket_s {
            return fail("need 0 < bucket_s <= min(300, horizon_s)");
        }
        if self.horizon_s > 86_400 {
            return fail("horizon_s must be at most a day");
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return fail("quantile must be in (0, 1)");
        }
        let s = &self.season;
        if s.resolution_s < self.bucket_s || !s.resolution_s.is_multiple_of(self.bucket_s) {
            return fail("season.resolution_s must be a multiple of bucket_s");
        }
        if s.resolution_s > 3_600 {
            return fail("season.resolution_s must be at most an hour");
        }
        if s.min_period_s < 4 * u64::from(s.resolution_s) || s.max_period_s < s.min_period_s {
            return fail("need 4 * resolution_s <= min_period_s <= max_period_s");
        }
        if s.max_period_s > 14 * 86_400 {
            return fail("season.max_period_s must be at most 14 days");
        }
        if !(1..=100_000).contains(&self.calibration_window) || self.calibrate_every_s == 0 {
            return fail("need 1 <= calibration_window <= 100000 and calibrate_every_s > 0");
        }
        if self.warmup_margin.is_nan() || self.warmup_margin < 0.0 {
            return fail("warmup_margin must be >= 0");
        }
        Ok(())
    }
}

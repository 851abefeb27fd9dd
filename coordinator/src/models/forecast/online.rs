//! The forecaster the coordinator runs per job: wires buckets, season, the level bank and the
//! calibrator together (see the module doc of `forecast` for the design and why).

use super::bank::{HoltBank, default_bank_params};
use super::bucket::{Bucket, BucketAggregator};
use super::calibration::MaxCalibrator;
use super::season::{CoarseHistory, Season, choose_period, seasonal_profile};
use super::{Forecast, ForecastConfig, Forecaster};
use crate::Result;

/// Roughly how long the bank's error averages remember.
const BANK_MEMORY_S: u64 = 3_600;
/// Smoothing of the typical peak above the bucket level.
const EXCESS_RATE: f64 = 0.02;

#[derive(Debug, Clone)]
pub struct OnlineForecaster {
    cfg: ForecastConfig,
    buckets: BucketAggregator,
    bank: HoltBank,
    history: CoarseHistory,
    season: Option<Season>,
    slots_since_refresh: u64,
    calibrator: MaxCalibrator,
    /// EWMA of (bucket peak - bucket level): the 1-s maximum sits this far above the levels.
    excess: f64,
    closed_buckets: u64,
    horizon_buckets: u64,
    last_t: Option<u64>,
    last_closed: Option<u64>,
    last_calibration_t: Option<u64>,
    ignored: u64,
}

impl OnlineForecaster {
    pub fn new(cfg: ForecastConfig) -> Result<Self> {
        cfg.validate()?;
        let horizon_buckets = u64::from(cfg.horizon_s.div_ceil(cfg.bucket_s));
        let slots_kept =
            (cfg.season.max_period_s * 2 + 2 * 3_600) / u64::from(cfg.season.resolution_s);
        Ok(Self {
            buckets: BucketAggregator::new(cfg.bucket_s),
            bank: HoltBank::new(
                &default_bank_params(),
                horizon_buckets,
                BANK_MEMORY_S / cfg.calibrate_every_s,
            ),
            history: CoarseHistory::new(u64::from(cfg.season.resolution_s), slots_kept as usize),
            season: None,
            slots_since_refresh: 0,
            calibrator: MaxCalibrator::new(
                cfg.quantile,
                horizon_buckets,
                cfg.calibration_window,
                cfg.min_calibration_scores,
            ),
            excess: 0.0,
            closed_buckets: 0,
            horizon_buckets,
            last_t: None,
            last_closed: None,
            last_calibration_t: None,
            ignored: 0,
            cfg,
        })
    }

    /// Observations dropped as late, duplicate, negative or not finite.
    pub fn ignored_observations(&self) -> u64 {
        self.ignored
    }

    /// Seasonal period currently in use.
    pub fn period_s(&self) -> Option<u64> {
        self.season.as_ref().map(Season::period_s)
    }

    fn bucket_mid_s(&self, index: u64) -> f64 {
        (index as f64 + 0.5) * f64::from(self.cfg.bucket_s)
    }

    fn seasonal(&self, index: u64) -> f64 {
        self.season
            .as_ref()
            .map_or(0.0, |s| s.at(self.bucket_mid_s(index)))
    }

    /// Seasonal profile at buckets `first..=last` (empty without a season).
    fn season_path(&self, first: u64, last: u64) -> Vec<f64> {
        match self.season {
            Some(_) => (first..=last).map(|i| self.seasonal(i)).collect(),
            None => Vec::new(),
        }
    }

    fn on_bucket(&mut self, b: Bucket) {
        let skipped = self
            .last_closed
            .map_or(0, |last| b.index.saturating_sub(last + 1));
        self.calibrator.observe(b.index, b.peak);
        let excess = b.peak - b.level;
        let capped = if self.closed_buckets > 10 {
            excess.min(3.0 * self.excess + 1.0)
        } else {
            excess
        };
        self.excess +=
            EXCESS_RATE.max(1.0 / (self.closed_buckets + 1) as f64) * (capped - self.excess);
        // Members are scored at the calibration cadence.
        let score_every = (self.cfg.calibrate_every_s / u64::from(self.cfg.bucket_s)).max(1);
        let ahead = b
            .index
            .is_multiple_of(score_every)
            .then(|| self.season_path(b.index + 1, b.index + self.horizon_buckets));
        let season_now = self.seasonal(b.index);
        self.bank
            .update(b.index, b.level, skipped, season_now, ahead.as_deref());
        self.closed_buckets += 1;
        self.last_closed = Some(b.index);
        let start_s = b.index * u64::from(self.cfg.bucket_s);
        if self.history.push(start_s, b.level) {
            self.slots_since_refresh += 1;
            let refresh_slots =
                self.cfg.season.refresh_every_s / u64::from(self.cfg.season.resolution_s);
            if self.slots_since_refresh >= refresh_slots.max(1) {
                self.slots_since_refresh = 0;
                self.refresh_season(b.index);
            }
        }
        let end_s = start_s + u64::from(self.cfg.bucket_s);
        let due = self
            .last_calibration_t
            .is_none_or(|last| end_s >= last + self.cfg.calibrate_every_s);
        if due && let Some((point, upper, _)) = self.predict_max(end_s - 1, self.cfg.horizon_s) {
            self.calibrator.record(b.index, point, upper);
            self.last_calibration_t = Some(end_s);
        }
    }

    /// Re-detects the period and re-estimates the profile from the history; the levels are
    /// shifted so that level + season stays continuous across the change.
    fn refresh_season(&mut self, last_index: u64) {
        let res = u64::from(self.cfg.season.resolution_s);
        let values = self.history.filled();
        let best = choose_period(&values, &self.cfg.season);
        let before = self.seasonal(last_index);
        self.season = best
            .and_then(|lag| seasonal_profile(&values, self.history.first_index(), lag))
            .map(|profile| Season {
                resolution_s: res,
                profile,
            });
        self.bank
            .shift_seasonal_levels(before - self.seasonal(last_index));
    }

    /// (point max, upper, path) over `(now, now + horizon_s]`.
    fn predict_max(&self, now: u64, horizon_s: u32) -> Option<(f64, f64, Vec<f64>)> {
        let last_closed = self.last_closed?;
        if !self.bank.is_initialised() || horizon_s == 0 {
            return None;
        }
        let width = u64::from(self.cfg.bucket_s);
        let first = (now + 1) / width;
        let last = (now + u64::from(horizon_s)) / width;
        let (first, last) = (first.max(last_closed + 1), last.max(last_closed + 1));
        let season = self.season_path(first, last);
        let path: Vec<f64> = self
            .bank
            .path(
                first - last_closed,
                last - last_closed,
                &season,
                &self.bank.weights(),
            )
            .into_iter()
            .map(|level| level.max(0.0))
            .collect();
        let point = path.iter().copied().fold(f64::NEG_INFINITY, f64::max) + self.excess.max(0.0);
        let spread = (f64::from(horizon_s) / f64::from(self.cfg.horizon_s)).sqrt();
        let upper = self
            .calibrator
            .upper(point, spread)
            .unwrap_or(point * (1.0 + self.cfg.warmup_margin));
        Some((point, upper, path))
    }
}

impl Forecaster for OnlineForecaster {
    fn observe(&mut self, t_s: u64, rate: f64) {
        if !rate.is_finite() || rate < 0.0 || self.last_t.is_some_and(|last| t_s <= last) {
            self.ignored += 1;
            return;
        }
        let long_gap = self
            .last_t
            .is_some_and(|last| t_s - last > self.cfg.reset_after_gap_s);
        if let Some(closed) = self.buckets.push(t_s, rate) {
            self.on_bucket(closed);
        }
        if long_gap {
            self.bank.reset();
        }
        self.last_t = Some(t_s);
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        let now = self.last_t?;
        let (point_max, upper_max, path) = self.predict_max(now, horizon_s)?;
        Some(Forecast {
            horizon_s,
            point_max,
            upper_max,
            quantile: self.cfg.quantile,
            calibrated: self.calibrator.scored() >= self.cfg.min_calibration_scores,
            period_s: self.period_s(),
            step_s: self.cfg.bucket_s,
            path,
        })
    }
}

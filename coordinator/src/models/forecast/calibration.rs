//! Upper quantile of the horizon maximum by split-conformal prediction on the forecaster's own
//! past errors (rolling origin: only windows that have fully passed are scored), with adaptive
//! conformal inference (Gibbs & Candès 2021) nudging the level when coverage drifts, because
//! rate series are not exchangeable. Scores are log ratios, so one calibration serves 5k and
//! 500k events/s alike.

use std::collections::VecDeque;

use super::horizon::HorizonMaxTracker;

/// Step of the adaptive level per horizon's worth of scored windows (0.005 per window at the
/// default cadence, ten windows per 10-min horizon). Windows scored every few buckets overlap
/// almost entirely, so their misses are one event, not many: each window moves the level by
/// `ACI_GAMMA × (its origin's gap to the previous one ÷ horizon)`. Counting every overlapping
/// window as a full step let one unforeseen daily rise (sixty windows of a 1-h horizon scored
/// once a minute, all missed together) drive the level past 1 — "the worst error ever seen ×
/// 1.5", a bound five times the point that stayed for a day.
const ACI_GAMMA: f64 = 0.05;

#[derive(Debug, Clone)]
pub struct MaxCalibrator {
    quantile: f64,
    window: usize,
    min_scores: usize,
    /// (point max, upper, weight of its ACI step) per pending forecast.
    tracker: HorizonMaxTracker<(f64, f64, f64)>,
    horizon_buckets: u64,
    last_origin: Option<u64>,
    scores: VecDeque<f64>,
    /// Miscoverage level actually used; starts at `1 - quantile`.
    alpha_used: f64,
}

/// The log-ratio of `actual` to `predicted` (+1 keeps a zero rate finite).
fn score(predicted: f64, actual: f64) -> f64 {
    ((actual.max(0.0) + 1.0) / (predicted.max(0.0) + 1.0)).ln()
}

impl MaxCalibrator {
    pub fn new(quantile: f64, horizon_buckets: u64, window: usize, min_scores: usize) -> Self {
        Self {
            quantile,
            window: window.max(1),
            min_scores: min_scores.max(1),
            tracker: HorizonMaxTracker::new(horizon_buckets),
            horizon_buckets: horizon_buckets.max(1),
            last_origin: None,
            scores: VecDeque::with_capacity(window.max(1)),
            alpha_used: 1.0 - quantile,
        }
    }

    pub fn scored(&self) -> usize {
        self.scores.len()
    }

    /// Remembers a forecast made after bucket `origin` for scoring later.
    pub fn record(&mut self, origin: u64, point_max: f64, upper_max: f64) {
        let gap = self
            .last_origin
            .map_or(self.horizon_buckets, |last| origin.saturating_sub(last));
        let weight = (gap as f64 / self.horizon_buckets as f64).min(1.0);
        self.last_origin = Some(origin);
        self.tracker.predict(origin, (point_max, upper_max, weight));
    }

    /// Feeds the peak of bucket `index`.
    pub fn observe(&mut self, index: u64, peak: f64) {
        let target_alpha = 1.0 - self.quantile;
        let (scores, window, alpha_used) = (&mut self.scores, self.window, &mut self.alpha_used);
        self.tracker
            .observe(index, peak, |&(predicted, upper, weight), realised| {
                if scores.len() == window {
                    scores.pop_front();
                }
                scores.push_back(score(predicted, realised));
                let missed = if realised > upper { 1.0 } else { 0.0 };
                *alpha_used =
                    (*alpha_used + weight * ACI_GAMMA * (target_alpha - missed)).clamp(-0.5, 1.5);
            });
    }

    /// The upper bound for `point_max`, or None until enough windows have been scored.
    /// `spread` widens (>1) or narrows the margin, e.g. for another horizon than calibrated.
    pub fn upper(&self, point_max: f64, spread: f64) -> Option<f64> {
        if self.scores.len() < self.min_scores {
            return None;
        }
        let mut scores: Vec<f64> = self.scores.iter().copied().collect();
        let n = scores.len();
        let level = 1.0 - self.alpha_used;
        let margin = if level >= 1.0 {
            // Asked for more than the data can show: the worst error seen, widened.
            scores.iter().copied().fold(f64::NEG_INFINITY, f64::max) * 1.5
        } else {
            // Finite-sample conformal rank ⌈(n+1)·level⌉ (the smallest for level ≤ 0).
            let rank = ((n as f64 + 1.0) * level.max(0.0)).ceil() as usize;
            *scores
                .select_nth_unstable_by(rank.clamp(1, n) - 1, f64::total_cmp)
                .1
        };
        let margin = margin.max(0.0) * spread;
        Some(((point_max.max(0.0) + 1.0) * margin.exp() - 1.0).max(point_max))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn no_bound_before_enough_scores() {
        let c = MaxCalibrator::new(0.9, 1, 100, 10);
        assert_eq!(c.upper(100.0, 1.0), None);
    }

    #[test]
    fn bound_covers_the_nominal_share_of_past_errors() {
        // Realised maxima are the prediction times 1.00 .. 1.99 in equal steps.
        let mut c = MaxCalibrator::new(0.9, 1, 1000, 10);
        for i in 0..100u64 {
            // An upper bound that misses 10 % keeps the adaptive level where it started.
            c.record(i, 1000.0, 1895.0);
            c.observe(i + 1, 1000.0 * (1.0 + (i % 100) as f64 / 100.0));
        }
        let upper = c.upper(1000.0, 1.0).unwrap();
        assert!(upper > 1880.0 && upper < 1930.0, "{upper}");
    }

    #[test]
    fn bound_is_never_below_the_point() {
        let mut c = MaxCalibrator::new(0.95, 1, 100, 5);
        for i in 0..50u64 {
            c.record(i, 1000.0, 2000.0);
            c.observe(i + 1, 500.0);
        }
        assert_eq!(c.upper(1000.0, 1.0), Some(1000.0));
    }

    #[test]
    fn overlapping_windows_missed_together_count_as_one_miss() {
        // A 60-bucket horizon scored every bucket; every 1000 buckets a spike that no forecast
        // saw makes the 60 windows covering it (6 %, about the nominal miss rate) miss together.
        // Counted as 60 independent misses, each spike pushed the adaptive level past 1 ("the
        // worst error × 1.5"); as one miss, the bound stays a conformal quantile of the errors
        // seen, so never above the worst of them.
        let horizon = 60;
        let mut c = MaxCalibrator::new(0.95, horizon, 5000, 30);
        let spike = |i: u64| i % 1000 == 999;
        for i in 0..3060u64 {
            c.record(i, 1000.0, 1100.0);
            c.observe(i + 1, if spike(i + 1) { 3000.0 } else { 1000.0 });
        }
        let upper = c.upper(1000.0, 1.0).unwrap();
        let worst = 3001.0 / 1001.0 * 1001.0 - 1.0;
        assert!(
            upper > 1000.0,
            "just after a spike the level is high: {upper}"
        );
        assert!(upper <= worst + 1e-6, "{upper} above the worst error seen");
    }
}

//! Online period detection for the baselines: a coarse history of what was observed so far and
//! the detector of [`choose_period`](super::season::choose_period) rerun at a fixed cadence, so a
//! baseline knows at any time only the period that data up to then shows (never the future).

use super::SeasonConfig;
use super::season::{CoarseHistory, choose_period};

#[derive(Debug, Clone)]
pub struct PeriodTracker {
    cfg: SeasonConfig,
    history: CoarseHistory,
    slots_since_refresh: u64,
    period_slots: Option<usize>,
}

impl PeriodTracker {
    /// Keeps two cycles of the longest period `cfg` searches for (detection needs a little over
    /// [`super::season::MIN_CYCLES`]; the rest steadies it).
    pub fn new(cfg: SeasonConfig) -> Self {
        let res = u64::from(cfg.resolution_s.max(1));
        Self {
            history: CoarseHistory::new(res, (2 * cfg.max_period_s / res) as usize + 1),
            cfg,
            slots_since_refresh: 0,
            period_slots: None,
        }
    }

    /// Feeds a value observed at `t_s` (averaged per `resolution_s` slot); returns true when
    /// detection was rerun, so the caller can react to a changed period.
    pub fn push(&mut self, t_s: u64, value: f64) -> bool {
        if !self.history.push(t_s, value) {
            return false;
        }
        self.slots_since_refresh += 1;
        if self.slots_since_refresh * self.resolution_s() < self.cfg.refresh_every_s {
            return false;
        }
        self.slots_since_refresh = 0;
        self.period_slots = choose_period(&self.history.filled(), &self.cfg);
        true
    }

    pub fn resolution_s(&self) -> u64 {
        self.history.resolution_s()
    }

    /// The period in slots of `resolution_s`, if one was detected at the last refresh.
    pub fn period_slots(&self) -> Option<usize> {
        self.period_slots
    }

    pub fn period_s(&self) -> Option<u64> {
        self.period_slots
            .map(|lag| lag as u64 * self.resolution_s())
    }

    /// What has been observed, slot by slot (for estimating a profile of the period).
    pub fn history(&self) -> &CoarseHistory {
        &self.history
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::f64::consts::TAU;

    use super::*;

    #[test]
    fn finds_a_period_only_after_one_and_a_half_cycles() {
        let mut tracker = PeriodTracker::new(SeasonConfig::default());
        let wave = |t: u64| 1_000.0 + 300.0 * (TAU * t as f64 / 7_200.0).sin();
        let mut first_seen = None;
        for t in 0..6 * 3_600 {
            if tracker.push(t, wave(t)) && first_seen.is_none() && tracker.period_s().is_some() {
                first_seen = Some(t);
            }
        }
        let period = tracker.period_s().unwrap();
        assert!(period.abs_diff(7_200) <= 120, "{period}");
        assert!(first_seen.unwrap() >= 3 * 7_200 / 2, "{first_seen:?}");
    }

    #[test]
    fn a_flat_series_has_no_period() {
        let mut tracker = PeriodTracker::new(SeasonConfig::default());
        let mut state = 99u64;
        for t in 0..6 * 3_600 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            tracker.push(t, 500.0 + (state >> 11) as f64 / (1u64 << 53) as f64);
        }
        assert_eq!(tracker.period_s(), None);
    }
}

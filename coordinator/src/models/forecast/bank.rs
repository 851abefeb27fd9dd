//! A small bank of robust level-and-trend models with different memories, weighted by how well
//! each predicted the horizon maximum lately. The bank replaces parameter fitting: no batch
//! optimisation, and it follows a series whose character changes (calm nights, busy days).

use super::holt::{HoltParams, RobustHolt};
use super::horizon::HorizonMaxTracker;

/// The bank's default members: short, medium and long memories, each with no trend and a damped
/// trend, plus one undamped trend for long steady ramps (the weights keep it out when it
/// overshoots).
pub fn default_bank_params() -> Vec<HoltParams> {
    let mut params = vec![HoltParams {
        alpha: 0.2,
        beta: 0.02,
        phi: 1.0,
    }];
    for alpha in [0.05, 0.2, 0.6] {
        params.push(HoltParams {
            alpha,
            beta: 0.0,
            phi: 1.0,
        });
        params.push(HoltParams {
            alpha,
            beta: alpha * 0.1,
            phi: 0.98,
        });
    }
    params
}

#[derive(Debug, Clone)]
struct Member {
    model: RobustHolt,
    /// Whether this member models the series minus the seasonal profile.
    seasonal: bool,
    /// EWMA of squared relative errors of the horizon maximum.
    mse: f64,
    scored: u64,
}

/// Members weighted by inverse recent error of their horizon-max forecasts. Every parameter set
/// runs twice, on the raw and on the deseasonalised levels, so whether a detected season helps
/// is decided by forecast errors, not by the detector alone.
#[derive(Debug, Clone)]
pub struct HoltBank {
    members: Vec<Member>,
    /// Every member's predicted horizon maximum, per origin: all are scored against the same
    /// realised maximum, so it is computed once.
    scorer: HorizonMaxTracker<Vec<f64>>,
    horizon: u64,
    mse_decay: f64,
}

impl HoltBank {
    /// `horizon`: buckets over which members are scored; `memory`: scored forecasts the error
    /// average remembers (roughly).
    pub fn new(params: &[HoltParams], horizon: u64, memory: u64) -> Self {
        let horizon = horizon.max(1);
        Self {
            members: [false, true]
                .iter()
                .flat_map(|&seasonal| params.iter().map(move |p| (seasonal, *p)))
                .map(|(seasonal, p)| Member {
                    model: RobustHolt::new(p, true),
                    seasonal,
                    mse: 0.0,
                    scored: 0,
                })
                .collect(),
            scorer: HorizonMaxTracker::new(horizon),
            horizon,
            mse_decay: 1.0 / memory.max(1) as f64,
        }
    }

    pub fn is_initialised(&self) -> bool {
        self.members
            .first()
            .is_some_and(|m| m.model.is_initialised())
    }

    /// Feeds bucket `index`'s `level` after `skipped` empty buckets; `season_now` is the profile
    /// at this bucket. With `score_ahead`, each member's horizon-maximum forecast is also kept
    /// for scoring; it holds the profile at buckets `index + 1 ..= index + horizon` (shorter or
    /// empty means 0). Scoring every few buckets is enough: consecutive windows overlap almost
    /// entirely, and the forecasts cost most of an update.
    pub fn update(
        &mut self,
        index: u64,
        level: f64,
        skipped: u64,
        season_now: f64,
        score_ahead: Option<&[f64]>,
    ) {
        let (decay, horizon) = (self.mse_decay, self.horizon);
        let members = &mut self.members;
        self.scorer.observe(index, level, |predicted, realised| {
            for (m, &p) in members.iter_mut().zip(predicted) {
                let err = ((realised - p) / realised.abs().max(p.abs()).max(1e-9)).powi(2);
                m.mse = if m.scored == 0 {
                    err
                } else {
                    m.mse + decay * (err - m.mse)
                };
                m.scored += 1;
            }
        });
        for m in &mut self.members {
            let own = if m.seasonal { season_now } else { 0.0 };
            m.model.skip(skipped);
            m.model.update(level - own);
        }
        let Some(season_ahead) = score_ahead else {
            return;
        };
        let predictions = self
            .members
            .iter()
            .map(|m| {
                let own = |k: usize| match m.seasonal {
                    true => season_ahead.get(k).copied().unwrap_or(0.0),
                    false => 0.0,
                };
                m.model
                    .forecasts(1, horizon)
                    .enumerate()
                    .map(|(k, f)| f + own(k))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect();
        self.scorer.predict(index, predictions);
    }

    pub fn reset(&mut self) {
        for m in &mut self.members {
            m.model = RobustHolt::new(m.model.params(), true);
        }
        self.scorer = HorizonMaxTracker::new(self.horizon);
    }

    /// Moves the seasonal members' levels, when the profile under them is re-estimated.
    pub fn shift_seasonal_levels(&mut self, delta: f64) {
        for m in self.members.iter_mut().filter(|m| m.seasonal) {
            m.model.shift_level(delta);
        }
    }

    /// Combination weights (sum to 1): equal until every member has been scored.
    pub fn weights(&self) -> Vec<f64> {
        let n = self.members.len() as f64;
        if self.members.iter().any(|m| m.scored == 0) {
            return vec![1.0 / n; self.members.len()];
        }
        let inverse: Vec<f64> = self.members.iter().map(|m| 1.0 / (m.mse + 1e-12)).collect();
        let total: f64 = inverse.iter().sum();
        inverse.iter().map(|w| w / total).collect()
    }

    /// Weighted forecasts for steps `from..=to` after the last update; `season[k]` is the
    /// profile at step `from + k`.
    pub fn path(&self, from: u64, to: u64, season: &[f64], weights: &[f64]) -> Vec<f64> {
        let mut path = vec![0.0; (to + 1).saturating_sub(from) as usize];
        for (m, w) in self.members.iter().zip(weights) {
            for (k, f) in m.model.forecasts(from, to).enumerate() {
                let s = if m.seasonal {
                    season.get(k).copied().unwrap_or(0.0)
                } else {
                    0.0
                };
                path[k] += w * (f + s);
            }
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighting_beats_an_equal_mix_on_a_ramp() {
        // Trend members should take over from level-only ones.
        let params = default_bank_params();
        let mut bank = HoltBank::new(&params, 10, 100);
        for i in 0..600 {
            bank.update(i, 10.0 * i as f64, 0, 0.0, Some(&[]));
        }
        let weights = bank.weights();
        let equal = vec![1.0 / weights.len() as f64; weights.len()];
        let truth = 10.0 * 609.0;
        let weighted_error = (bank.path(10, 10, &[], &weights)[0] - truth).abs();
        let equal_error = (bank.path(10, 10, &[], &equal)[0] - truth).abs();
        assert!(
            weighted_error < 0.8 * equal_error,
            "{weighted_error} vs {equal_error}"
        );
    }
}

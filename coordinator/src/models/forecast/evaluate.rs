//! Rolling-origin evaluation of the horizon maximum: the forecaster sees the series once, in
//! order, and is asked for a forecast every `every_s` after `warmup_s`; each forecast is scored
//! against the maximum that followed. Nothing is ever fitted on the window being scored.

use super::{
    Forecaster, HoltBaseline, HoltWinters, HoltWintersParams, NaiveRule, SeasonConfig,
    SeasonalNaive,
};
use crate::trace::RatePoint;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalConfig {
    pub horizon_s: u32,
    pub every_s: u64,
    pub warmup_s: u64,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            horizon_s: 600,
            every_s: 60,
            warmup_s: 3_600,
        }
    }
}

/// The baselines the forecaster is compared against, by name, fresh (nothing seen yet).
/// `horizon_s` and `quantile`: what Holt–Winters calibrates its upper bound for; the others'
/// upper bound is the point × (1 + [`BASELINE_MARGIN`](super::BASELINE_MARGIN)).
pub fn baselines(horizon_s: u32, quantile: f64) -> Vec<(&'static str, Box<dyn Forecaster>)> {
    let season = SeasonConfig::default;
    vec![
        (
            "naive: last value",
            Box::new(SeasonalNaive::new(None, NaiveRule::LastValue)),
        ),
        (
            "naive: max of last horizon",
            Box::new(SeasonalNaive::new(None, NaiveRule::WindowMax)),
        ),
        (
            "seasonal naive (detected period)",
            Box::new(SeasonalNaive::new(Some(season()), NaiveRule::LastValue)),
        ),
        (
            "Holt damped (60-s means)",
            Box::new(HoltBaseline::default()),
        ),
        (
            "Holt-Winters damped (60-s means)",
            Box::new(HoltWinters::new(
                HoltWintersParams::default(),
                season(),
                horizon_s,
                quantile,
            )),
        ),
    ]
}

/// Scores over all origins. MASE divides the MAE by that of the naive forecast "the maximum of
/// the last horizon", over the same origins (so < 1 beats it).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Scores {
    pub origins: usize,
    pub mae: f64,
    pub mase: f64,
    /// Symmetric MAPE in percent.
    pub smape: f64,
    /// Share of origins where the true maximum ≤ the upper bound.
    pub coverage: f64,
    /// Mean of upper bound / true maximum: the headroom the bound costs.
    pub upper_ratio: f64,
}

/// Runs `forecaster` over `points` (sorted by time). Origins without a forecast or without data
/// in the following horizon are skipped.
pub fn evaluate<F: Forecaster + ?Sized>(
    forecaster: &mut F,
    points: &[RatePoint],
    cfg: EvalConfig,
) -> Scores {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Scores::default();
    };
    let h = u64::from(cfg.horizon_s);
    let mut next_origin = first.t_s + cfg.warmup_s;
    let (mut n, mut abs, mut naive_abs, mut smape, mut covered, mut ratio) =
        (0usize, 0.0, 0.0, 0.0, 0usize, 0.0);
    for (i, p) in points.iter().enumerate() {
        forecaster.observe(p.t_s, p.rate);
        if p.t_s < next_origin || p.t_s + h > last.t_s {
            continue;
        }
        next_origin = p.t_s + cfg.every_s;
        let truth = points[i + 1..]
            .iter()
            .take_while(|q| q.t_s <= p.t_s + h)
            .map(|q| q.rate)
            .reduce(f64::max);
        let naive = points[..=i]
            .iter()
            .rev()
            .take_while(|q| q.t_s + h > p.t_s)
            .map(|q| q.rate)
            .fold(f64::NEG_INFINITY, f64::max);
        let (Some(truth), Some(f)) = (truth, forecaster.forecast(cfg.horizon_s)) else {
            continue;
        };
        n += 1;
        abs += (f.point_max - truth).abs();
        naive_abs += (naive - truth).abs();
        let denom = f.point_max.abs() + truth.abs();
        smape += if denom > 0.0 {
            2.0 * (f.point_max - truth).abs() / denom
        } else {
            0.0
        };
        covered += usize::from(truth <= f.upper_max);
        ratio += if truth > 0.0 {
            f.upper_max / truth
        } else {
            1.0
        };
    }
    if n == 0 {
        return Scores::default();
    }
    let nf = n as f64;
    Scores {
        origins: n,
        mae: abs / nf,
        mase: if naive_abs > 0.0 {
            abs / naive_abs
        } else {
            f64::NAN
        },
        smape: 100.0 * smape / nf,
        coverage: covered as f64 / nf,
        upper_ratio: ratio / nf,
    }
}

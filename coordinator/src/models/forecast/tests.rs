//! Behaviour of the whole forecaster on synthetic series (seeded, no files, no clocks).

#![allow(clippy::unwrap_used)]

use std::f64::consts::TAU;

use super::naive::NaiveRule;
use super::*;
use crate::trace::RatePoint;

/// Deterministic noise in [-0.5, 0.5).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// 5000 + trend + a 2-hour and a 20-minute wave + noise, one point per second.
fn synthetic(seconds: u64, seed: u64) -> Vec<RatePoint> {
    let mut rng = Lcg(seed);
    let mut smooth_noise = 0.0;
    (0..seconds)
        .map(|t| {
            let x = t as f64;
            smooth_noise = 0.95 * smooth_noise + 40.0 * rng.next();
            let rate = 5_000.0
                + 0.02 * x
                + 2_000.0 * (TAU * x / 7_200.0).sin()
                + 400.0 * (TAU * x / 1_200.0).sin()
                + smooth_noise
                + 60.0 * rng.next();
            RatePoint {
                t_s: 1_700_000_000 + t,
                rate,
            }
        })
        .collect()
}

fn ours() -> OnlineForecaster {
    OnlineForecaster::new(ForecastConfig::default()).unwrap()
}

#[test]
fn beats_naive_and_seasonal_naive_on_a_seasonal_series_with_trend() {
    let points = synthetic(12 * 3_600, 1);
    let cfg = EvalConfig::default();
    let mut model = ours();
    let scores = evaluate(&mut model, &points, cfg);
    let last = evaluate(
        &mut SeasonalNaive::new(None, NaiveRule::LastValue),
        &points,
        cfg,
    );
    let seasonal = evaluate(
        &mut SeasonalNaive::new(Some(SeasonConfig::default()), NaiveRule::LastValue),
        &points,
        cfg,
    );
    assert!(scores.origins > 500, "{scores:?}");
    assert!(scores.mase < 0.6, "{scores:?}");
    assert!(
        scores.mae < 0.8 * last.mae,
        "ours {scores:?} naive {last:?}"
    );
    assert!(
        scores.mae < seasonal.mae,
        "ours {scores:?} seasonal naive {seasonal:?}"
    );
    let period = model.period_s().unwrap();
    assert!(
        period.abs_diff(7_200) <= 120 || period.abs_diff(1_200) <= 60,
        "{period}"
    );
}

#[test]
fn upper_quantile_coverage_is_near_nominal() {
    for quantile in [0.8, 0.95] {
        let points = synthetic(16 * 3_600, 7);
        let config = ForecastConfig {
            quantile,
            ..ForecastConfig::default()
        };
        let mut model = OnlineForecaster::new(config).unwrap();
        // Score only once calibration has had 2 hours of windows.
        let cfg = EvalConfig {
            warmup_s: 3 * 3_600,
            ..EvalConfig::default()
        };
        let scores = evaluate(&mut model, &points, cfg);
        assert!(
            (scores.coverage - quantile).abs() < 0.06,
            "q={quantile}: {scores:?}"
        );
        assert!(
            scores.upper_ratio > 1.0 && scores.upper_ratio < 1.3,
            "{scores:?}"
        );
    }
}

/// MAE of the point forecast against the clean series' maximum, feeding `fed`.
fn mae_against_clean(fed: &[RatePoint], clean: &[RatePoint]) -> f64 {
    let mut model = ours();
    let (mut errors, mut n, mut fed_i) = (0.0, 0, 0);
    for (i, p) in clean.iter().enumerate().skip(3_600).step_by(60) {
        while fed_i < fed.len() && fed[fed_i].t_s <= p.t_s {
            model.observe(fed[fed_i].t_s, fed[fed_i].rate);
            fed_i += 1;
        }
        let Some(truth) = clean[i + 1..]
            .iter()
            .take(600)
            .map(|q| q.rate)
            .reduce(f64::max)
        else {
            continue;
        };
        let f = model.forecast(600).unwrap();
        assert!(
            f.point_max.is_finite() && f.upper_max >= f.point_max,
            "{f:?}"
        );
        errors += (f.point_max - truth).abs();
        n += 1;
    }
    errors / f64::from(n)
}

#[test]
fn gaps_and_outliers_do_not_break_it() {
    let clean = synthetic(8 * 3_600, 3);
    let mut rng = Lcg(99);
    let mut corrupted = Vec::new();
    for p in &clean {
        let minute = (p.t_s / 60) % 180;
        // 5 % of seconds lost at random, plus a 5-minute outage every 3 hours.
        if rng.next() < -0.45 || (100..105).contains(&minute) {
            continue;
        }
        // 1 % of seconds are 20× spikes, 1 % read zero.
        let spike = rng.next();
        let rate = if spike > 0.49 {
            p.rate * 20.0
        } else if spike < -0.49 {
            0.0
        } else {
            p.rate
        };
        corrupted.push(RatePoint { rate, ..*p });
    }
    let clean_mae = mae_against_clean(&clean, &clean);
    let corrupted_mae = mae_against_clean(&corrupted, &clean);
    assert!(
        corrupted_mae < 1.5 * clean_mae,
        "clean {clean_mae} corrupted {corrupted_mae}"
    );
}

#[test]
fn a_long_outage_restarts_the_level_at_the_new_rate() {
    let mut model = ours();
    for t in 0..7_200 {
        model.observe(t, 10_000.0);
    }
    for t in 20_000..20_100 {
        model.observe(t, 2_000.0);
    }
    let f = model.forecast(600).unwrap();
    assert!((f.point_max - 2_000.0).abs() < 200.0, "{f:?}");
}

#[test]
fn works_on_less_than_one_daily_season() {
    // Daily period configured, 6 hours of a daily-shaped series: no season yet, still useful.
    let points: Vec<RatePoint> = (0..6 * 3_600u64)
        .map(|t| RatePoint {
            t_s: t,
            rate: 10_000.0 + 5_000.0 * (TAU * t as f64 / 86_400.0).sin(),
        })
        .collect();
    let mut model = ours();
    let scores = evaluate(&mut model, &points, EvalConfig::default());
    assert_eq!(model.period_s(), None);
    assert!(scores.mase < 0.5, "{scores:?}");
}

/// Three days of a daily pattern with a sharp evening peak: once two days are in, the daily
/// season must be found and pay off on the third day.
#[test]
fn daily_season_is_used_once_two_days_are_seen() {
    let mut rng = Lcg(11);
    let day = 86_400.0;
    let points: Vec<RatePoint> = (0..3 * 86_400u64)
        .map(|t| {
            let phase = (t as f64 % day) / day;
            let evening = (-((phase - 0.8) / 0.03).powi(2)).exp();
            let rate =
                20_000.0 - 8_000.0 * (TAU * phase).cos() + 15_000.0 * evening + 300.0 * rng.next();
            RatePoint { t_s: t, rate }
        })
        .collect();
    let third_day = EvalConfig {
        warmup_s: 2 * 86_400 + 3_600,
        ..EvalConfig::default()
    };
    let mut seasonal = ours();
    let with_season = evaluate(&mut seasonal, &points, third_day);
    let mut without = OnlineForecaster::new(ForecastConfig {
        season: SeasonConfig {
            known_periods_s: Vec::new(),
            detect: false,
            ..SeasonConfig::default()
        },
        ..ForecastConfig::default()
    })
    .unwrap();
    let no_season = evaluate(&mut without, &points, third_day);
    assert_eq!(
        seasonal.period_s().map(|p| p.abs_diff(86_400) <= 180),
        Some(true)
    );
    assert!(
        with_season.mae < 0.8 * no_season.mae,
        "with {with_season:?} without {no_season:?}"
    );
}

#[test]
fn invalid_and_late_observations_are_ignored() {
    let mut model = ours();
    assert_eq!(model.forecast(600), None);
    for t in 0..100 {
        model.observe(t, 100.0);
    }
    model.observe(50, 1e9);
    model.observe(99, 1e9);
    model.observe(101, f64::NAN);
    model.observe(102, -5.0);
    model.observe(103, f64::INFINITY);
    assert_eq!(model.ignored_observations(), 5);
    let f = model.forecast(600).unwrap();
    assert!((f.point_max - 100.0).abs() < 1.0, "{f:?}");
    assert!(!f.calibrated);
    assert!((f.upper_max - 110.0).abs() < 1.0, "warm-up margin: {f:?}");
}

#[test]
fn other_horizons_are_served() {
    let points = synthetic(4 * 3_600, 5);
    let mut model = ours();
    for p in &points {
        model.observe(p.t_s, p.rate);
    }
    let short = model.forecast(60).unwrap();
    let long = model.forecast(1_800).unwrap();
    assert_eq!(short.path.len(), 6);
    assert_eq!(long.path.len(), 180);
    assert!(short.upper_max >= short.point_max && long.upper_max >= long.point_max);
    assert!(long.upper_max - long.point_max > short.upper_max - short.point_max);
}

#[test]
fn bad_configs_are_rejected_with_a_reason() {
    let bad = [
        ForecastConfig {
            quantile: 1.0,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            bucket_s: 0,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            horizon_s: 5,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            bucket_s: 7,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            horizon_s: u32::MAX,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            season: SeasonConfig {
                max_period_s: u64::MAX,
                ..SeasonConfig::default()
            },
            ..ForecastConfig::default()
        },
        ForecastConfig {
            calibration_window: usize::MAX,
            ..ForecastConfig::default()
        },
        ForecastConfig {
            warmup_margin: f64::NAN,
            ..ForecastConfig::default()
        },
    ];
    for cfg in bad {
        let err = OnlineForecaster::new(cfg.clone()).unwrap_err();
        assert!(
            err.to_string().contains("forecast config"),
            "{cfg:?}: {err}"
        );
    }
}

mod properties {
    use proptest::prelude::*;

    use super::super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any sequence of observations (late, duplicate, huge, negative, NaN, long gaps) leaves
        /// the forecaster answering with finite, ordered numbers.
        #[test]
        fn arbitrary_observations_never_break_the_forecast(
            steps in proptest::collection::vec((0u64..4_000, prop_oneof![
                8 => 0.0f64..1e6,
                1 => Just(f64::NAN),
                1 => -1e3f64..0.0,
                1 => 1e12f64..1e15,
            ]), 1..400),
        ) {
            let mut model = OnlineForecaster::new(ForecastConfig::default()).unwrap();
            let mut t = 1_000_000u64;
            for (dt, rate) in steps {
                t = if dt < 50 { t.saturating_sub(dt) } else { t + dt / 50 };
                model.observe(t, rate);
                if let Some(f) = model.forecast(600) {
                    prop_assert!(f.point_max.is_finite() && f.point_max >= 0.0, "{f:?}");
                    prop_assert!(f.upper_max.is_finite() && f.upper_max >= f.point_max, "{f:?}");
                }
            }
        }
    }
}

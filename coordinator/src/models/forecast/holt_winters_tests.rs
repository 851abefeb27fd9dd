#![allow(clippy::unwrap_used)]

use std::f64::consts::TAU;

use super::*;
use crate::models::forecast::{EvalConfig, NaiveRule, SeasonalNaive, evaluate};
use crate::trace::RatePoint;

fn hw() -> HoltWinters {
    HoltWinters::new(
        HoltWintersParams::default(),
        SeasonConfig::default(),
        600,
        0.95,
    )
}

/// 5000 + `slope`·t + a 2-hour wave + uniform noise of width `noise`, one point per second.
fn seasonal(hours: u64, slope: f64, noise: f64) -> Vec<RatePoint> {
    let mut state = 17u64;
    (0..hours * 3_600)
        .map(|t| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let x = t as f64;
            RatePoint {
                t_s: 1_700_000_000 + t,
                rate: 5_000.0 + slope * x + 2_000.0 * (TAU * x / 7_200.0).sin() + noise * u,
            }
        })
        .collect()
}

#[test]
fn recovers_the_period_online() {
    let mut model = hw();
    let points = seasonal(8, 0.0, 50.0);
    for p in &points[..3 * 3_600] {
        model.observe(p.t_s, p.rate);
    }
    // 1.5 cycles and a refresh: no season yet (the correlation peak is not yet seen to fall),
    // but already forecasts.
    assert_eq!(model.period_s(), None);
    assert!(model.forecast(600).is_some());
    for p in &points[3 * 3_600..] {
        model.observe(p.t_s, p.rate);
    }
    let period = model.period_s().unwrap();
    assert!(period.abs_diff(7_200) <= 120, "{period}");
}

#[test]
fn beats_naive_and_seasonal_naive_on_a_clean_seasonal_series_with_trend() {
    let points = seasonal(14, 0.05, 0.0);
    let cfg = EvalConfig::default();
    let ours = evaluate(&mut hw(), &points, cfg);
    let window = evaluate(
        &mut SeasonalNaive::new(None, NaiveRule::WindowMax),
        &points,
        cfg,
    );
    let seasonal_naive = evaluate(
        &mut SeasonalNaive::new(Some(SeasonConfig::default()), NaiveRule::WindowMax),
        &points,
        cfg,
    );
    assert!(ours.origins > 700, "{ours:?}");
    assert!(ours.mase < 0.5, "{ours:?}");
    assert!(ours.mae < 0.5 * window.mae, "hw {ours:?} naive {window:?}");
    assert!(
        ours.mae < seasonal_naive.mae,
        "hw {ours:?} seasonal naive {seasonal_naive:?}"
    );
}

#[test]
fn the_seasonal_indices_carry_the_wave_through_a_turn() {
    // Once the season is known, the forecast at a trough must see the coming rise.
    let points = seasonal(10, 0.0, 20.0);
    let mut model = hw();
    let trough = 10 * 3_600 - 7_200 + 5_400; // sin is -1 at 3/4 of the last full cycle
    for p in &points[..trough] {
        model.observe(p.t_s, p.rate);
    }
    assert!(model.period_s().is_some());
    let f = model.forecast(1_800).unwrap();
    let truth = points[trough..trough + 1_800]
        .iter()
        .map(|p| p.rate)
        .fold(f64::NEG_INFINITY, f64::max);
    let now = points[trough - 1].rate;
    assert!(truth - now > 1_000.0, "the test series must rise here");
    assert!(
        (f.point_max - truth).abs() < 0.25 * (truth - now),
        "forecast {} truth {truth} now {now}",
        f.point_max
    );
}

#[test]
fn upper_quantile_comes_from_its_own_errors() {
    let points = seasonal(10, 0.02, 400.0);
    let mut model = hw();
    let cfg = EvalConfig {
        warmup_s: 3 * 3_600,
        ..EvalConfig::default()
    };
    let scores = evaluate(&mut model, &points, cfg);
    let f = model.forecast(600).unwrap();
    assert!(f.calibrated && f.upper_max >= f.point_max, "{f:?}");
    assert!(
        scores.coverage > 0.85 && scores.upper_ratio < 1.3,
        "{scores:?}"
    );
}

#[test]
fn bad_values_late_points_and_gaps_are_tolerated() {
    let mut model = hw();
    assert!(model.forecast(600).is_none());
    for t in 0..3_600u64 {
        model.observe(t, 1_000.0);
    }
    model.observe(100, 5_000.0);
    model.observe(3_600, f64::NAN);
    model.observe(3_601, -4.0);
    // After a two-hour outage the level restarts at the new rate (two buckets close here; a
    // level carried over would still be half-way from 1000).
    for t in 11_000..11_130u64 {
        model.observe(t, 3_000.0);
    }
    let f = model.forecast(600).unwrap();
    assert!((f.point_max - 3_000.0).abs() < 100.0, "{f:?}");
    assert!(f.upper_max.is_finite() && f.upper_max >= f.point_max);
}

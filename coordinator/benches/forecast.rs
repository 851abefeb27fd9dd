//! Forecast benchmark: rolling-origin accuracy of the 10-minute maximum on the shipped traces,
//! for the online forecaster and baselines, plus update and forecast cost. Prints markdown.
//!
//! `cargo bench -p demeter-coordinator --bench forecast [-- --quick]` (or `FORECAST_BENCH_QUICK=1`);
//! add `--features augurs` to include Grafana's augurs (MSTL + AutoETS, refit on a trailing window).

use std::cell::Cell;
use std::time::{Duration, Instant};

use demeter_coordinator::models::forecast::{
    CoarseHistory, EvalConfig, Forecast, ForecastConfig, Forecaster, OnlineForecaster,
    SeasonConfig, baselines, choose_period, evaluate,
};
use demeter_coordinator::trace::{RatePoint, parse_rate_trace};

const TRACES: [&str; 2] = [
    "ADS_3D_1S_4_sub_30K_max.csv",
    "CARS_3D_1S_4_sub_35K_max.csv",
];

/// Measures time spent in the wrapped forecaster (the benchmark is the IO shell: clocks are
/// allowed here, not in the models).
struct Timed<F> {
    inner: F,
    updates: u64,
    update_time: Duration,
    forecasts: Cell<u64>,
    forecast_time: Cell<Duration>,
}

impl<F> Timed<F> {
    fn new(inner: F) -> Self {
        Self {
            inner,
            updates: 0,
            update_time: Duration::ZERO,
            forecasts: Cell::new(0),
            forecast_time: Cell::new(Duration::ZERO),
        }
    }
}

impl<F: Forecaster> Forecaster for Timed<F> {
    fn observe(&mut self, t_s: u64, rate: f64) {
        let start = Instant::now();
        self.inner.observe(t_s, rate);
        self.update_time += start.elapsed();
        self.updates += 1;
    }

    fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
        let start = Instant::now();
        let f = self.inner.forecast(horizon_s);
        self.forecast_time
            .set(self.forecast_time.get() + start.elapsed());
        self.forecasts.set(self.forecasts.get() + 1);
        f
    }
}

fn load(name: &str) -> Vec<RatePoint> {
    let path = format!("{}/../data/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_rate_trace(&text)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .points
}

fn row<F: Forecaster>(trace: &str, model: &str, f: F, points: &[RatePoint], cfg: EvalConfig) {
    let mut timed = Timed::new(f);
    let s = evaluate(&mut timed, points, cfg);
    let update_ns = timed.update_time.as_nanos() as f64 / timed.updates.max(1) as f64;
    let forecast_us =
        timed.forecast_time.get().as_secs_f64() * 1e6 / timed.forecasts.get().max(1) as f64;
    println!(
        "| {trace} | {model} | {} | {:.3} | {:.2} | {:.3} | {:.3} | {:.0} | {:.1} |",
        s.origins, s.mase, s.smape, s.coverage, s.upper_ratio, update_ns, forecast_us
    );
}

fn ours(quantile: f64) -> OnlineForecaster {
    let config = ForecastConfig {
        quantile,
        ..ForecastConfig::default()
    };
    let Ok(model) = OnlineForecaster::new(config) else {
        panic!("the default forecast config must be valid");
    };
    model
}

/// Cost of the online forecaster alone, best of `runs` (the machine is shared; the minimum is
/// the least disturbed): mean update, mean forecast, and the hourly season refresh (period search
/// over a full default history: the trace's 60-s means repeated to 2 × the longest period + 2 h).
fn cost(points: &[RatePoint], runs: usize) -> (f64, f64, f64) {
    let season = SeasonConfig::default();
    let slots = ((2 * season.max_period_s + 7_200) / u64::from(season.resolution_s)) as usize;
    let mut history = CoarseHistory::new(u64::from(season.resolution_s), slots);
    let span = points.last().map_or(0, |p| p.t_s + 1) - points.first().map_or(0, |p| p.t_s);
    for lap in 0..=(slots as u64 * u64::from(season.resolution_s)) / span.max(1) {
        for p in points {
            history.push(p.t_s + lap * span, p.rate);
        }
    }
    let full_history = history.filled();
    let (mut update_ns, mut forecast_us, mut refresh_ms) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..runs {
        let mut model = ours(0.95);
        let start = Instant::now();
        for p in points {
            model.observe(p.t_s, p.rate);
        }
        update_ns = update_ns.min(start.elapsed().as_nanos() as f64 / points.len() as f64);
        let start = Instant::now();
        let mut sink = 0.0;
        for _ in 0..1_000 {
            sink += model.forecast(600).map_or(0.0, |f| f.upper_max);
        }
        forecast_us = forecast_us.min(start.elapsed().as_secs_f64() * 1e3);
        assert!(sink > 0.0, "the forecaster gave no forecast");
        let start = Instant::now();
        std::hint::black_box(choose_period(&full_history, &season));
        refresh_ms = refresh_ms.min(start.elapsed().as_secs_f64() * 1e3);
    }
    (update_ns, forecast_us, refresh_ms)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var_os("FORECAST_BENCH_QUICK").is_some();
    let cfg = EvalConfig {
        horizon_s: 600,
        every_s: if quick { 300 } else { 60 },
        warmup_s: 3_600,
    };
    println!(
        "Rolling origin, online only: forecast of the max 1-s rate over the next {} s every {} s \
         after a {} s warm-up.\nMASE = MAE / MAE of \"max of the last {} s\"; coverage = share of \
         origins with true max ≤ upper; upper/true = mean headroom. Baselines' upper = point × 1.10 \
         (the previous design's rule), except Holt-Winters' (q = 0.95 from its own past errors). Timings here include the timing wrapper and other load.\n",
        cfg.horizon_s, cfg.every_s, cfg.warmup_s, cfg.horizon_s
    );
    println!(
        "| trace | model | origins | MASE | sMAPE % | coverage | upper/true | update ns | forecast µs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut costs = Vec::new();
    for name in TRACES {
        let points = load(name);
        let trace = name.split('_').next().unwrap_or(name);
        for quantile in [0.95, 0.8] {
            let model = format!("online (ours, q={quantile})");
            row(trace, &model, ours(quantile), &points, cfg);
        }
        for (model, baseline) in baselines(cfg.horizon_s, 0.95) {
            row(trace, model, baseline, &points, cfg);
        }
        #[cfg(feature = "augurs")]
        {
            let refit_s = if quick { 1_800 } else { 60 };
            let model = format!("augurs MSTL+AutoETS (refit {} min)", refit_s / 60);
            row(
                trace,
                &model,
                augurs_adapter::Augurs::new(refit_s),
                &points,
                cfg,
            );
        }
        costs.push((trace, cost(&points, if quick { 1 } else { 3 })));
    }
    println!("\nOnline forecaster alone, best of runs:\n");
    println!("| trace | mean update ns | forecast µs | hourly season refresh ms (full history) |");
    println!("|---|---|---|---|");
    for (trace, (update_ns, forecast_us, refresh_ms)) in costs {
        println!("| {trace} | {update_ns:.0} | {forecast_us:.1} | {refresh_ms:.2} |");
    }
}

#[cfg(feature = "augurs")]
mod augurs_adapter {
    //! Batch augurs behind the online interface: 60-s means, refit every `refit_s` on the
    //! trailing day (MSTL with the period our detector would know, once two cycles fit in the
    //! window; plain AutoETS otherwise); forecasts between refits read further along the last fit.
    use std::cell::RefCell;

    use augurs_core::{Fit, Predict};
    use augurs_ets::AutoETS;
    use augurs_mstl::MSTLModel;
    use demeter_coordinator::models::forecast::{
        CoarseHistory, Forecast, Forecaster, SeasonConfig, choose_period,
    };

    const BUCKET_S: u64 = 60;
    const WINDOW: usize = 1_440;

    struct Fitted {
        last_index: u64,
        point: Vec<f64>,
        upper: Vec<f64>,
    }

    pub struct Augurs {
        refit_s: u64,
        history: CoarseHistory,
        season: SeasonConfig,
        last_t: Option<u64>,
        fit: RefCell<Option<Fitted>>,
    }

    impl Augurs {
        pub fn new(refit_s: u64) -> Self {
            Self {
                refit_s,
                history: CoarseHistory::new(BUCKET_S, 2 * 86_400 / BUCKET_S as usize),
                season: SeasonConfig::default(),
                last_t: None,
                fit: RefCell::new(None),
            }
        }

        fn refit(&self) -> Option<Fitted> {
            let all = self.history.filled();
            let y = &all[all.len().saturating_sub(WINDOW)..];
            if y.len() < 30 {
                return None;
            }
            let steps = (self.refit_s / BUCKET_S) as usize + 12;
            let period = choose_period(&all, &self.season).filter(|&p| y.len() >= 2 * p);
            let forecast = match period {
                Some(p) => {
                    let model = MSTLModel::new(vec![p], AutoETS::non_seasonal().into_trend_model());
                    model.fit(y).ok()?.predict(steps, 0.95).ok()?
                }
                None => AutoETS::non_seasonal()
                    .fit(y)
                    .ok()?
                    .predict(steps, 0.95)
                    .ok()?,
            };
            let upper = forecast
                .intervals
                .map(|i| i.upper)
                .unwrap_or_else(|| forecast.point.clone());
            Some(Fitted {
                last_index: self.history.first_index() + all.len() as u64 - 1,
                point: forecast.point,
                upper,
            })
        }
    }

    impl Forecaster for Augurs {
        fn observe(&mut self, t_s: u64, rate: f64) {
            if self.last_t.is_some_and(|l| t_s <= l) {
                return;
            }
            self.last_t = Some(t_s);
            self.history.push(t_s, rate);
        }

        fn forecast(&self, horizon_s: u32) -> Option<Forecast> {
            let now = self.last_t?;
            let current = now / BUCKET_S;
            let stale = self
                .fit
                .borrow()
                .as_ref()
                .is_none_or(|f| (current - f.last_index) * BUCKET_S > self.refit_s);
            if stale {
                *self.fit.borrow_mut() = self.refit();
            }
            let fit = self.fit.borrow();
            let fit = fit.as_ref()?;
            let from = (current - fit.last_index) as usize;
            let to = from + (u64::from(horizon_s) / BUCKET_S) as usize;
            let max = |v: &[f64]| {
                v.get(from..=to.min(v.len() - 1))
                    .and_then(|w| w.iter().copied().reduce(f64::max))
            };
            Some(Forecast {
                horizon_s,
                point_max: max(&fit.point)?,
                upper_max: max(&fit.upper)?,
                quantile: 0.95,
                calibrated: false,
                period_s: None,
                step_s: BUCKET_S as u32,
                path: Vec::new(),
            })
        }
    }
}

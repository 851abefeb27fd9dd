//! Level-and-trend model on bucket levels: damped-trend exponential smoothing in
//! error-correction form, with Huber-clipped corrections so one spike moves the level by at most
//! a few residual scales (Gelper, Fried & Croux 2010).

/// Residuals beyond this many scales are clipped. Persistent shifts still get through: the
/// scale grows while they last.
const HUBER_K: f64 = 3.0;
/// Updates before clipping starts (the scale needs a few residuals first).
const WARM_UPDATES: u64 = 6;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoltParams {
    /// Level smoothing (0, 1].
    pub alpha: f64,
    /// Trend smoothing, 0 = no trend.
    pub beta: f64,
    /// Trend damping per step (0, 1].
    pub phi: f64,
}

#[derive(Debug, Clone)]
pub struct RobustHolt {
    params: HoltParams,
    robust: bool,
    level: f64,
    trend: f64,
    /// EWMA of absolute one-step residuals.
    scale: f64,
    updates: u64,
}

impl RobustHolt {
    pub fn new(params: HoltParams, robust: bool) -> Self {
        Self {
            params,
            robust,
            level: 0.0,
            trend: 0.0,
            scale: 0.0,
            updates: 0,
        }
    }

    pub fn is_initialised(&self) -> bool {
        self.updates > 0
    }

    pub fn params(&self) -> HoltParams {
        self.params
    }

    pub fn update(&mut self, y: f64) {
        let HoltParams { alpha, beta, phi } = self.params;
        if self.updates == 0 {
            self.level = y;
            self.trend = 0.0;
            self.updates = 1;
            return;
        }
        let predicted = self.level + phi * self.trend;
        let raw = y - predicted;
        let error = if self.robust && self.updates >= WARM_UPDATES && self.scale > 0.0 {
            let bound = HUBER_K * self.scale;
            raw.clamp(-bound, bound)
        } else {
            raw
        };
        // The scale learns from residuals clipped at twice the bound, so a spike barely moves
        // it but a lasting shift widens it until the level has caught up.
        let scale_input = if self.robust && self.updates >= WARM_UPDATES {
            raw.abs()
                .min(2.0 * HUBER_K * self.scale.max(f64::MIN_POSITIVE))
        } else {
            raw.abs()
        };
        self.scale += 0.05 * (scale_input - self.scale);
        self.level = predicted + alpha * error;
        self.trend = phi * self.trend + beta * error;
        self.updates += 1;
    }

    /// Advances over `steps` buckets without data: the forecast stands in for them.
    pub fn skip(&mut self, steps: u64) {
        if self.updates == 0 {
            return;
        }
        self.level = self.forecast(steps);
        self.trend *= self.params.phi.powf(steps as f64);
        if steps > 0 {
            self.level = self.level.max(0.0);
        }
    }

    /// Point forecast `steps` buckets ahead.
    pub fn forecast(&self, steps: u64) -> f64 {
        self.level + self.trend * damped_steps(self.params.phi, steps)
    }

    /// Point forecasts for steps `from..=to` (`from` ≥ 1), without a power per step.
    pub fn forecasts(&self, from: u64, to: u64) -> impl Iterator<Item = f64> + '_ {
        let phi = self.params.phi;
        let (mut power, mut damped) = (1.0, 0.0);
        (1..=to).filter_map(move |k| {
            power *= phi;
            damped += power;
            (k >= from).then_some(self.level + self.trend * damped)
        })
    }

    /// Moves the level, e.g. when the seasonal profile it sits on is re-estimated.
    pub fn shift_level(&mut self, delta: f64) {
        self.level += delta;
    }
}

/// φ + φ² + … + φ^steps.
fn damped_steps(phi: f64, steps: u64) -> f64 {
    if phi >= 1.0 {
        steps as f64
    } else {
        phi * (1.0 - phi.powf(steps as f64)) / (1.0 - phi)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TREND: HoltParams = HoltParams {
        alpha: 0.3,
        beta: 0.05,
        phi: 1.0,
    };

    #[test]
    fn follows_a_linear_trend() {
        let mut m = RobustHolt::new(TREND, true);
        for i in 0..500 {
            m.update(100.0 + 2.0 * i as f64);
        }
        let expected = 100.0 + 2.0 * 509.0;
        assert!(
            (m.forecast(10) - expected).abs() < 1.0,
            "{}",
            m.forecast(10)
        );
    }

    #[test]
    fn a_spike_barely_moves_the_robust_level_but_moves_the_plain_one() {
        let mut robust = RobustHolt::new(TREND, true);
        let mut plain = RobustHolt::new(TREND, false);
        for i in 0..200 {
            let y = 100.0 + if i % 2 == 0 { 1.0 } else { -1.0 };
            robust.update(y);
            plain.update(y);
        }
        robust.update(10_000.0);
        plain.update(10_000.0);
        assert!(
            (robust.forecast(1) - 100.0).abs() < 10.0,
            "{}",
            robust.forecast(1)
        );
        assert!(plain.forecast(1) > 1_000.0);
    }

    #[test]
    fn a_lasting_level_shift_is_adopted() {
        let mut m = RobustHolt::new(TREND, true);
        for i in 0..200 {
            m.update(100.0 + if i % 2 == 0 { 1.0 } else { -1.0 });
        }
        for _ in 0..60 {
            m.update(200.0);
        }
        assert!((m.forecast(1) - 200.0).abs() < 5.0, "{}", m.forecast(1));
    }

    #[test]
    fn incremental_forecasts_match_closed_form() {
        let mut m = RobustHolt::new(
            HoltParams {
                alpha: 0.3,
                beta: 0.05,
                phi: 0.9,
            },
            true,
        );
        for i in 0..50 {
            m.update(i as f64);
        }
        let path: Vec<f64> = m.forecasts(3, 7).collect();
        assert_eq!(path.len(), 5);
        for (k, f) in path.iter().enumerate() {
            assert!((f - m.forecast(3 + k as u64)).abs() < 1e-9);
        }
    }

    #[test]
    fn skip_extrapolates_through_a_gap() {
        let mut m = RobustHolt::new(TREND, true);
        for i in 0..300 {
            m.update(i as f64);
        }
        let before = m.forecast(20);
        m.skip(20);
        assert!((m.forecast(0) - before).abs() < 1e-9);
    }
}

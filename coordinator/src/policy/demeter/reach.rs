//! What one more measurement of a candidate could change: the probability that profiling it
//! once makes it acceptable (a one-step knowledge-gradient look-ahead on the QoS constraints).
//!
//! Why not P(feasible): the surrogates' variance is the *latent* uncertainty about a
//! configuration's mean outcome. A configuration measured again and again whose mean sits on a
//! QoS bound (recovery 175–189 s against 180 s on the step trace) keeps P(feasible) ≈ ½ however
//! often it is measured, so ranking profiling candidates by P(feasible) ordered the same
//! borderline copy in five batches running while production held an expensive configuration.
//! One measurement with noise variance `n²` moves the posterior mean by a normal of standard
//! deviation `s̃ = s² / √(s² + n²)` and leaves a posterior standard deviation
//! `s' = s·n / √(s² + n²)`; the candidate becomes acceptable when the new mean clears the bound
//! by `z·s'`. Far from the data (`s ≫ n`) this is P(feasible) with a margin; on a well-measured
//! borderline configuration (`s ≪ n`) it goes to zero, as it should.

use crate::models::mobo::ehvi::normal_cdf;
use crate::models::surrogate::{ConfigPrediction, Estimate, Qos};

/// Measurement noise (standard deviation, log space) of the constrained outcomes: what one
/// more measurement of a configuration is blurred by. Zero makes the look-ahead the plain
/// P(feasible) (nothing is left to learn but the latent uncertainty).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeasurementNoise {
    pub latency_log_sd: f64,
    pub recovery_log_sd: f64,
}

/// The margin, in posterior standard deviations, each constrained outcome must clear its bound
/// by for the candidate to reach `confidence`: latency and recovery are treated as independent
/// (as P(feasible) treats them), so each gets `√confidence`, the share that makes their product
/// reach it.
pub fn confidence_margin(confidence: f64) -> f64 {
    normal_quantile(confidence.clamp(1e-6, 1.0 - 1e-6).sqrt())
}

/// P(one more measurement leaves `prediction` acceptable): both outcomes clear their bounds by
/// `z` posterior standard deviations ([`confidence_margin`]).
pub fn reach_probability(
    prediction: &ConfigPrediction,
    qos: &Qos,
    noise: MeasurementNoise,
    z: f64,
) -> f64 {
    clears(
        &prediction.latency_p95_ms,
        qos.latency_p95_ms,
        noise.latency_log_sd,
        z,
    ) * clears(
        &prediction.recovery_s,
        qos.recovery_s,
        noise.recovery_log_sd,
        z,
    )
}

/// P(after one measurement of noise `noise_sd`, the outcome is at most `bound` with `z`
/// posterior standard deviations to spare): the new posterior mean is a normal of sd `s̃`
/// around today's, so this is today's belief, shifted up by the margin and narrowed to `s̃`.
fn clears(estimate: &Estimate, bound: f64, noise_sd: f64, z: f64) -> f64 {
    let s = estimate.log_sd.max(0.0);
    let n = noise_sd.max(0.0);
    let total = (s * s + n * n).sqrt();
    let (moves, after) = if total > 0.0 {
        (s * s / total, s * n / total)
    } else {
        (0.0, 0.0)
    };
    Estimate {
        log_mean: estimate.log_mean + z * after,
        log_sd: moves,
    }
    .prob_at_most(bound)
}

/// The standard normal quantile by bisection on the CDF (once per ranking; 80 halvings reach
/// the f64 resolution of the [−10, 10] bracket).
fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-10.0_f64, 10.0_f64);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::models::space::JobConfig;

    const QOS: Qos = Qos {
        latency_p95_ms: 500.0,
        recovery_s: 180.0,
    };

    fn prediction(recovery_s: f64, recovery_sd: f64) -> ConfigPrediction {
        ConfigPrediction {
            config: "p=12,slots=1,mem=4096m,cpu=1,ckpt=30s"
                .parse::<JobConfig>()
                .unwrap(),
            rate: 32_000.0,
            capacity: Estimate {
                log_mean: 41_000f64.ln(),
                log_sd: 0.05,
            },
            latency_p95_ms: Estimate {
                log_mean: 170f64.ln(),
                log_sd: 0.02,
            },
            recovery_s: Estimate {
                log_mean: recovery_s.ln(),
                log_sd: recovery_sd,
            },
        }
    }

    const NOISE: MeasurementNoise = MeasurementNoise {
        latency_log_sd: 0.08,
        recovery_log_sd: 0.08,
    };

    #[test]
    fn the_quantile_inverts_the_cdf() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!(normal_quantile(0.5).abs() < 1e-9);
    }

    #[test]
    fn a_well_measured_borderline_configuration_is_not_worth_measuring_again() {
        let borderline = prediction(180.0, 0.02);
        let p_feasible = borderline.p_feasible(&QOS);
        assert!((0.4..0.6).contains(&p_feasible), "{p_feasible}");
        let reach = reach_probability(&borderline, &QOS, NOISE, confidence_margin(0.9));
        assert!(reach < 0.01, "{reach}");
    }

    #[test]
    fn an_unknown_configuration_keeps_most_of_its_chance() {
        let unknown = prediction(150.0, 0.5);
        let p_feasible = unknown.p_feasible(&QOS);
        let reach = reach_probability(&unknown, &QOS, NOISE, confidence_margin(0.9));
        assert!(reach > 0.5 * p_feasible, "{reach} vs {p_feasible}");
        assert!(reach < p_feasible, "{reach} vs {p_feasible}");
    }

    #[test]
    fn without_noise_one_measurement_settles_the_outcome() {
        // n = 0: the measurement reveals the mean; reach is P(mean under the bound).
        let unknown = prediction(150.0, 0.5);
        let quiet = MeasurementNoise::default();
        let reach = reach_probability(&unknown, &QOS, quiet, confidence_margin(0.9));
        assert!((reach - unknown.p_feasible(&QOS)).abs() < 1e-9);
    }

    #[test]
    fn a_clear_pass_is_reached_and_a_clear_miss_is_not() {
        let pass = reach_probability(&prediction(60.0, 0.02), &QOS, NOISE, confidence_margin(0.9));
        let miss = reach_probability(
            &prediction(400.0, 0.02),
            &QOS,
            NOISE,
            confidence_margin(0.9),
        );
        assert!(pass > 0.99, "{pass}");
        assert!(miss < 1e-6, "{miss}");
    }
}

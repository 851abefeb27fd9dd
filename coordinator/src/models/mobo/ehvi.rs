//! Expected hypervolume improvement of one Gaussian-distributed point (independent objectives,
//! minimised): exact for two objectives, Monte-Carlo with caller-supplied normals otherwise.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::hypervolume::{hypervolume, pareto_front};

const SQRT_2: f64 = std::f64::consts::SQRT_2;
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

pub fn normal_pdf(z: f64) -> f64 {
    INV_SQRT_2PI * (-0.5 * z * z).exp()
}

pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / SQRT_2)
}

/// `ln Φ(z)`, accurate far in the lower tail where `Φ` underflows to 0 (used to rank candidates
/// by probability of feasibility when every one is very likely infeasible).
pub fn log_normal_cdf(z: f64) -> f64 {
    if z > -30.0 {
        normal_cdf(z).ln()
    } else {
        // Mills-ratio asymptotics: Φ(z) ≈ φ(z)/(−z) · (1 − 1/z²).
        -0.5 * z * z - (-z).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
            + (1.0 - 1.0 / (z * z)).ln()
    }
}

/// `P(Y ≤ threshold)` for `Y ~ N(mean, variance)`; a point mass when the variance is 0.
pub fn probability_below(mean: f64, variance: f64, threshold: f64) -> f64 {
    let sd = variance.max(0.0).sqrt();
    if sd <= 0.0 {
        return if mean <= threshold { 1.0 } else { 0.0 };
    }
    normal_cdf((threshold - mean) / sd)
}

/// `ln P(Y ≤ threshold)`, −∞ for an impossible point mass.
pub fn log_probability_below(mean: f64, variance: f64, threshold: f64) -> f64 {
    let sd = variance.max(0.0).sqrt();
    if sd <= 0.0 {
        return if mean <= threshold {
            0.0
        } else {
            f64::NEG_INFINITY
        };
    }
    log_normal_cdf((threshold - mean) / sd)
}

/// `E[(c − Y)⁺]` for `Y ~ N(mean, sd²)`.
fn expected_shortfall(c: f64, mean: f64, sd: f64) -> f64 {
    if c == f64::NEG_INFINITY {
        return 0.0;
    }
    if sd <= 0.0 {
        return (c - mean).max(0.0);
    }
    let z = (c - mean) / sd;
    (c - mean) * normal_cdf(z) + sd * normal_pdf(z)
}

/// A two-objective front cut into vertical strips: strip `i` spans `f₁ ∈ [edges[i],
/// edges[i+1]]` and is non-dominated below `f₂ = ceilings[i]`. Build once, score many points.
#[derive(Debug, Clone)]
pub struct Strips2d {
    edges: Vec<f64>,
    ceilings: Vec<f64>,
}

impl Strips2d {
    pub fn new(front: &[Vec<f64>], reference: &[f64]) -> Self {
        let mut pts: Vec<Vec<f64>> = pareto_front(front)
            .into_iter()
            .filter(|p| p[0] < reference[0] && p[1] < reference[1])
            .collect();
        pts.sort_by(|a, b| a[0].total_cmp(&b[0]));
        let mut edges = vec![f64::NEG_INFINITY];
        let mut ceilings = vec![reference[1]];
        for p in &pts {
            edges.push(p[0]);
            ceilings.push(p[1]);
        }
        edges.push(reference[0]);
        Self { edges, ceilings }
    }

    /// Exact EHVI of a point with independent normal objectives (`sd` may be 0).
    pub fn ehvi(&self, mean: [f64; 2], sd: [f64; 2]) -> f64 {
        // Strips more than TAIL standard deviations below the mean contribute < 1e-23 of a
        // strip's area: start past them and stop where the ceilings (falling) drop below.
        const TAIL: f64 = 10.0;
        let floor = [mean[0] - TAIL * sd[0], mean[1] - TAIL * sd[1]];
        let first = self.edges[1..].partition_point(|&e| e <= floor[0]);
        let mut total = 0.0;
        let mut below = expected_shortfall(self.edges[first], mean[0], sd[0]);
        for i in first..self.ceilings.len() {
            let ceiling = self.ceilings[i];
            if ceiling <= floor[1] {
                break;
            }
            let above = expected_shortfall(self.edges[i + 1], mean[0], sd[0]);
            let width = above - below;
            if width > 0.0 {
                total += width * expected_shortfall(ceiling, mean[1], sd[1]);
            }
            below = above;
        }
        total
    }
}

/// Hypervolume improvement of adding `y` to `front`: the box `[y, reference]` minus what the
/// front already covers inside it.
pub fn hypervolume_improvement(front: &[Vec<f64>], reference: &[f64], y: &[f64]) -> f64 {
    if y.iter().zip(reference).any(|(v, r)| v >= r) {
        return 0.0;
    }
    let boxed: f64 = y.iter().zip(reference).map(|(v, r)| r - v).product();
    let clipped: Vec<Vec<f64>> = front
        .iter()
        .map(|p| p.iter().zip(y).map(|(a, b)| a.max(*b)).collect())
        .collect();
    boxed - hypervolume(&clipped, reference)
}

/// Monte-Carlo EHVI with common random numbers: `normals` holds standard-normal vectors (one
/// per sample, one entry per objective) shared by every candidate, so scores compare fairly.
pub fn ehvi_monte_carlo(
    front: &[Vec<f64>],
    reference: &[f64],
    mean: &[f64],
    sd: &[f64],
    normals: &[Vec<f64>],
) -> f64 {
    if normals.is_empty() {
        return 0.0;
    }
    let mut y = vec![0.0; mean.len()];
    let total: f64 = normals
        .iter()
        .map(|eps| {
            for k in 0..mean.len() {
                y[k] = mean[k] + sd[k] * eps[k];
            }
            hypervolume_improvement(front, reference, &y)
        })
        .sum();
    total / normals.len() as f64
}

/// Seeded standard normals by Box–Muller, `samples × dims`.
pub fn standard_normals(samples: usize, dims: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..samples)
        .map(|_| {
            (0..dims)
                .map(|_| {
                    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                    let v: f64 = rng.random_range(0.0..1.0);
                    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_ehvi_is_the_hand_computed_improvement() {
        // Front {(1,1)} under (2,2); adding (0.5,0.5) gains 1.5² − 1 = 1.25.
        let strips = Strips2d::new(&[vec![1.0, 1.0]], &[2.0, 2.0]);
        assert!((strips.ehvi([0.5, 0.5], [0.0, 0.0]) - 1.25).abs() < 1e-12);
        assert_eq!(strips.ehvi([1.5, 1.5], [0.0, 0.0]), 0.0);
        let hvi = hypervolume_improvement(&[vec![1.0, 1.0]], &[2.0, 2.0], &[0.5, 0.5]);
        assert!((hvi - 1.25).abs() < 1e-12);
    }

    #[test]
    fn ehvi_with_one_uncertain_objective_by_hand() {
        // Empty front, reference (1,1), y₁ = 0 known, y₂ ~ N(0, 1): EHVI = 1 · E[(1 − Y)⁺]
        // = Φ(1) + φ(1) ≈ 0.841345 + 0.241971.
        let strips = Strips2d::new(&[], &[1.0, 1.0]);
        let e = strips.ehvi([0.0, 0.0], [0.0, 1.0]);
        assert!((e - (0.841_344_746 + 0.241_970_725)).abs() < 1e-8, "{e}");
    }

    #[test]
    fn monte_carlo_agrees_with_the_exact_two_objective_formula() {
        let normals = standard_normals(20_000, 2, 3);
        let front = vec![vec![0.2, 0.8], vec![0.5, 0.4], vec![0.9, 0.1]];
        let reference = [1.0, 1.0];
        let strips = Strips2d::new(&front, &reference);
        for (mean, sd) in [([0.4, 0.5], [0.1, 0.2]), ([0.7, 0.7], [0.3, 0.05])] {
            let exact = strips.ehvi(mean, sd);
            let mc = ehvi_monte_carlo(&front, &reference, &mean, &sd, &normals);
            assert!((exact - mc).abs() < 0.03 * exact + 1e-4, "{exact} vs {mc}");
        }
    }

    #[test]
    fn probability_edge_cases() {
        assert_eq!(probability_below(1.0, 0.0, 1.0), 1.0);
        assert_eq!(probability_below(1.0 + 1e-9, 0.0, 1.0), 0.0);
        assert!((probability_below(3.0, 4.0, 3.0) - 0.5).abs() < 1e-15);
        assert!(probability_below(0.0, 1.0, -40.0) == 0.0);
        let lp = log_probability_below(0.0, 1.0, -40.0);
        assert!(lp.is_finite() && lp < -800.0);
        assert!((log_normal_cdf(-29.0) - normal_cdf(-29.0).ln()).abs() < 1e-6);
        assert!((log_normal_cdf(-30.0 - 1e-9) - log_normal_cdf(-30.0 + 1e-9)).abs() < 1e-4);
    }
}

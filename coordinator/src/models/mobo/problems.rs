//! Standard multi-objective test problems (minimised, inputs in the unit cube), for the
//! benchmarks and tests of the optimiser. Constraints are feasible when `g(x) ≤ 0`.

use std::f64::consts::PI;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestProblem {
    /// Branin and Currin, d = 2.
    BraninCurrin,
    /// ZDT1 with `d` inputs (convex front).
    Zdt1 { d: usize },
    /// ZDT2 with `d` inputs (concave front).
    Zdt2 { d: usize },
    /// C2-DTLZ2 with two objectives, `d` inputs, one constraint (radius 0.2).
    C2Dtlz2 { d: usize },
}

/// Objectives and constraint values at one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub objectives: Vec<f64>,
    pub constraints: Vec<f64>,
}

impl Evaluation {
    pub fn feasible(&self) -> bool {
        self.constraints.iter().all(|g| *g <= 0.0)
    }
}

impl TestProblem {
    pub fn name(&self) -> String {
        match self {
            Self::BraninCurrin => "BraninCurrin (d=2)".into(),
            Self::Zdt1 { d } => format!("ZDT1 (d={d})"),
            Self::Zdt2 { d } => format!("ZDT2 (d={d})"),
            Self::C2Dtlz2 { d } => format!("C2-DTLZ2 (d={d}, 1 constraint)"),
        }
    }

    pub fn dim(&self) -> usize {
        match *self {
            Self::BraninCurrin => 2,
            Self::Zdt1 { d } | Self::Zdt2 { d } | Self::C2Dtlz2 { d } => d,
        }
    }

    pub fn constraints(&self) -> usize {
        usize::from(matches!(self, Self::C2Dtlz2 { .. }))
    }

    /// The reference points BoTorch's implementations of these problems use.
    pub fn reference(&self) -> Vec<f64> {
        match self {
            Self::BraninCurrin => vec![18.0, 6.0],
            Self::Zdt1 { .. } | Self::Zdt2 { .. } => vec![11.0, 11.0],
            Self::C2Dtlz2 { .. } => vec![1.1, 1.1],
        }
    }

    pub fn evaluate(&self, x: &[f64]) -> Evaluation {
        match self {
            Self::BraninCurrin => Evaluation {
                objectives: vec![branin(x), currin(x)],
                constraints: vec![],
            },
            Self::Zdt1 { .. } => zdt(x, |f1, g| g * (1.0 - (f1 / g).sqrt())),
            Self::Zdt2 { .. } => zdt(x, |f1, g| g * (1.0 - (f1 / g).powi(2))),
            Self::C2Dtlz2 { .. } => c2_dtlz2(x),
        }
    }
}

fn branin(x: &[f64]) -> f64 {
    let (u, v) = (15.0 * x[0] - 5.0, 15.0 * x[1]);
    let b = 5.1 / (4.0 * PI * PI);
    (v - b * u * u + 5.0 / PI * u - 6.0).powi(2) + 10.0 * (1.0 - 1.0 / (8.0 * PI)) * u.cos() + 10.0
}

fn currin(x: &[f64]) -> f64 {
    let (a, b) = (x[0], x[1]);
    let factor = if b > 0.0 {
        1.0 - (-1.0 / (2.0 * b)).exp()
    } else {
        1.0
    };
    factor * (2300.0 * a.powi(3) + 1900.0 * a * a + 2092.0 * a + 60.0)
        / (100.0 * a.powi(3) + 500.0 * a * a + 4.0 * a + 20.0)
}

fn zdt(x: &[f64], second: impl Fn(f64, f64) -> f64) -> Evaluation {
    let f1 = x[0];
    let g = 1.0 + 9.0 * x[1..].iter().sum::<f64>() / (x.len() - 1).max(1) as f64;
    Evaluation {
        objectives: vec![f1, second(f1, g)],
        constraints: vec![],
    }
}

fn c2_dtlz2(x: &[f64]) -> Evaluation {
    const RADIUS: f64 = 0.2;
    let g: f64 = x[1..].iter().map(|v| (v - 0.5).powi(2)).sum();
    let f = [
        (1.0 + g) * (x[0] * PI / 2.0).cos(),
        (1.0 + g) * (x[0] * PI / 2.0).sin(),
    ];
    let near_axis = (0..2)
        .map(|i| (f[i] - 1.0).powi(2) + f[1 - i].powi(2) - RADIUS * RADIUS)
        .fold(f64::INFINITY, f64::min);
    let centre = 1.0 / 2f64.sqrt();
    let near_centre = f.iter().map(|v| (v - centre).powi(2)).sum::<f64>() - RADIUS * RADIUS;
    Evaluation {
        objectives: f.to_vec(),
        constraints: vec![near_axis.min(near_centre)],
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn known_optima() {
        // Branin's minimum 0.397887 at (π, 2.275) → unit cube (0.5428, 0.1517).
        let b = branin(&[(PI + 5.0) / 15.0, 2.275 / 15.0]);
        assert!((b - 0.397_887).abs() < 1e-5);
        // On ZDT's front g = 1: f2 = 1 − √f1 and 1 − f1².
        let z1 = TestProblem::Zdt1 { d: 4 }.evaluate(&[0.25, 0.0, 0.0, 0.0]);
        assert_eq!(z1.objectives, vec![0.25, 0.5]);
        let z2 = TestProblem::Zdt2 { d: 4 }.evaluate(&[0.5, 0.0, 0.0, 0.0]);
        assert_eq!(z2.objectives, vec![0.5, 0.75]);
        // C2-DTLZ2: the front's middle point is feasible, the same angle far off it is not.
        let c = TestProblem::C2Dtlz2 { d: 4 };
        assert!(c.evaluate(&[0.5, 0.5, 0.5, 0.5]).feasible());
        assert!(!c.evaluate(&[0.5, 0.0, 0.0, 0.0]).feasible());
    }
}

//! ARD Matérn-5/2 kernel. Inputs are divided by their lengthscales once ("scaled"), so every
//! kernel evaluation is a plain Euclidean distance; this is what makes batch prediction cheap.

use nalgebra::DMatrix;

const SQRT5: f64 = 2.236_067_977_499_79;

/// Matérn-5/2 correlation as a function of the scaled distance `r` (1 at r = 0).
#[inline]
pub fn matern52(r: f64) -> f64 {
    let s = SQRT5 * r;
    (1.0 + s + s * s / 3.0) * (-s).exp()
}

/// `-(1/r) d matern52 / dr`, finite at r = 0; the lengthscale gradient is this times `Δ²/l²`.
#[inline]
pub fn matern52_radial_derivative(r: f64) -> f64 {
    let s = SQRT5 * r;
    5.0 / 3.0 * (1.0 + s) * (-s).exp()
}

/// Both of the above for one exponential: what the likelihood gradient needs per pair.
#[inline]
pub fn matern52_with_derivative(r: f64) -> (f64, f64) {
    let s = SQRT5 * r;
    let e = (-s).exp();
    ((1.0 + s + s * s / 3.0) * e, 5.0 / 3.0 * (1.0 + s) * e)
}

/// `eˣ` for `x ≤ 0` without a libm call, so that loops over it vectorise (prediction evaluates
/// the kernel m·n times; glibc's `exp` was a third of that). Cody–Waite reduction to
/// |r| ≤ ln2/2 and a degree-12 Taylor polynomial: relative error ~1e-16; underflows to
/// 2⁻¹⁰²² (not 0) below −708, far past where a correlation matters.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    const ROUNDER: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²: adding it rounds to an integer
    // ln 2 split so that n·LN2_HI is exact for |n| < 2¹¹ (fdlibm's constants).
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const INV_FACTORIALS: [f64; 13] = [
        1.0,
        1.0,
        0.5,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
    ];
    let x = if x < -708.0 { -708.0 } else { x };
    let t = x * std::f64::consts::LOG2_E + ROUNDER;
    let n = t - ROUNDER;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Estrin's scheme: the same polynomial as Horner's rule in a dependency chain of depth 5
    // instead of 12, so evaluations overlap (the kernel loop was latency-bound: 500 × 840
    // cross-covariances took 2.2 instead of 2.7 ms of CPU).
    let c = &INV_FACTORIALS;
    let (r2, r4) = (r * r, r * r * (r * r));
    // The leading 1 is added last, so the small terms are rounded together first.
    let mid = (c[4] + c[5] * r) + (c[6] + c[7] * r) * r2;
    let high = (c[8] + c[9] * r) + (c[10] + c[11] * r) * r2 + c[12] * r4;
    let p = c[0] + (r + (c[2] + c[3] * r) * r2 + (mid + high * r4) * r4);
    // The low mantissa bits of `t` hold n; n + 1023 shifted into the exponent field is 2ⁿ.
    let scale = f64::from_bits(((t.to_bits() as i64).wrapping_add(1023) << 52) as u64);
    p * scale
}

/// ARD Matérn-5/2 with a signal variance; the Gaussian noise lives in the GP, not here.
#[derive(Debug, Clone, PartialEq)]
pub struct Matern52 {
    lengthscales: Vec<f64>,
    variance: f64,
}

impl Matern52 {
    pub fn new(lengthscales: Vec<f64>, variance: f64) -> Self {
        Self {
            lengthscales,
            variance,
        }
    }

    pub fn lengthscales(&self) -> &[f64] {
        &self.lengthscales
    }

    pub fn variance(&self) -> f64 {
        self.variance
    }

    pub fn dim(&self) -> usize {
        self.lengthscales.len()
    }

    /// k(a, b) on unscaled inputs.
    pub fn eval(&self, a: &[f64], b: &[f64]) -> f64 {
        let r2: f64 = a
            .iter()
            .zip(b)
            .zip(&self.lengthscales)
            .map(|((x, y), l)| ((x - y) / l).powi(2))
            .sum();
        self.variance * matern52(r2.sqrt())
    }

    /// Rows of `xs` divided by the lengthscales, as an `m × d` matrix.
    pub fn scale_rows<X: AsRef<[f64]>>(&self, xs: &[X]) -> DMatrix<f64> {
        let d = self.dim();
        DMatrix::from_fn(xs.len(), d, |i, k| xs[i].as_ref()[k] / self.lengthscales[k])
    }

    /// Cross-covariance `K(A, B)` (`m × n`) between already scaled row sets.
    /// Squared distances come from one matrix product (`|a|² + |b|² − 2 a·b`), which runs at
    /// GEMM speed instead of `m·n·d` scalar loops.
    pub fn cross_scaled(&self, a: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
        let a_norms: Vec<f64> = a.row_iter().map(|r| r.norm_squared()).collect();
        let b_norms: Vec<f64> = b.row_iter().map(|r| r.norm_squared()).collect();
        let mut k = a * b.transpose();
        let rows = k.nrows();
        if rows == 0 {
            return k;
        }
        for (column, &bj) in k.as_mut_slice().chunks_exact_mut(rows).zip(&b_norms) {
            for (v, &ai) in column.iter_mut().zip(&a_norms) {
                let r2 = ai + bj - 2.0 * *v;
                let s = SQRT5 * (if r2 > 0.0 { r2 } else { 0.0 }).sqrt();
                *v = self.variance * (1.0 + s + s * s / 3.0) * exp_nonpositive(-s);
            }
        }
        k
    }

    /// Symmetric `K(X, X)` on scaled rows, exact distances (no cancellation on the diagonal).
    pub fn gram_scaled(&self, x: &DMatrix<f64>) -> DMatrix<f64> {
        let n = x.nrows();
        let mut k = DMatrix::zeros(n, n);
        for j in 0..n {
            k[(j, j)] = self.variance;
            for i in (j + 1)..n {
                let r2: f64 = (0..x.ncols())
                    .map(|c| (x[(i, c)] - x[(j, c)]).powi(2))
                    .sum();
                let v = self.variance * matern52(r2.sqrt());
                k[(i, j)] = v;
                k[(j, i)] = v;
            }
        }
        k
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cross_matches_pointwise_eval() {
        let kern = Matern52::new(vec![0.3, 1.7], 2.5);
        let a = [[0.1, 0.9], [0.5, 0.5], [0.0, 0.0]];
        let b = [[0.2, 0.8], [1.0, 0.0]];
        let k = kern.cross_scaled(&kern.scale_rows(&a), &kern.scale_rows(&b));
        for (i, ai) in a.iter().enumerate() {
            for (j, bj) in b.iter().enumerate() {
                assert!((k[(i, j)] - kern.eval(ai, bj)).abs() < 1e-12);
            }
        }
        assert!((kern.eval(&a[0], &a[0]) - 2.5).abs() < 1e-15);
    }

    #[test]
    fn fast_exponential_matches_std() {
        let mut x = 0.0;
        while x > -700.0 {
            let (fast, exact) = (exp_nonpositive(x), x.exp());
            assert!(
                (fast - exact).abs() <= 4e-16 * exact,
                "{x}: {fast} vs {exact}"
            );
            x -= 0.0137;
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(-1e6) < 1e-300);
    }

    #[test]
    fn radial_derivative_matches_finite_difference() {
        for &r in &[0.05, 0.4, 1.3] {
            let h = 1e-6;
            let fd = (matern52(r + h) - matern52(r - h)) / (2.0 * h);
            assert!((-fd / r - matern52_radial_derivative(r)).abs() < 1e-6);
            assert_eq!(
                matern52_with_derivative(r),
                (matern52(r), matern52_radial_derivative(r))
            );
        }
    }
}

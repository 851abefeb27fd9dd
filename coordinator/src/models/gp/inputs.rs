//! What the caller hands the GP besides data: a prior mean function and the input scaling.

use crate::{Error, Result};

/// Prior mean `m(x)`; the GP models the residual `y − m(x)`. It receives the same (normalised)
/// input the GP sees, so a physics model over raw units should wrap a [`Normalizer`].
pub trait MeanFn: Send + Sync {
    fn mean(&self, x: &[f64]) -> f64;
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync> MeanFn for F {
    fn mean(&self, x: &[f64]) -> f64 {
        self(x)
    }
}

/// The plain zero prior mean (the GP still learns a constant offset).
#[derive(Debug, Clone, Copy, Default)]
pub struct ZeroMean;

impl MeanFn for ZeroMean {
    fn mean(&self, _x: &[f64]) -> f64 {
        0.0
    }
}

/// Affine map between a box `[lower, upper]` and the unit cube the GP's bounds assume.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Normalizer {
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl Normalizer {
    pub fn new(lower: Vec<f64>, upper: Vec<f64>) -> Result<Self> {
        if lower.len() != upper.len() || lower.is_empty() {
            return Err(Error::Model(format!(
                "normalizer bounds have lengths {} and {}",
                lower.len(),
                upper.len()
            )));
        }
        if let Some(k) = (0..lower.len())
            .find(|&k| upper[k].partial_cmp(&lower[k]) != Some(std::cmp::Ordering::Greater))
        {
            return Err(Error::Model(format!(
                "normalizer dimension {k}: upper {} not above lower {}",
                upper[k], lower[k]
            )));
        }
        Ok(Self { lower, upper })
    }

    /// Bounds from the data's own range; a constant column gets a unit-wide box around it.
    pub fn from_data<X: AsRef<[f64]>>(xs: &[X]) -> Result<Self> {
        let first = xs
            .first()
            .ok_or_else(|| Error::Model("normalizer from no data".into()))?
            .as_ref();
        let mut lower = first.to_vec();
        let mut upper = first.to_vec();
        for x in xs {
            for (k, &v) in x.as_ref().iter().enumerate().take(lower.len()) {
                lower[k] = lower[k].min(v);
                upper[k] = upper[k].max(v);
            }
        }
        for k in 0..lower.len() {
            if upper[k] <= lower[k] {
                lower[k] -= 0.5;
                upper[k] += 0.5;
            }
        }
        Self::new(lower, upper)
    }

    pub fn dim(&self) -> usize {
        self.lower.len()
    }

    pub fn normalize(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .zip(self.lower.iter().zip(&self.upper))
            .map(|(v, (lo, hi))| (v - lo) / (hi - lo))
            .collect()
    }

    pub fn denormalize(&self, u: &[f64]) -> Vec<f64> {
        u.iter()
            .zip(self.lower.iter().zip(&self.upper))
            .map(|(v, (lo, hi))| lo + v * (hi - lo))
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn normalizer_round_trips_and_rejects_empty_boxes() {
        let n = Normalizer::new(vec![1.0, -2.0], vec![3.0, 2.0]).unwrap();
        assert_eq!(n.normalize(&[2.0, 0.0]), vec![0.5, 0.5]);
        assert_eq!(n.denormalize(&[1.0, 0.0]), vec![3.0, -2.0]);
        assert!(Normalizer::new(vec![1.0], vec![1.0]).is_err());
        let d = Normalizer::from_data(&[[0.0, 5.0], [4.0, 5.0]]).unwrap();
        assert_eq!(d.normalize(&[2.0, 5.0]), vec![0.5, 0.5]);
    }
}

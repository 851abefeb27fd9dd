//! Space-filling designs over a discrete candidate set: an Owen-scrambled Sobol sequence
//! (`sobol_burley`) snapped to the nearest unused candidates.

use crate::{Error, Result};

/// Most points one scrambled sequence supports.
const MAX_POINTS: usize = 1 << 16;

/// `n` points of a seeded scrambled Sobol sequence in `[0, 1)^d`.
pub fn sobol_points(n: usize, d: usize, seed: u32) -> Result<Vec<Vec<f64>>> {
    if n > MAX_POINTS || d > sobol_burley::NUM_DIMENSIONS as usize {
        return Err(Error::Model(format!(
            "Sobol design of {n} points in {d} dimensions exceeds {MAX_POINTS} points or {} dimensions",
            sobol_burley::NUM_DIMENSIONS
        )));
    }
    Ok((0..n as u32)
        .map(|i| {
            (0..d as u32)
                .map(|k| f64::from(sobol_burley::sample(i, k, seed)))
                .collect()
        })
        .collect())
}

/// Indices of `n` distinct candidates (inputs in the unit cube) nearest to the points of a
/// seeded Sobol design, in design order; fewer if the pool is smaller.
pub fn sobol_design_in_pool(pool: &[Vec<f64>], n: usize, seed: u32) -> Result<Vec<usize>> {
    let d = pool.first().map_or(0, Vec::len);
    let n = n.min(pool.len());
    let mut used = vec![false; pool.len()];
    let mut chosen = Vec::with_capacity(n);
    for point in sobol_points(n, d, seed)? {
        if let Some(i) = nearest_unused(pool, &point, &used) {
            used[i] = true;
            chosen.push(i);
        }
    }
    Ok(chosen)
}

/// The candidate nearest to `point` (Euclidean) that is not yet `used`.
pub fn nearest_unused(pool: &[Vec<f64>], point: &[f64], used: &[bool]) -> Option<usize> {
    pool.iter()
        .enumerate()
        .filter(|(i, _)| !used.get(*i).copied().unwrap_or(false))
        .map(|(i, c)| {
            let d2: f64 = c.iter().zip(point).map(|(a, b)| (a - b).powi(2)).sum();
            (i, d2)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sobol_points_stratify_and_depend_on_the_seed() {
        let pts = sobol_points(16, 3, 7).unwrap();
        // A scrambled Sobol net puts exactly one of 16 points in each 1/16 slab per axis.
        for k in 0..3 {
            let mut slabs: Vec<usize> = pts.iter().map(|p| (p[k] * 16.0) as usize).collect();
            slabs.sort_unstable();
            assert_eq!(slabs, (0..16).collect::<Vec<_>>());
        }
        assert_ne!(pts, sobol_points(16, 3, 8).unwrap());
        assert!(sobol_points(10, 100_000, 0).is_err());
    }

    #[test]
    fn design_in_pool_is_distinct() {
        let pool: Vec<Vec<f64>> = (0..5).map(|i| vec![i as f64 / 4.0]).collect();
        let mut idx = sobol_design_in_pool(&pool, 8, 1).unwrap();
        assert_eq!(idx.len(), 5);
        idx.sort_unstable();
        assert_eq!(idx, vec![0, 1, 2, 3, 4]);
    }
}

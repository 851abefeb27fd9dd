//! Pareto dominance and hypervolume, all objectives minimised.

/// `a` is no worse than `b` everywhere and strictly better somewhere.
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    let mut strictly = false;
    for (x, y) in a.iter().zip(b) {
        if x > y {
            return false;
        }
        strictly |= x < y;
    }
    strictly
}

/// Indices of the non-dominated points (duplicates keep their first occurrence).
pub fn pareto_front_indices(points: &[Vec<f64>]) -> Vec<usize> {
    (0..points.len())
        .filter(|&i| {
            !points
                .iter()
                .enumerate()
                .any(|(j, p)| dominates(p, &points[i]) || (j < i && p == &points[i]))
        })
        .collect()
}

pub fn pareto_front(points: &[Vec<f64>]) -> Vec<Vec<f64>> {
    pareto_front_indices(points)
        .into_iter()
        .map(|i| points[i].clone())
        .collect()
}

/// Volume dominated by `points` and bounded above by `reference`. Two objectives use a sort and
/// sweep; more use recursive slicing, fine for the few dozen points a front holds here.
pub fn hypervolume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let inside: Vec<Vec<f64>> = points
        .iter()
        .filter(|p| p.len() == reference.len() && p.iter().zip(reference).all(|(v, r)| v < r))
        .cloned()
        .collect();
    match reference.len() {
        0 => 0.0,
        1 => inside
            .iter()
            .map(|p| reference[0] - p[0])
            .fold(0.0, f64::max),
        2 => hypervolume_2d(inside, reference),
        _ => hypervolume_slicing(inside, reference),
    }
}

fn hypervolume_2d(mut points: Vec<Vec<f64>>, reference: &[f64]) -> f64 {
    points.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
    let mut volume = 0.0;
    let mut ceiling = reference[1];
    for p in &points {
        if p[1] < ceiling {
            volume += (reference[0] - p[0]) * (ceiling - p[1]);
            ceiling = p[1];
        }
    }
    volume
}

fn hypervolume_slicing(mut points: Vec<Vec<f64>>, reference: &[f64]) -> f64 {
    let last = reference.len() - 1;
    points.sort_by(|a, b| a[last].total_cmp(&b[last]));
    let mut volume = 0.0;
    for i in 0..points.len() {
        let top = points.get(i + 1).map_or(reference[last], |p| p[last]);
        let depth = top - points[i][last];
        if depth > 0.0 {
            let slice: Vec<Vec<f64>> = points[..=i].iter().map(|p| p[..last].to_vec()).collect();
            volume += depth * hypervolume(&slice, &reference[..last]);
        }
    }
    volume
}

/// Reference point a margin beyond the worst observed value of each objective, for callers
/// without a natural one (the benchmarks use each problem's fixed reference instead).
pub fn reference_from(points: &[Vec<f64>], margin: f64) -> Option<Vec<f64>> {
    let m = points.first()?.len();
    Some(
        (0..m)
            .map(|k| {
                let hi = points
                    .iter()
                    .map(|p| p[k])
                    .fold(f64::NEG_INFINITY, f64::max);
                let lo = points.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min);
                let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
                hi + margin * span
            })
            .collect(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn two_dimensional_hypervolume_by_hand() {
        // Staircase of (1,3), (2,2), (3,1) under (4,4): 3·1 + 2·1 + 1·1 = 6.
        let front = vec![
            vec![1.0, 3.0],
            vec![2.0, 2.0],
            vec![3.0, 1.0],
            vec![3.5, 3.5],
        ];
        assert!((hypervolume(&front, &[4.0, 4.0]) - 6.0).abs() < 1e-12);
        assert_eq!(hypervolume(&[vec![5.0, 0.0]], &[4.0, 4.0]), 0.0);
        assert_eq!(pareto_front_indices(&front), vec![0, 1, 2]);
    }

    #[test]
    fn slicing_agrees_with_boxes_in_three_dimensions() {
        // Boxes to (2,2,2): [1,2]×[0,2]×[0,2] ∪ [0,2]×[1,2]×[1,2] = 4 + 2 − 1 (overlap [1,2]³).
        let pts = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 1.0]];
        assert!((hypervolume(&pts, &[2.0, 2.0, 2.0]) - 5.0).abs() < 1e-12);
        let flat: Vec<Vec<f64>> = vec![vec![1.0, 3.0, 0.0], vec![3.0, 1.0, 0.0]];
        assert!((hypervolume(&flat, &[4.0, 4.0, 1.0]) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn reference_point_extends_the_worst_values() {
        let r = reference_from(&[vec![0.0, 10.0], vec![1.0, 20.0]], 0.1).unwrap();
        assert!((r[0] - 1.1).abs() < 1e-12 && (r[1] - 21.0).abs() < 1e-12);
    }
}

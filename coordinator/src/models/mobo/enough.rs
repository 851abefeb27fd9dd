//! "Do we know enough to decide?" When the costs of candidates are known (CPU, memory) and only
//! feasibility is uncertain, the decision can go wrong in one way: a candidate we would prefer
//! (not dominated on cost by any candidate we are confident is feasible) is in fact feasible,
//! but we pass it over. This estimates that probability and says whether more evaluations
//! are worth it.

use super::hypervolume::{dominates, pareto_front_indices};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EnoughKnownOptions {
    /// Probability of feasibility at which a candidate counts as confidently feasible.
    pub confident: f64,
    /// Largest acceptable probability of passing over a better feasible candidate.
    pub max_miss_probability: f64,
}

impl Default for EnoughKnownOptions {
    fn default() -> Self {
        Self {
            confident: 0.95,
            max_miss_probability: 0.1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EnoughKnown {
    /// True when no more evaluations are needed for this decision.
    pub enough: bool,
    /// Cost-Pareto front of the confidently feasible candidates: what we would choose among.
    pub confident_front: Vec<usize>,
    /// Not confidently feasible and not cost-dominated by a confident one: the doubtful ones.
    pub doubtful: Vec<usize>,
    /// P(at least one doubtful candidate is feasible), treating them as independent; with
    /// positively correlated feasibility (nearby configurations) the truth is lower, so this errs
    /// towards evaluating more.
    pub miss_probability: f64,
    /// Largest Bernoulli variance `p(1 − p)` among the doubtful candidates.
    pub max_uncertainty: f64,
    /// Sum of `p(1 − p)` over the doubtful candidates.
    pub total_uncertainty: f64,
    /// Doubtful candidates, most uncertain first: what to evaluate next.
    pub most_informative: Vec<usize>,
}

/// `costs[i]` are candidate `i`'s known objective values (minimised), `pof[i]` its probability
/// of feasibility. Pure and deterministic.
pub fn enough_known(costs: &[Vec<f64>], pof: &[f64], options: &EnoughKnownOptions) -> EnoughKnown {
    let confident: Vec<usize> = (0..pof.len().min(costs.len()))
        .filter(|&i| pof[i] >= options.confident)
        .collect();
    let confident_costs: Vec<Vec<f64>> = confident.iter().map(|&i| costs[i].clone()).collect();
    let confident_front: Vec<usize> = pareto_front_indices(&confident_costs)
        .into_iter()
        .map(|k| confident[k])
        .collect();
    let doubtful: Vec<usize> = (0..pof.len().min(costs.len()))
        .filter(|&i| pof[i] < options.confident)
        .filter(|&i| {
            !confident_front
                .iter()
                .any(|&c| dominates(&costs[c], &costs[i]) || costs[c] == costs[i])
        })
        .collect();
    let bernoulli = |i: usize| pof[i] * (1.0 - pof[i]);
    let miss_probability = 1.0 - doubtful.iter().map(|&i| 1.0 - pof[i]).product::<f64>();
    let max_uncertainty = doubtful.iter().map(|&i| bernoulli(i)).fold(0.0, f64::max);
    let total_uncertainty = doubtful.iter().map(|&i| bernoulli(i)).sum();
    let mut most_informative = doubtful.clone();
    most_informative.sort_by(|&a, &b| bernoulli(b).total_cmp(&bernoulli(a)).then(a.cmp(&b)));
    EnoughKnown {
        enough: miss_probability <= options.max_miss_probability,
        confident_front,
        doubtful,
        miss_probability,
        max_uncertainty,
        total_uncertainty,
        most_informative,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn costs() -> Vec<Vec<f64>> {
        // (cpu, memory): 0 cheapest, 3 dominated by 1, 2 trades cpu for memory.
        vec![
            vec![1.0, 1.0],
            vec![2.0, 2.0],
            vec![3.0, 0.5],
            vec![3.0, 3.0],
        ]
    }

    #[test]
    fn confident_cheapest_means_enough() {
        let r = enough_known(
            &costs(),
            &[0.99, 0.5, 0.99, 0.5],
            &EnoughKnownOptions::default(),
        );
        assert!(r.enough);
        assert_eq!(r.confident_front, vec![0, 2]);
        assert!(r.doubtful.is_empty());
        assert_eq!(r.miss_probability, 0.0);
    }

    #[test]
    fn doubtful_cheaper_candidate_asks_for_more() {
        let r = enough_known(
            &costs(),
            &[0.5, 0.99, 0.2, 0.5],
            &EnoughKnownOptions::default(),
        );
        assert!(!r.enough);
        assert_eq!(r.confident_front, vec![1]);
        // 3 is dominated by the confident 1; 0 and 2 are not.
        assert_eq!(r.doubtful, vec![0, 2]);
        assert!((r.miss_probability - (1.0 - 0.5 * 0.8)).abs() < 1e-12);
        assert!((r.max_uncertainty - 0.25).abs() < 1e-12);
        assert_eq!(r.most_informative, vec![0, 2]);
    }

    #[test]
    fn surely_infeasible_everywhere_is_also_known() {
        let r = enough_known(&costs(), &[1e-6; 4], &EnoughKnownOptions::default());
        assert!(r.enough && r.confident_front.is_empty() && r.doubtful.len() == 4);
    }
}

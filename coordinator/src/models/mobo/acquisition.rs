//! Constrained EHVI over a discrete candidate set and greedy batch selection with
//! Kriging-believer fantasies. Pure: candidates' predictions, the observed front and a seed in,
//! chosen indices (with the numbers behind each choice) out.

use super::ehvi::{
    Strips2d, ehvi_monte_carlo, log_probability_below, probability_below, standard_normals,
};
use super::hypervolume::pareto_front;
use crate::models::gp::Posterior;
use crate::{Error, Result};

/// One objective to minimise, per candidate.
#[derive(Debug, Clone)]
pub enum Objective {
    /// Exactly known for every candidate (in Demeter: CPU and memory of a configuration).
    Known(Vec<f64>),
    /// Predicted by a surrogate.
    Modelled(Posterior),
}

impl Objective {
    pub fn len(&self) -> usize {
        match self {
            Self::Known(v) => v.len(),
            Self::Modelled(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn mean(&self, i: usize) -> f64 {
        match self {
            Self::Known(v) => v[i],
            Self::Modelled(p) => p.mean()[i],
        }
    }

    pub fn sd(&self, i: usize) -> f64 {
        match self {
            Self::Known(_) => 0.0,
            Self::Modelled(p) => p.variance()[i].max(0.0).sqrt(),
        }
    }
}

/// A modelled outcome that must satisfy `g(x) ≤ threshold`.
#[derive(Debug, Clone)]
pub struct Constraint {
    pub posterior: Posterior,
    pub threshold: f64,
}

impl Constraint {
    pub fn probability(&self, i: usize) -> f64 {
        let p = &self.posterior;
        probability_below(p.mean()[i], p.variance()[i], self.threshold)
    }
}

/// Probability of feasibility `Π Φ((t − μ)/σ)` of every candidate (constraints independent).
pub fn probability_of_feasibility(constraints: &[Constraint], candidates: usize) -> Vec<f64> {
    (0..candidates)
        .map(|i| constraints.iter().map(|c| c.probability(i)).product())
        .collect()
}

#[derive(Debug, Clone)]
pub struct AcquisitionProblem {
    pub objectives: Vec<Objective>,
    pub constraints: Vec<Constraint>,
    /// Objective vectors of evaluated candidates that were feasible.
    pub feasible_observed: Vec<Vec<f64>>,
    /// Hypervolume reference point, one value per objective (worse than any wanted outcome).
    pub reference: Vec<f64>,
    /// Candidates never to choose (already evaluated, or being evaluated).
    pub excluded: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AcquisitionOptions {
    /// Samples for Monte-Carlo EHVI, used only with more than two objectives.
    pub mc_samples: usize,
    pub seed: u64,
}

impl Default for AcquisitionOptions {
    fn default() -> Self {
        Self {
            mc_samples: 256,
            seed: 0,
        }
    }
}

/// Why a candidate scored what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// EHVI × probability of feasibility.
    ImproveFront,
    /// Nothing feasible known yet: maximise the probability of feasibility.
    FindFeasible,
    /// No candidate is expected to improve the front: reduce the largest uncertainty.
    Explore,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Choice {
    pub index: usize,
    pub mode: Mode,
    /// The value maximised (log-probability in `FindFeasible`).
    pub score: f64,
    pub ehvi: f64,
    pub probability_feasible: f64,
}

/// Scores of every candidate (`None` for excluded ones) and the mode they were computed in.
pub fn score_candidates(
    problem: &AcquisitionProblem,
    options: &AcquisitionOptions,
) -> Result<(Mode, Vec<Option<Choice>>)> {
    let m = validate(problem)?;
    let allowed = allowed_mask(problem, m);
    let pof = probability_of_feasibility(&problem.constraints, m);
    let k = problem.objectives.len();
    let front: Vec<Vec<f64>> = pareto_front(&problem.feasible_observed)
        .into_iter()
        .filter(|p| p.iter().zip(&problem.reference).all(|(v, r)| v < r))
        .collect();
    let mean = |i: usize| -> Vec<f64> { problem.objectives.iter().map(|o| o.mean(i)).collect() };
    let sd = |i: usize| -> Vec<f64> { problem.objectives.iter().map(|o| o.sd(i)).collect() };

    if !problem.constraints.is_empty() && problem.feasible_observed.is_empty() {
        let scores = (0..m)
            .map(|i| {
                allowed[i].then(|| {
                    let log_pof: f64 = problem
                        .constraints
                        .iter()
                        .map(|c| {
                            let p = &c.posterior;
                            log_probability_below(p.mean()[i], p.variance()[i], c.threshold)
                        })
                        .sum();
                    choice(i, Mode::FindFeasible, log_pof, 0.0, pof[i])
                })
            })
            .collect();
        return Ok((Mode::FindFeasible, scores));
    }

    let ehvi: Vec<f64> = if k == 2 {
        let strips = Strips2d::new(&front, &problem.reference);
        (0..m)
            .map(|i| {
                if !allowed[i] {
                    return 0.0;
                }
                let (mu, s) = (mean(i), sd(i));
                strips.ehvi([mu[0], mu[1]], [s[0], s[1]])
            })
            .collect()
    } else {
        let normals = standard_normals(options.mc_samples, k, options.seed);
        (0..m)
            .map(|i| {
                if !allowed[i] {
                    return 0.0;
                }
                ehvi_monte_carlo(&front, &problem.reference, &mean(i), &sd(i), &normals)
            })
            .collect()
    };
    let best = (0..m)
        .filter(|&i| allowed[i])
        .map(|i| ehvi[i] * pof[i])
        .fold(0.0, f64::max);
    if best > 0.0 {
        let scores = (0..m)
            .map(|i| {
                allowed[i].then(|| choice(i, Mode::ImproveFront, ehvi[i] * pof[i], ehvi[i], pof[i]))
            })
            .collect();
        return Ok((Mode::ImproveFront, scores));
    }
    // Every candidate is surely dominated or surely infeasible: learn where it is least certain.
    let span: Vec<f64> = (0..k)
        .map(|o| {
            let lo = front.iter().map(|p| p[o]).fold(f64::INFINITY, f64::min);
            let span = problem.reference[o] - lo;
            if span.is_finite() && span > 0.0 {
                span
            } else {
                1.0
            }
        })
        .collect();
    let scores = (0..m)
        .map(|i| {
            allowed[i].then(|| {
                let doubt: f64 = problem
                    .constraints
                    .iter()
                    .map(|c| {
                        let p = c.probability(i);
                        p * (1.0 - p)
                    })
                    .sum();
                let spread: f64 = sd(i).iter().zip(&span).map(|(s, w)| s / w).sum();
                choice(i, Mode::Explore, doubt + pof[i] * spread, 0.0, pof[i])
            })
        })
        .collect();
    Ok((Mode::Explore, scores))
}

/// Chooses up to `q` distinct candidates greedily: after each pick, every modelled objective
/// and constraint is conditioned on its predicted mean at the pick (Kriging believer), and the
/// pick joins the front if its predicted constraints hold. Fewer than `q` come back only when
/// fewer candidates are allowed.
pub fn select_batch(
    mut problem: AcquisitionProblem,
    q: usize,
    options: &AcquisitionOptions,
) -> Result<Vec<Choice>> {
    let mut chosen = Vec::with_capacity(q);
    for step in 0..q {
        let step_options = AcquisitionOptions {
            seed: options.seed.wrapping_add(step as u64),
            ..options.clone()
        };
        let (_, scores) = score_candidates(&problem, &step_options)?;
        let Some(best) = scores
            .into_iter()
            .flatten()
            .filter(|c| !c.score.is_nan())
            .reduce(|a, b| if b.score > a.score { b } else { a })
        else {
            break;
        };
        let j = best.index;
        chosen.push(best);
        if step + 1 == q {
            break;
        }
        let fantasy: Vec<f64> = problem.objectives.iter().map(|o| o.mean(j)).collect();
        if problem
            .constraints
            .iter()
            .all(|c| c.posterior.mean()[j] <= c.threshold)
        {
            problem.feasible_observed.push(fantasy);
        }
        for o in &mut problem.objectives {
            if let Objective::Modelled(p) = o {
                p.condition_on_mean(j);
            }
        }
        for c in &mut problem.constraints {
            c.posterior.condition_on_mean(j);
        }
        problem.excluded.push(j);
    }
    Ok(chosen)
}

fn choice(index: usize, mode: Mode, score: f64, ehvi: f64, probability_feasible: f64) -> Choice {
    Choice {
        index,
        mode,
        score,
        ehvi,
        probability_feasible,
    }
}

/// Number of candidates, after checking every input describes the same candidates.
fn validate(problem: &AcquisitionProblem) -> Result<usize> {
    let k = problem.objectives.len();
    let m = problem.objectives.first().map_or(0, Objective::len);
    if k == 0 || problem.reference.len() != k {
        return Err(Error::Model(format!(
            "{k} objectives but a {}-dimensional reference point",
            problem.reference.len()
        )));
    }
    let lengths_agree = problem.objectives.iter().all(|o| o.len() == m)
        && problem.constraints.iter().all(|c| c.posterior.len() == m)
        && problem.feasible_observed.iter().all(|p| p.len() == k);
    if !lengths_agree {
        return Err(Error::Model(
            "objectives, constraints and observations disagree in size".into(),
        ));
    }
    Ok(m)
}

fn allowed_mask(problem: &AcquisitionProblem, m: usize) -> Vec<bool> {
    let mut allowed = vec![true; m];
    for &i in &problem.excluded {
        if let Some(a) = allowed.get_mut(i) {
            *a = false;
        }
    }
    allowed
}

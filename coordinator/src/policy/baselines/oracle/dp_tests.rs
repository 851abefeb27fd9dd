//! The DP against hand-checked answers and against brute force over every schedule.
#![allow(clippy::unwrap_used)]

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

/// A problem given by tables.
struct Table {
    initial: usize,
    allowed: Vec<Vec<usize>>,
    /// hold[epoch][config]
    hold: Vec<Vec<Hold>>,
    /// change[epoch][from][to]
    change: Vec<Vec<Vec<Option<Move>>>>,
}

impl Problem for Table {
    fn epochs(&self) -> usize {
        self.hold.len()
    }
    fn configs(&self) -> usize {
        self.hold[0].len()
    }
    fn initial(&self) -> usize {
        self.initial
    }
    fn allowed(&self, epoch: usize) -> &[usize] {
        &self.allowed[epoch]
    }
    fn hold(&self, epoch: usize, config: usize) -> Hold {
        self.hold[epoch][config]
    }
    fn change(&self, epoch: usize, from: usize, to: usize) -> Option<Move> {
        self.change[epoch][from][to]
    }
}

fn hold(cost: f64, violates: bool) -> Hold {
    Hold { cost, violates }
}

/// Two configurations: 0 is big (10 per epoch, always fine), 1 is small (4 per epoch) but
/// violates the QoS in the middle epoch. A change costs 2 and disrupts 1 s.
fn big_and_small() -> Table {
    let mv = Some(Move {
        cost: 2.0,
        disruption_s: 1.0,
        violates: false,
    });
    Table {
        initial: 0,
        allowed: vec![vec![0, 1]; 3],
        hold: vec![
            vec![hold(10.0, false), hold(4.0, false)],
            vec![hold(10.0, false), hold(4.0, true)],
            vec![hold(10.0, false), hold(4.0, false)],
        ],
        change: vec![vec![vec![mv; 2]; 2]; 3],
    }
}

#[test]
fn hand_checked_optimum_per_change_budget() {
    let p = big_and_small();
    // No change: 30. One or two: big, big, small = 10 + 10 + 2 + 4 = 26.
    // Three: small, big, small = 2 + 4 + 2 + 10 + 2 + 4 = 24. Small in epoch 1 is never taken.
    let expect = [
        (0, vec![0, 0, 0], 30.0),
        (1, vec![0, 0, 1], 26.0),
        (2, vec![0, 0, 1], 26.0),
        (3, vec![1, 0, 1], 24.0),
    ];
    for (budget, configs, cost) in expect {
        let plan = solve(&p, budget, 0.0);
        assert_eq!(plan.configs, configs, "budget {budget}");
        assert_eq!(plan.cost, cost);
        assert_eq!(plan.violations, 0);
        assert!(plan.changes.len() <= budget as usize);
    }
    // Pricing disruption at 2 per second makes the third change not worth it (24 + 6 > 26 + 2).
    assert_eq!(solve(&p, 3, 2.0).configs, vec![0, 0, 1]);
    // A disruption budget of 2 s does the same: λ is searched until the plan fits.
    let plan = solve_within(&p, 3, 2.0);
    assert_eq!(plan.configs, vec![0, 0, 1]);
    assert_eq!(plan.disruption_s, 1.0);
    assert!(plan.lambda >= 1.0);
    // …and a generous one leaves the free optimum alone.
    assert_eq!(solve_within(&p, 3, 3.0).configs, vec![1, 0, 1]);
}

#[test]
fn a_violation_is_taken_only_when_nothing_else_is_possible() {
    let mut p = big_and_small();
    // Big cannot be reached after the start: the small one must hold through epoch 1.
    p.initial = 1;
    for e in 0..3 {
        p.change[e][1][0] = None;
    }
    let plan = solve(&p, 3, 0.0);
    assert_eq!(plan.configs, vec![1, 1, 1]);
    assert_eq!(plan.violations, 1);
}

/// Every schedule of `problem` with at most `max_changes`, by brute force: the best
/// (violations, cost + λ · disruption), and the cheapest within a disruption budget.
fn brute_force(problem: &Table, max_changes: u32, lambda: f64, budget_s: f64) -> (Plan, Plan) {
    let n = problem.epochs();
    let mut best: Option<Plan> = None;
    let mut best_within: Option<Plan> = None;
    let mut index = vec![0usize; n];
    let key = |p: &Plan| (p.violations, p.cost + lambda * p.disruption_s);
    loop {
        let configs: Vec<usize> = (0..n).map(|e| problem.allowed[e][index[e]]).collect();
        let plan = evaluate(problem, configs, lambda);
        if plan.changes.len() <= max_changes as usize && plan.cost.is_finite() {
            if best.as_ref().is_none_or(|b| key(&plan) < key(b)) {
                best = Some(plan.clone());
            }
            let fits = plan.disruption_s <= budget_s;
            if fits
                && best_within
                    .as_ref()
                    .is_none_or(|b| (plan.violations, plan.cost) < (b.violations, b.cost))
            {
                best_within = Some(plan);
            }
        }
        // Next schedule (odometer).
        let mut e = 0;
        loop {
            if e == n {
                return (best.unwrap(), best_within.unwrap());
            }
            index[e] += 1;
            if index[e] < problem.allowed[e].len() {
                break;
            }
            index[e] = 0;
            e += 1;
        }
    }
}

fn random_table(rng: &mut StdRng) -> Table {
    let n = rng.random_range(1..=5);
    let m = rng.random_range(1..=4);
    let initial = rng.random_range(0..m);
    let allowed = (0..n)
        .map(|_| {
            // The initial configuration is always allowed (staying put is always possible).
            (0..m)
                .filter(|c| *c == initial || rng.random_bool(0.7))
                .collect()
        })
        .collect();
    let hold = (0..n)
        .map(|_| {
            (0..m)
                .map(|_| hold(rng.random_range(1.0..10.0), rng.random_bool(0.2)))
                .collect()
        })
        .collect();
    let change = (0..n)
        .map(|_| {
            (0..m)
                .map(|_| {
                    (0..m)
                        .map(|_| {
                            rng.random_bool(0.85).then(|| Move {
                                cost: rng.random_range(-2.0..5.0),
                                disruption_s: rng.random_range(0.0..3.0),
                                violates: rng.random_bool(0.1),
                            })
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Table {
        initial,
        allowed,
        hold,
        change,
    }
}

#[test]
fn the_dp_agrees_with_brute_force_on_random_instances() {
    let mut rng = StdRng::seed_from_u64(5);
    for case in 0..400 {
        let p = random_table(&mut rng);
        let max_changes = rng.random_range(0..=4);
        let lambda = [0.0, 0.7, 3.0][case % 3];
        let budget_s = rng.random_range(0.0..6.0);
        let (best, best_within) = brute_force(&p, max_changes, lambda, budget_s);
        let plan = solve(&p, max_changes, lambda);
        assert!(plan.changes.len() <= max_changes as usize, "case {case}");
        assert_eq!(
            plan.violations, best.violations,
            "case {case}: {plan:?} vs {best:?}"
        );
        let value = |p: &Plan| p.cost + lambda * p.disruption_s;
        assert!(
            (value(&plan) - value(&best)).abs() < 1e-9,
            "case {case}: {plan:?} vs {best:?}"
        );

        // Within a disruption budget: never over it when some schedule fits without extra
        // violations, optimal for the λ it found, and never cheaper than the true optimum.
        let within = solve_within(&p, max_changes, budget_s);
        assert!(within.changes.len() <= max_changes as usize);
        if within.violations == best_within.violations {
            assert!(within.disruption_s <= budget_s + 1e-12, "case {case}");
            assert!(within.cost >= best_within.cost - 1e-9, "case {case}");
            let (at_lambda, _) = brute_force(&p, max_changes, within.lambda, budget_s);
            let priced = |p: &Plan| p.cost + within.lambda * p.disruption_s;
            assert!(
                (priced(&within) - priced(&at_lambda)).abs() < 1e-6,
                "case {case}"
            );
        }
    }
}

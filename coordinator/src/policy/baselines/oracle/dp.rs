//! The oracle's offline optimum: dynamic programming over decision epochs × configurations ×
//! changes used. Abstract over [`Problem`] so a tiny hand-made instance can be checked against
//! brute force; `instance.rs` builds the real one from the twin's truth and future rates.
//!
//! The value of a schedule is lexicographic: first the number of QoS violations (epochs held,
//! or changes made, in a configuration that does not meet the QoS at that time's rate) — zero
//! whenever the instance allows it — then its cost plus `λ ·` the seconds its changes disrupt.
//! [`solve_within`] searches λ so that the disruption stays within a budget (a Lagrangian
//! relaxation of "at most this many seconds over the latency QoS in changes").

/// Holding a configuration through one epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    pub cost: f64,
    /// The configuration does not meet the QoS at the epoch's rate.
    pub violates: bool,
}

/// Changing configuration at the boundary that starts an epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Move {
    /// What the change costs beyond holding the old configuration before the boundary and the
    /// new one after it (both allocations during the change, an early start).
    pub cost: f64,
    /// Seconds the change disrupts (downtime + catch-up: over the latency QoS).
    pub disruption_s: f64,
    /// The new configuration does not meet the QoS at the rate during the transition.
    pub violates: bool,
}

/// A scheduling instance: configurations are indices `0..configs`.
pub trait Problem {
    fn epochs(&self) -> usize;
    fn configs(&self) -> usize;
    /// The configuration running before the first epoch.
    fn initial(&self) -> usize;
    /// The configurations worth considering in `epoch` (ascending, no duplicates).
    fn allowed(&self, epoch: usize) -> &[usize];
    fn hold(&self, epoch: usize, config: usize) -> Hold;
    /// Changing `from` → `to` at the boundary that starts `epoch` (0: at the very start);
    /// None: impossible (e.g. the new configuration could never catch up).
    fn change(&self, epoch: usize, from: usize, to: usize) -> Option<Move>;
    /// Whether any change may enter `config` at the start of `epoch` (false: `change` is None
    /// for every source; lets the solver skip them).
    fn may_enter(&self, _epoch: usize, _config: usize) -> bool {
        true
    }
    /// Every possible change into `to` at the start of `epoch` from one of `sources` (the
    /// configurations allowed just before), built in `scratch` — or served from a table by
    /// an implementation that precomputes them.
    fn moves_into<'s>(
        &'s self,
        epoch: usize,
        to: usize,
        sources: &[usize],
        scratch: &'s mut Vec<(usize, Move)>,
    ) -> &'s [(usize, Move)] {
        collect_moves(self, epoch, to, sources, scratch)
    }
}

/// Every possible change into `to` from `sources`, asked one by one, built in `scratch`.
pub fn collect_moves<'s, P: Problem + ?Sized>(
    problem: &P,
    epoch: usize,
    to: usize,
    sources: &[usize],
    scratch: &'s mut Vec<(usize, Move)>,
) -> &'s [(usize, Move)] {
    scratch.clear();
    for &from in sources {
        if from != to
            && let Some(mv) = problem.change(epoch, from, to)
        {
            scratch.push((from, mv));
        }
    }
    scratch
}

/// An optimal schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The configuration of every epoch.
    pub configs: Vec<usize>,
    /// Epochs at whose start the configuration changes.
    pub changes: Vec<usize>,
    /// Holding and change costs (without the disruption price).
    pub cost: f64,
    pub disruption_s: f64,
    pub violations: u32,
    /// The disruption price the plan was optimal for.
    pub lambda: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Value {
    violations: u32,
    cost: f64,
}

impl Value {
    /// Worse than anything reachable, and stays so when added to (no overflow).
    const UNREACHED: Value = Value {
        violations: u32::MAX / 2,
        cost: f64::INFINITY,
    };

    fn reached(self) -> bool {
        self.violations < u32::MAX / 2
    }

    fn better_than(self, other: Value) -> bool {
        self.violations < other.violations
            || (self.violations == other.violations && self.cost < other.cost)
    }
}

/// Where a state came from: the previous epoch's configuration (`u32::MAX`: unreached).
const NOWHERE: u32 = u32::MAX;

/// The schedule minimising (violations, cost + λ · disruption) with at most `max_changes`.
pub fn solve<P: Problem + ?Sized>(problem: &P, max_changes: u32, lambda: f64) -> Plan {
    let (n, m) = (problem.epochs(), problem.configs());
    let initial = problem.initial();
    if n == 0 {
        return evaluate(problem, Vec::new(), lambda);
    }
    let budget = max_changes as usize + 1;
    let width = budget * m;
    // Changes used vary fastest: the inner loop over them reads contiguous memory.
    let at = |k: usize, c: usize| c * budget + k;
    // value[at(k, c)]: the best way to end the current epoch in c having made k changes;
    // back[e * width + at(k, c)]: the configuration of epoch e − 1 on it (NOWHERE before 0).
    let mut value = vec![Value::UNREACHED; width];
    let mut next = vec![Value::UNREACHED; width];
    let mut back = vec![NOWHERE; n * width];
    let mut best = vec![(Value::UNREACHED, NOWHERE); budget];
    let mut scratch = Vec::new();
    let add = |v: Value, cost: f64, violates: bool| Value {
        violations: v.violations + u32::from(violates),
        cost: v.cost + cost,
    };
    // Before epoch 0: the initial configuration, no change made.
    value[at(0, initial)] = Value {
        violations: 0,
        cost: 0.0,
    };
    let mut previous: &[usize] = std::slice::from_ref(&initial);
    for e in 0..n {
        next.fill(Value::UNREACHED);
        let allowed = problem.allowed(e);
        for &c in allowed {
            let hold = problem.hold(e, c);
            let stays = e > 0 || c == initial;
            for (k, slot) in best.iter_mut().enumerate() {
                let v = value[at(k, c)];
                *slot = if stays && v.reached() {
                    (v, c as u32)
                } else {
                    (Value::UNREACHED, NOWHERE)
                };
            }
            let moves: &[(usize, Move)] = if budget > 1 && problem.may_enter(e, c) {
                problem.moves_into(e, c, previous, &mut scratch)
            } else {
                &[]
            };
            for &(p, mv) in moves {
                let price = mv.cost + lambda * mv.disruption_s;
                let before = &value[at(0, p)..at(0, p) + budget - 1];
                for (slot, &v) in best[1..].iter_mut().zip(before) {
                    // Unreached states stay worse than any reached one (see UNREACHED).
                    let candidate = add(v, price, mv.violates);
                    if candidate.better_than(slot.0) {
                        *slot = (candidate, p as u32);
                    }
                }
            }
            for (k, &(v, p)) in best.iter().enumerate() {
                if p != NOWHERE {
                    next[at(k, c)] = add(v, hold.cost, hold.violates);
                    back[e * width + at(k, c)] = p;
                }
            }
        }
        std::mem::swap(&mut value, &mut next);
        previous = allowed;
    }
    // The best final state over every number of changes (fewer changes win ties).
    let mut end: Option<(usize, usize)> = None;
    for k in 0..budget {
        for c in 0..m {
            let v = value[at(k, c)];
            if v.reached() && end.is_none_or(|(bk, bc)| v.better_than(value[at(bk, bc)])) {
                end = Some((k, c));
            }
        }
    }
    let Some((mut k, mut c)) = end else {
        // Unreachable with the initial configuration always allowed; stay put to be safe.
        return evaluate(problem, vec![initial; n], lambda);
    };
    let mut configs = vec![0; n];
    for e in (0..n).rev() {
        configs[e] = c;
        let p = back[e * width + at(k, c)] as usize;
        if p != c {
            k = k.saturating_sub(1);
        }
        c = p;
    }
    evaluate(problem, configs, lambda)
}

/// The totals of a schedule (`configs`: one per epoch).
pub fn evaluate<P: Problem + ?Sized>(problem: &P, configs: Vec<usize>, lambda: f64) -> Plan {
    let mut plan = Plan {
        configs: Vec::new(),
        changes: Vec::new(),
        cost: 0.0,
        disruption_s: 0.0,
        violations: 0,
        lambda,
    };
    let mut current = problem.initial();
    for (e, &c) in configs.iter().enumerate() {
        if c != current {
            match problem.change(e, current, c) {
                Some(mv) => {
                    plan.cost += mv.cost;
                    plan.disruption_s += mv.disruption_s;
                    plan.violations += u32::from(mv.violates);
                }
                None => {
                    plan.cost = f64::INFINITY;
                }
            }
            plan.changes.push(e);
        }
        let hold = problem.hold(e, c);
        plan.cost += hold.cost;
        plan.violations += u32::from(hold.violates);
        current = c;
    }
    plan.configs = configs;
    plan
}

/// The cheapest schedule with at most `max_changes` whose changes disrupt at most
/// `max_disruption_s` seconds in total: the smallest disruption price λ (searched by doubling,
/// then bisection) whose optimum fits the budget. When even forced moves exceed the budget
/// (an instance where staying put violates the QoS), the plan with the largest λ tried.
pub fn solve_within<P: Problem + ?Sized>(
    problem: &P,
    max_changes: u32,
    max_disruption_s: f64,
) -> Plan {
    let free = solve(problem, max_changes, 0.0);
    if free.disruption_s <= max_disruption_s {
        return free;
    }
    let (mut low, mut high) = (0.0, 1.0);
    let mut fits = solve(problem, max_changes, high);
    while fits.disruption_s > max_disruption_s && high < MAX_LAMBDA {
        low = high;
        high *= 4.0;
        fits = solve(problem, max_changes, high);
    }
    for _ in 0..BISECTIONS {
        let middle = 0.5 * (low + high);
        let plan = solve(problem, max_changes, middle);
        if plan.disruption_s <= max_disruption_s {
            high = middle;
            fits = plan;
        } else {
            low = middle;
        }
    }
    fits
}

/// λ beyond which a second of disruption outweighs any saving: costs are in seconds of the
/// static configuration, so an 18-hour run saves at most ~65,000 of them.
const MAX_LAMBDA: f64 = 1e7;
/// Bisection steps after the doubling: λ to within 2^-10 of its bracket.
const BISECTIONS: usize = 10;

#[cfg(test)]
#[path = "dp_tests.rs"]
mod tests;

//! Orders are idempotent by id: the book remembers recent results so a resent order is
//! answered, not executed again, and which orders are still executing, so a copy that arrives
//! meanwhile waits for the first one's result instead of running twice. Sans-IO.

use std::collections::{HashMap, HashSet, VecDeque};

use demeter_common::protocol::{Order, OrderOutcome, OrderResult};

#[derive(Debug)]
pub struct OrderBook {
    capacity: usize,
    results: HashMap<u64, OrderOutcome>,
    order: VecDeque<u64>,
    running: HashSet<u64>,
}

/// What to do with an arriving order.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    Execute,
    /// Seen before: answer with this result.
    Replay(OrderResult),
    Expired(OrderResult),
    /// The same id is executing now: wait for it, then admit again (which replays).
    InProgress,
}

impl OrderBook {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            results: HashMap::new(),
            order: VecDeque::new(),
            running: HashSet::new(),
        }
    }

    /// Decides what to do; an order admitted for execution counts as running until
    /// [`OrderBook::complete`].
    pub fn admit(&mut self, order: &Order, now_ms: u64) -> Admission {
        if let Some(outcome) = self.results.get(&order.id) {
            return Admission::Replay(OrderResult {
                order_id: order.id,
                outcome: outcome.clone(),
            });
        }
        if now_ms > order.deadline_ms {
            return Admission::Expired(OrderResult {
                order_id: order.id,
                outcome: OrderOutcome::Expired,
            });
        }
        if !self.running.insert(order.id) {
            return Admission::InProgress;
        }
        Admission::Execute
    }

    pub fn complete(&mut self, result: &OrderResult) {
        self.running.remove(&result.order_id);
        if self
            .results
            .insert(result.order_id, result.outcome.clone())
            .is_none()
        {
            self.order.push_back(result.order_id);
        }
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.results.remove(&old);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use demeter_common::protocol::OrderKind;

    #[test]
    fn repeated_ids_replay_and_old_results_are_forgotten() {
        let mut book = OrderBook::new(2);
        let order = |id| Order {
            id,
            deadline_ms: 100,
            kind: OrderKind::Ping,
        };
        assert_eq!(book.admit(&order(1), 50), Admission::Execute);
        book.complete(&OrderResult {
            order_id: 1,
            outcome: OrderOutcome::Done,
        });
        assert!(matches!(book.admit(&order(1), 500), Admission::Replay(_)));
        assert!(matches!(book.admit(&order(2), 500), Admission::Expired(_)));
        book.complete(&OrderResult {
            order_id: 2,
            outcome: OrderOutcome::Done,
        });
        book.complete(&OrderResult {
            order_id: 3,
            outcome: OrderOutcome::Done,
        });
        assert_eq!(book.admit(&order(1), 50), Admission::Execute);
    }

    #[test]
    fn a_copy_of_a_running_order_waits_then_replays() {
        let mut book = OrderBook::new(4);
        let order = Order {
            id: 7,
            deadline_ms: 100,
            kind: OrderKind::ListTaskManagers,
        };
        assert_eq!(book.admit(&order, 1), Admission::Execute);
        assert_eq!(book.admit(&order, 2), Admission::InProgress);
        book.complete(&OrderResult {
            order_id: 7,
            outcome: OrderOutcome::Done,
        });
        assert!(matches!(book.admit(&order, 3), Admission::Replay(_)));
    }
}

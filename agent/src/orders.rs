//! Orders are idempotent by id: the book remembers recent results so a resent order is
//! answered, not executed again. Sans-IO.

use std::collections::{HashMap, VecDeque};

use demeter_common::protocol::{Order, OrderOutcome, OrderResult};

#[derive(Debug)]
pub struct OrderBook {
    capacity: usize,
    results: HashMap<u64, OrderOutcome>,
    order: VecDeque<u64>,
}

/// What to do with an arriving order.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    Execute,
    /// Seen before: answer with this result.
    Replay(OrderResult),
    Expired(OrderResult),
}

impl OrderBook {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            results: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn admit(&self, order: &Order, now_ms: u64) -> Admission {
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
        Admission::Execute
    }

    pub fn complete(&mut self, result: &OrderResult) {
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
}

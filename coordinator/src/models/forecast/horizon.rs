//! Scoring forecasts of "the maximum over the next K buckets" once that window has passed: the
//! bank of level models and the conformal calibrator both learn from these realised errors, so
//! they are judged on exactly the quantity the decision uses.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
struct Pending<P> {
    origin: u64,
    prediction: P,
    realised: f64,
    seen: u64,
}

/// Predictions (any payload `P`, e.g. one per model) waiting for their window to pass.
#[derive(Debug, Clone)]
pub struct HorizonMaxTracker<P> {
    horizon: u64,
    pending: VecDeque<Pending<P>>,
}

impl<P> HorizonMaxTracker<P> {
    /// `horizon`: window length in buckets (at least 1).
    pub fn new(horizon: u64) -> Self {
        let horizon = horizon.max(1);
        Self {
            horizon,
            pending: VecDeque::with_capacity(horizon as usize + 1),
        }
    }

    /// Records a prediction made after bucket `origin` closed, for the window
    /// `(origin, origin + horizon]`.
    pub fn predict(&mut self, origin: u64, prediction: P) {
        self.pending.push_back(Pending {
            origin,
            prediction,
            realised: f64::NEG_INFINITY,
            seen: 0,
        });
    }

    /// Feeds the value of bucket `index` and reports every window that is now complete, with
    /// the maximum that really happened. Windows with more than half of their buckets missing
    /// (gaps) are dropped unscored: their maximum is unknown.
    pub fn observe(&mut self, index: u64, value: f64, mut on_outcome: impl FnMut(&P, f64)) {
        for p in self.pending.iter_mut() {
            if index > p.origin && index <= p.origin + self.horizon {
                p.realised = p.realised.max(value);
                p.seen += 1;
            }
        }
        while let Some(front) = self.pending.front() {
            if front.origin + self.horizon > index {
                break;
            }
            if front.seen * 2 >= self.horizon {
                on_outcome(&front.prediction, front.realised);
            }
            self.pending.pop_front();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn collect(tracker: &mut HorizonMaxTracker<f64>, index: u64, value: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        tracker.observe(index, value, |p, realised| out.push((*p, realised)));
        out
    }

    #[test]
    fn reports_the_max_of_the_window_after_it_closes() {
        let mut t = HorizonMaxTracker::new(3);
        t.predict(10, 5.0);
        assert!(collect(&mut t, 11, 4.0).is_empty());
        assert!(collect(&mut t, 12, 9.0).is_empty());
        let out = collect(&mut t, 13, 1.0);
        assert_eq!(out, vec![(5.0, 9.0)]);
    }

    #[test]
    fn windows_mostly_lost_in_a_gap_are_not_scored() {
        let mut t = HorizonMaxTracker::new(4);
        t.predict(0, 1.0);
        t.predict(1, 1.0);
        assert!(collect(&mut t, 1, 2.0).is_empty());
        // Buckets 2..=9 are missing: window (0,4] saw one bucket, (1,5] none.
        assert!(collect(&mut t, 10, 3.0).is_empty());
    }
}

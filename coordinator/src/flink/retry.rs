//! Retry policy for Flink REST calls: pure, so its schedule is testable without waiting.
//!
//! Only idempotent calls are retried (GETs, `PUT resource-requirements`, `PATCH cancel`). A POST
//! that triggers a savepoint, stops a job, runs or uploads a jar is sent exactly once: if its
//! response is lost we cannot know whether Flink acted, and a second stop or run could stop a job
//! twice or start a duplicate. Callers that must recover from such a loss look at the job state.

use std::time::Duration;

use rand::{Rng, RngExt};

use crate::FlinkErrorKind;

/// Whether repeating a request can change the outcome; decides if it may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    Idempotent,
    SendOnce,
}

/// Exponential backoff with "equal jitter": half the step is fixed, half random, so retries from
/// several callers spread out but never collapse to zero delay.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total tries including the first; 1 disables retries.
    pub max_attempts: u32,
    /// Delay step before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Upper bound for one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(3),
        }
    }
}

impl RetryPolicy {
    /// The delay before the next try after `failed_attempts` failed tries (1-based), or `None`
    /// when the budget is spent.
    pub fn next_delay<R: Rng + ?Sized>(
        &self,
        failed_attempts: u32,
        rng: &mut R,
    ) -> Option<Duration> {
        if failed_attempts == 0 || failed_attempts >= self.max_attempts {
            return None;
        }
        let doublings = (failed_attempts - 1).min(30);
        let step = self
            .base_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        let half = step / 2;
        let jitter_nanos = rng.random_range(0..=half.as_nanos().min(u128::from(u64::MAX)) as u64);
        Some(half + Duration::from_nanos(jitter_nanos))
    }

    /// Whether a failure of this kind is worth another try: transport trouble and server-side
    /// errors are often transient; 4xx, bad JSON and Flink-reported failures are not.
    pub fn is_retryable(kind: &FlinkErrorKind) -> bool {
        match kind {
            FlinkErrorKind::Timeout { .. } | FlinkErrorKind::Connect { .. } => true,
            FlinkErrorKind::Status { code, .. } => *code >= 500 || *code == 429,
            _ => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
        }
    }

    #[test]
    fn delays_double_within_equal_jitter_bounds_and_cap() {
        let mut rng = StdRng::seed_from_u64(7);
        let steps = [100u64, 200, 300, 300];
        for (i, step) in steps.iter().enumerate() {
            for _ in 0..200 {
                let d = policy()
                    .next_delay(i as u32 + 1, &mut rng)
                    .expect("within budget");
                assert!(
                    d >= Duration::from_millis(step / 2),
                    "{d:?} below half of {step}"
                );
                assert!(d <= Duration::from_millis(*step), "{d:?} above {step}");
            }
        }
    }

    #[test]
    fn budget_counts_the_first_attempt() {
        let mut rng = StdRng::seed_from_u64(1);
        assert!(policy().next_delay(4, &mut rng).is_some());
        assert_eq!(policy().next_delay(5, &mut rng), None);
        let once = RetryPolicy {
            max_attempts: 1,
            ..policy()
        };
        assert_eq!(once.next_delay(1, &mut rng), None);
    }

    #[test]
    fn jitter_spreads_delays() {
        let mut rng = StdRng::seed_from_u64(3);
        let delays: std::collections::BTreeSet<_> = (0..20)
            .filter_map(|_| policy().next_delay(2, &mut rng))
            .collect();
        assert!(
            delays.len() > 10,
            "jitter produced only {} distinct delays",
            delays.len()
        );
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let mut rng = StdRng::seed_from_u64(0);
        let p = RetryPolicy {
            max_attempts: u32::MAX,
            ..policy()
        };
        let d = p.next_delay(u32::MAX - 1, &mut rng).expect("within budget");
        assert!(d <= p.max_delay);
    }

    #[test]
    fn only_transient_failures_are_retryable() {
        let status = |code| FlinkErrorKind::Status {
            code,
            body: String::new(),
        };
        assert!(RetryPolicy::is_retryable(&FlinkErrorKind::Timeout {
            after: Duration::from_secs(1)
        }));
        assert!(RetryPolicy::is_retryable(&FlinkErrorKind::Connect {
            message: "reset".into()
        }));
        assert!(RetryPolicy::is_retryable(&status(503)));
        assert!(RetryPolicy::is_retryable(&status(500)));
        assert!(!RetryPolicy::is_retryable(&status(404)));
        assert!(!RetryPolicy::is_retryable(&status(400)));
        assert!(!RetryPolicy::is_retryable(&FlinkErrorKind::Decode {
            message: "eof".into()
        }));
    }
}

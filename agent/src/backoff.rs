//! Reconnect delays: exponential with full jitter, so a restarted coordinator is not hit by
//! every agent in the same millisecond. Pure: the caller supplies the random draw.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Delay before attempt `attempt` (0-based) given a uniform draw `unit` in [0, 1):
    /// uniformly between half the exponential ceiling and the ceiling ("equal jitter").
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let ceiling = self
            .initial
            .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX))
            .min(self.max);
        let half = ceiling / 2;
        half + half.mul_f64(unit.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_and_jitters_within_bounds() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        };
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay(0, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 1.0), Duration::from_millis(800));
        assert_eq!(b.delay(30, 1.0), Duration::from_secs(10));
        assert!(b.delay(30, 0.0) >= Duration::from_secs(5));
    }
}

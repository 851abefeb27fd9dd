//! The profiling budget: a token bucket of CPU core-seconds. It fills at the allowed average
//! (a share of the safe default's cores) up to a burst, starts full — the first batches are the
//! most valuable — and a batch is charged its copies' cores × the run length when ordered.
//! The same bucket counts reconfiguration tokens (`Budget::tokens`).

#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    rate_cores: f64,
    capacity: f64,
    tokens: f64,
    last_s: Option<f64>,
    spent: f64,
}

impl Budget {
    pub fn new(rate_cores: f64, burst_h: f64) -> Self {
        let capacity = rate_cores * burst_h * 3_600.0;
        Budget {
            rate_cores,
            capacity,
            tokens: capacity,
            last_s: None,
            spent: 0.0,
        }
    }

    /// A bucket of `capacity` tokens (not core-seconds) refilled at `per_second`.
    pub fn tokens(per_second: f64, capacity: f64) -> Self {
        Budget {
            rate_cores: per_second,
            capacity,
            tokens: capacity,
            last_s: None,
            spent: 0.0,
        }
    }

    fn refill(&mut self, now_s: f64) {
        if let Some(last) = self.last_s {
            let dt = (now_s - last).max(0.0);
            self.tokens = (self.tokens + dt * self.rate_cores).min(self.capacity);
        }
        self.last_s = Some(now_s);
    }

    /// Core-seconds available now.
    pub fn available(&mut self, now_s: f64) -> f64 {
        self.refill(now_s);
        self.tokens
    }

    pub fn charge(&mut self, now_s: f64, core_seconds: f64) {
        self.refill(now_s);
        self.tokens -= core_seconds;
        self.spent += core_seconds;
    }

    /// Core-seconds charged so far.
    pub fn spent(&self) -> f64 {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::Budget;

    #[test]
    fn starts_full_refills_at_the_rate_and_caps_at_the_burst() {
        let mut b = Budget::new(2.0, 1.0);
        assert_eq!(b.available(0.0), 7_200.0);
        b.charge(0.0, 7_000.0);
        assert_eq!(b.available(100.0), 400.0);
        assert_eq!(b.available(100_000.0), 7_200.0);
        assert_eq!(b.spent(), 7_000.0);
    }
}

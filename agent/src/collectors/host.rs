//! Host CPU, memory, swap and load through sysinfo.
//!
//! Only CPU times and `/proc/meminfo` are refreshed; sysinfo's process table is never filled
//! (that would read every process each tick).

use demeter_common::metrics::HostSample;
use sysinfo::{MemoryRefreshKind, System};

use crate::error::Result;

/// The raw numbers sysinfo gives, before conversion to the reported units.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostReading {
    pub cpu_count: usize,
    /// All CPUs' busy share since the previous refresh, in percent (sysinfo's unit), 0..=100.
    pub cpu_usage_percent: f32,
    pub mem_total_bytes: u64,
    pub mem_used_bytes: u64,
    pub mem_available_bytes: u64,
    pub swap_used_bytes: u64,
    /// 1, 5 and 15-minute load averages; `None` if `/proc/loadavg` was unreadable.
    pub load: Option<[f64; 3]>,
}

/// Converts a reading to what the agent reports. A NaN or out-of-range CPU share (sysinfo
/// divides by the elapsed jiffies, which can be 0) is clamped to 0..=1.
pub fn host_sample(reading: &HostReading) -> HostSample {
    let busy = reading.cpu_usage_percent / 100.0;
    let [load_1m, load_5m, load_15m] = reading.load.unwrap_or_default().map(|l| l as f32);
    HostSample {
        cpu_count: u32::try_from(reading.cpu_count).unwrap_or(u32::MAX),
        cpu_busy: if busy.is_nan() {
            0.0
        } else {
            busy.clamp(0.0, 1.0)
        },
        mem_total_bytes: reading.mem_total_bytes,
        mem_used_bytes: reading.mem_used_bytes,
        mem_available_bytes: reading.mem_available_bytes,
        swap_used_bytes: reading.swap_used_bytes,
        load_1m,
        load_5m,
        load_15m,
    }
}

/// Owns the sysinfo state that CPU deltas need between ticks.
#[derive(Debug)]
pub struct HostCollector {
    system: System,
}

impl HostCollector {
    /// Takes the first CPU reading, so the first [`HostCollector::read`] already reports the
    /// busy share since construction (sysinfo's first sample is always 0).
    pub fn new() -> Result<Self> {
        let mut system = System::new()?;
        system.refresh_cpu_usage();
        Ok(Self { system })
    }

    /// sysinfo skips the CPU refresh if the previous one is under 200 ms old
    /// (`MINIMUM_CPU_UPDATE_INTERVAL`) and then repeats the previous share.
    pub fn read(&mut self) -> HostReading {
        self.system.refresh_cpu_usage();
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram().with_swap());
        let load = System::load_average()
            .inspect_err(|e| tracing::debug!(error = %e, "load average unreadable"))
            .ok()
            .map(|l| [l.one, l.five, l.fifteen]);
        HostReading {
            cpu_count: self.system.cpus().len(),
            cpu_usage_percent: self.system.global_cpu_usage(),
            mem_total_bytes: self.system.total_memory(),
            mem_used_bytes: self.system.used_memory(),
            mem_available_bytes: self.system.available_memory(),
            swap_used_bytes: self.system.used_swap(),
            load,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn converts_units_and_clamps() {
        let reading = HostReading {
            cpu_count: 8,
            cpu_usage_percent: 25.0,
            mem_total_bytes: 16 << 30,
            mem_used_bytes: 4 << 30,
            mem_available_bytes: 12 << 30,
            swap_used_bytes: 0,
            load: Some([1.5, 1.0, 0.5]),
        };
        let s = host_sample(&reading);
        assert_eq!(s.cpu_count, 8);
        assert_eq!(s.cpu_busy, 0.25);
        assert_eq!(s.mem_available_bytes, 12 << 30);
        assert_eq!((s.load_1m, s.load_5m, s.load_15m), (1.5, 1.0, 0.5));
        for (percent, busy) in [(f32::NAN, 0.0), (-3.0, 0.0), (100.5, 1.0)] {
            let r = HostReading {
                cpu_usage_percent: percent,
                ..reading
            };
            assert_eq!(host_sample(&r).cpu_busy, busy);
        }
        let no_load = host_sample(&HostReading {
            load: None,
            ..reading
        });
        assert_eq!(no_load.load_1m, 0.0);
    }

    #[test]
    fn reads_this_host() {
        let mut host = HostCollector::new().unwrap();
        let r = host.read();
        assert!(r.cpu_count >= 1);
        assert!(r.mem_total_bytes > 0 && r.mem_available_bytes <= r.mem_total_bytes);
    }
}

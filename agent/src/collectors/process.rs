//! Per-process CPU and RSS from `/proc/<pid>/stat`, `statm` and `status`.
//!
//! Parsers take file contents; [`cpu_cores`] takes the previous reading and the current one, so
//! nothing here reads a clock.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Kernel constants needed to turn /proc numbers into seconds and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcUnits {
    /// `sysconf(_SC_CLK_TCK)`: unit of utime/stime/starttime in `stat`.
    pub ticks_per_second: u64,
    /// `sysconf(_SC_PAGESIZE)`: unit of `statm`.
    pub page_size: u64,
}

impl ProcUnits {
    /// This machine's values (from the ELF auxiliary vector, no syscall, no `unsafe`).
    pub fn of_this_host() -> Self {
        Self {
            ticks_per_second: rustix::param::clock_ticks_per_second(),
            page_size: u64::try_from(rustix::param::page_size()).unwrap_or(4096),
        }
    }
}

/// CPU time used so far, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatCpu {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, in clock ticks; a different value under the same pid means the
    /// pid was reused and the previous reading must not be subtracted.
    pub start_ticks: u64,
}

/// One CPU reading and when it was taken (agent clock, ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuReading {
    pub stat: StatCpu,
    pub at_ms: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may contain spaces and parentheses, so
/// fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<StatCpu> {
    let bad = |reason| Error::ProcFormat {
        file: "stat",
        reason,
    };
    let after_comm = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or(bad("no ')' after the command name"))?;
    // After ')' comes field 3 (state), so stat(5)'s field N is the (N - 3)th; `nth` consumes.
    let mut fields = after_comm.split_ascii_whitespace();
    let mut skip_then_number = |skip: usize| -> Result<u64> {
        fields
            .nth(skip)
            .ok_or(bad("too few fields"))?
            .parse()
            .map_err(|_| bad("non-numeric field"))
    };
    let utime = skip_then_number(14 - 3)?;
    let stime = skip_then_number(0)?;
    let start_ticks = skip_then_number(22 - 15 - 1)?;
    Ok(StatCpu {
        cpu_ticks: utime.saturating_add(stime),
        start_ticks,
    })
}

/// Parses `/proc/<pid>/statm` and returns the resident set size in pages (second field).
pub fn parse_statm_rss_pages(text: &str) -> Result<u64> {
    text.split_ascii_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .ok_or(Error::ProcFormat {
            file: "statm",
            reason: "no numeric resident field",
        })
}

/// What the hsperfdata lookup needs from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStatus {
    /// Effective uid: the JVM names its `hsperfdata_<user>` directory after it.
    pub euid: u32,
    /// The pid inside the process's innermost pid namespace (last `NSpid:` field): the JVM
    /// names its hsperfdata file with it. `None` on kernels without `NSpid` (< 4.1).
    pub nspid: Option<u32>,
}

pub fn parse_status(text: &str) -> Result<ProcStatus> {
    let mut euid = None;
    let mut nspid = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Uid:") {
            euid = rest
                .split_ascii_whitespace()
                .nth(1)
                .and_then(|f| f.parse().ok());
        } else if let Some(rest) = line.strip_prefix("NSpid:") {
            nspid = rest
                .split_ascii_whitespace()
                .last()
                .and_then(|f| f.parse().ok());
        }
    }
    Ok(ProcStatus {
        euid: euid.ok_or(Error::ProcFormat {
            file: "status",
            reason: "no effective uid in the Uid: line",
        })?,
        nspid,
    })
}

/// Cores busy between two readings (1.0 = one core). 0 when there is no usable previous
/// reading: the first one, a reused pid, or a clock that did not move forward.
pub fn cpu_cores(prev: Option<&CpuReading>, now: &CpuReading, units: ProcUnits) -> f32 {
    let Some(prev) = prev else { return 0.0 };
    if prev.stat.start_ticks != now.stat.start_ticks || now.at_ms <= prev.at_ms {
        return 0.0;
    }
    let ticks = now.stat.cpu_ticks.saturating_sub(prev.stat.cpu_ticks);
    let busy_s = ticks as f64 / units.ticks_per_second.max(1) as f64;
    let elapsed_s = (now.at_ms - prev.at_ms) as f64 / 1000.0;
    (busy_s / elapsed_s) as f32
}

/// Reads a small text file into a reused buffer (the sampler reads a few per tick).
pub(crate) fn read_text(path: &Path, buf: &mut String) -> Result<()> {
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(buf))
        .map(|_| ())
        .map_err(|e| Error::io(path, e))
}

/// Reads a binary file into a reused buffer.
pub(crate) fn read_bytes(path: &Path, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .map(|_| ())
        .map_err(|e| Error::io(path, e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const UNITS: ProcUnits = ProcUnits {
        ticks_per_second: 100,
        page_size: 4096,
    };

    fn reading(cpu_ticks: u64, start_ticks: u64, at_ms: u64) -> CpuReading {
        CpuReading {
            stat: StatCpu {
                cpu_ticks,
                start_ticks,
            },
            at_ms,
        }
    }

    #[test]
    fn cores_from_tick_deltas() {
        let a = reading(1_000, 5, 10_000);
        let b = reading(1_150, 5, 11_000);
        assert!((cpu_cores(Some(&a), &b, UNITS) - 1.5).abs() < 1e-6);
        assert_eq!(cpu_cores(None, &b, UNITS), 0.0);
        // Reused pid: a different start time.
        assert_eq!(cpu_cores(Some(&a), &reading(1_150, 6, 11_000), UNITS), 0.0);
        // Clock stepped back.
        assert_eq!(cpu_cores(Some(&b), &reading(1_200, 5, 10_500), UNITS), 0.0);
    }

    #[test]
    fn stat_with_hostile_command_name() {
        let line = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 999 1 2 3\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.cpu_ticks, 10);
        assert_eq!(s.start_ticks, 999);
        assert!(parse_stat("42 (x) S 1 2").is_err());
        assert!(parse_stat("no paren").is_err());
    }

    #[test]
    fn statm_and_status() {
        assert_eq!(parse_statm_rss_pages("100 25 3 1 0 40 0\n").unwrap(), 25);
        assert!(parse_statm_rss_pages("100").is_err());
        let s =
            parse_status("Name:\tjava\nUid:\t1000\t1001\t1000\t1000\nNSpid:\t4242\t17\n").unwrap();
        assert_eq!(s.euid, 1001);
        assert_eq!(s.nspid, Some(17));
        assert!(parse_status("Name:\tjava\n").is_err());
    }
}

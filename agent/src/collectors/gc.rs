//! `jstat -gc` columns read from hsperf counters, and their summary as a [`HeapSample`].
//!
//! The counter names are those of JDK 17's `jstat_options` (module `jdk.jcmd`): generation 0 is
//! young with spaces 0 = eden, 1 = survivor 0, 2 = survivor 1; generation 1 space 0 is old;
//! collectors 0, 1, 2 are young, full and concurrent (G1's remark/cleanup pauses). Times are in
//! ticks of `sun.os.hrt.frequency`.

use demeter_common::metrics::HeapSample;

use super::hsperf::{PerfData, Value};
use crate::error::{Error, Result};

/// The counters `jstat -gc` prints, in bytes and ticks rather than KiB and seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcCounters {
    /// S0C
    pub survivor0_capacity: u64,
    /// S1C
    pub survivor1_capacity: u64,
    /// S0U
    pub survivor0_used: u64,
    /// S1U
    pub survivor1_used: u64,
    /// EC
    pub eden_capacity: u64,
    /// EU
    pub eden_used: u64,
    /// OC
    pub old_capacity: u64,
    /// OU
    pub old_used: u64,
    /// MC
    pub metaspace_capacity: u64,
    /// MU
    pub metaspace_used: u64,
    /// CCSC; `None` without compressed class pointers (jstat prints `-`).
    pub compressed_class_capacity: Option<u64>,
    /// CCSU
    pub compressed_class_used: Option<u64>,
    /// Young generation's maximum size (`jstat -gccapacity` NGCMX).
    pub young_max: u64,
    /// Old generation's maximum size (OGCMX).
    pub old_max: u64,
    /// YGC
    pub young_gc_count: u64,
    pub young_gc_ticks: u64,
    /// FGC
    pub full_gc_count: u64,
    pub full_gc_ticks: u64,
    /// CGC; `None` for collectors without a concurrent phase (Serial, Parallel).
    pub concurrent_gc_count: Option<u64>,
    pub concurrent_gc_ticks: Option<u64>,
    /// Ticks per second of the `*_ticks` fields.
    pub hrt_frequency: u64,
}

/// Counter names, indexed by [`Slot`].
const NAMES: [&str; 21] = [
    "sun.gc.generation.0.space.1.capacity",
    "sun.gc.generation.0.space.2.capacity",
    "sun.gc.generation.0.space.1.used",
    "sun.gc.generation.0.space.2.used",
    "sun.gc.generation.0.space.0.capacity",
    "sun.gc.generation.0.space.0.used",
    "sun.gc.generation.1.space.0.capacity",
    "sun.gc.generation.1.space.0.used",
    "sun.gc.metaspace.capacity",
    "sun.gc.metaspace.used",
    "sun.gc.compressedclassspace.capacity",
    "sun.gc.compressedclassspace.used",
    "sun.gc.generation.0.maxCapacity",
    "sun.gc.generation.1.maxCapacity",
    "sun.gc.collector.0.invocations",
    "sun.gc.collector.0.time",
    "sun.gc.collector.1.invocations",
    "sun.gc.collector.1.time",
    "sun.gc.collector.2.invocations",
    "sun.gc.collector.2.time",
    "sun.os.hrt.frequency",
];

/// Positions in [`NAMES`].
#[derive(Debug, Clone, Copy)]
enum Slot {
    Survivor0Capacity,
    Survivor1Capacity,
    Survivor0Used,
    Survivor1Used,
    EdenCapacity,
    EdenUsed,
    OldCapacity,
    OldUsed,
    MetaspaceCapacity,
    MetaspaceUsed,
    CompressedClassCapacity,
    CompressedClassUsed,
    YoungMax,
    OldMax,
    YoungGcCount,
    YoungGcTicks,
    FullGcCount,
    FullGcTicks,
    ConcurrentGcCount,
    ConcurrentGcTicks,
    HrtFrequency,
}

impl GcCounters {
    /// Reads the counters from a whole hsperfdata file.
    pub fn parse(file: &[u8]) -> Result<Self> {
        Self::from_perf_data(&PerfData::parse(file)?)
    }

    pub fn from_perf_data(data: &PerfData<'_>) -> Result<Self> {
        let mut slots: [Option<u64>; NAMES.len()] = [None; NAMES.len()];
        for entry in data.entries() {
            let entry = entry?;
            if !entry.name.starts_with(b"sun.") {
                continue;
            }
            if let (Value::Long(v), Some(i)) = (
                entry.value,
                NAMES.iter().position(|n| n.as_bytes() == entry.name),
            ) {
                // Counters never go negative; a negative one can only be a torn or corrupt file.
                let v = u64::try_from(v).map_err(|_| Error::Hsperf {
                    offset: 0,
                    reason: "negative GC counter",
                })?;
                slots[i] = Some(v);
            }
        }
        let required = |s: Slot| slots[s as usize].ok_or(Error::MissingCounter(NAMES[s as usize]));
        let optional = |s: Slot| slots[s as usize];
        let counters = Self {
            survivor0_capacity: required(Slot::Survivor0Capacity)?,
            survivor1_capacity: required(Slot::Survivor1Capacity)?,
            survivor0_used: required(Slot::Survivor0Used)?,
            survivor1_used: required(Slot::Survivor1Used)?,
            eden_capacity: required(Slot::EdenCapacity)?,
            eden_used: required(Slot::EdenUsed)?,
            old_capacity: required(Slot::OldCapacity)?,
            old_used: required(Slot::OldUsed)?,
            metaspace_capacity: required(Slot::MetaspaceCapacity)?,
            metaspace_used: required(Slot::MetaspaceUsed)?,
            compressed_class_capacity: optional(Slot::CompressedClassCapacity),
            compressed_class_used: optional(Slot::CompressedClassUsed),
            young_max: required(Slot::YoungMax)?,
            old_max: required(Slot::OldMax)?,
            young_gc_count: required(Slot::YoungGcCount)?,
            young_gc_ticks: required(Slot::YoungGcTicks)?,
            full_gc_count: required(Slot::FullGcCount)?,
            full_gc_ticks: required(Slot::FullGcTicks)?,
            concurrent_gc_count: optional(Slot::ConcurrentGcCount),
            concurrent_gc_ticks: optional(Slot::ConcurrentGcTicks),
            hrt_frequency: required(Slot::HrtFrequency)?,
        };
        if counters.hrt_frequency == 0 {
            return Err(Error::Hsperf {
                offset: 0,
                reason: "sun.os.hrt.frequency is 0",
            });
        }
        Ok(counters)
    }

    /// Converts high-resolution ticks to milliseconds.
    pub fn ticks_to_ms(&self, ticks: u64) -> f64 {
        ticks as f64 * 1000.0 / self.hrt_frequency as f64
    }

    /// GCT: all collectors' time, as jstat sums it (a missing concurrent collector counts 0).
    pub fn total_gc_ticks(&self) -> u64 {
        self.young_gc_ticks
            .saturating_add(self.full_gc_ticks)
            .saturating_add(self.concurrent_gc_ticks.unwrap_or(0))
    }

    /// The summary the agent reports; young = eden + both survivors, as `jstat -gc` adds them.
    pub fn heap_sample(&self) -> HeapSample {
        HeapSample {
            young_used_bytes: self
                .eden_used
                .saturating_add(self.survivor0_used)
                .saturating_add(self.survivor1_used),
            young_committed_bytes: self
                .eden_capacity
                .saturating_add(self.survivor0_capacity)
                .saturating_add(self.survivor1_capacity),
            young_max_bytes: self.young_max,
            old_used_bytes: self.old_used,
            old_committed_bytes: self.old_capacity,
            old_max_bytes: self.old_max,
            metaspace_used_bytes: self.metaspace_used,
            metaspace_committed_bytes: self.metaspace_capacity,
            young_gc_count: self.young_gc_count,
            young_gc_time_ms: self.ticks_to_ms(self.young_gc_ticks),
            full_gc_count: self.full_gc_count,
            full_gc_time_ms: self.ticks_to_ms(self.full_gc_ticks),
            concurrent_gc_count: self.concurrent_gc_count.unwrap_or(0),
            concurrent_gc_time_ms: self.ticks_to_ms(self.concurrent_gc_ticks.unwrap_or(0)),
        }
    }
}

//! Observations of a job: one row per (configuration, input rate) measurement, and their CSV form.
//!
//! # CSV schema
//!
//! Comma-separated, a header row naming the columns (any order), `#` starts a comment line.
//! An empty cell means "not measured" and is only allowed in the optional columns.
//!
//! | column                  | unit        | required | meaning                                             |
//! |-------------------------|-------------|----------|-----------------------------------------------------|
//! | `parallelism`           | tasks       | yes      | job parallelism                                     |
//! | `slots_per_tm`          | slots       | yes      | task slots per TaskManager                          |
//! | `tm_memory_mb`          | MB          | yes      | TaskManager process memory                          |
//! | `tm_cpu_cores`          | cores       | yes      | CPU per TaskManager (may be fractional)             |
//! | `checkpoint_interval_s` | s           | yes      | checkpoint interval                                 |
//! | `rate`                  | events/s    | yes      | input rate offered to the job's sources             |
//! | `busy_fraction`         | 0..1        | no       | busy time of the bottleneck operator (busyTimeMsPerSecond / 1000) |
//! | `latency_p95_ms`        | ms          | yes      | p95 end-to-end latency over the measurement window  |
//! | `recovery_s`            | s           | no       | time from an injected failure until caught up       |
//! | `cpu_cores`             | cores       | yes      | CPU actually used, summed over TaskManagers         |
//! | `memory_mb`             | MB          | yes      | memory actually used (RSS), summed over TaskManagers |
//!
//! Errors name the line (1-based, header is line 1) and the column. `docs/observations.md`
//! carries the same table for people who do not read Rust.

use serde::{Deserialize, Serialize};

use super::space::JobConfig;
use crate::{Error, Result};

/// Busy fractions outside this band do not yield a capacity: near 0 the ratio rate/busy is
/// noise over noise, near 1 the job is backpressured and the offered rate exceeds what it
/// processed, so rate/busy would overstate capacity.
pub const CAPACITY_BUSY_BAND: (f64, f64) = (0.05, 0.95);

/// One measurement of a job running `config` at input rate `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub config: JobConfig,
    pub rate: f64,
    pub busy_fraction: Option<f64>,
    pub latency_p95_ms: f64,
    pub recovery_s: Option<f64>,
    pub cpu_cores: f64,
    pub memory_mb: f64,
}

impl Observation {
    /// The job's true processing rate (DS2 / Flink autoscaler): events it could take per
    /// second if busy all the time. Available at any load within [`CAPACITY_BUSY_BAND`].
    pub fn capacity_estimate(&self) -> Option<f64> {
        let busy = self.busy_fraction?;
        let (lo, hi) = CAPACITY_BUSY_BAND;
        (busy >= lo && busy <= hi && self.rate > 0.0).then(|| self.rate / busy)
    }

    /// Saturated (busy above [`CAPACITY_BUSY_BAND`]): the job could not take more than the
    /// offered rate, so its capacity is at most `rate`. An upper bound, not a measurement.
    pub fn capacity_bound(&self) -> Option<f64> {
        let busy = self.busy_fraction?;
        (busy > CAPACITY_BUSY_BAND.1 && self.rate > 0.0).then_some(self.rate)
    }
}

/// The CSV row exactly as written; field names are the column names.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    parallelism: u32,
    slots_per_tm: u32,
    tm_memory_mb: u32,
    tm_cpu_cores: f64,
    checkpoint_interval_s: u32,
    rate: f64,
    busy_fraction: Option<f64>,
    latency_p95_ms: f64,
    recovery_s: Option<f64>,
    cpu_cores: f64,
    memory_mb: f64,
}

impl Row {
    fn into_observation(self) -> std::result::Result<Observation, String> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a positive number, got {v}"))
            }
        };
        let non_negative = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a non-negative number, got {v}"))
            }
        };
        for (name, v) in [
            ("parallelism", self.parallelism),
            ("slots_per_tm", self.slots_per_tm),
            ("tm_memory_mb", self.tm_memory_mb),
            ("checkpoint_interval_s", self.checkpoint_interval_s),
        ] {
            if v == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        positive("tm_cpu_cores", self.tm_cpu_cores)?;
        non_negative("rate", self.rate)?;
        positive("latency_p95_ms", self.latency_p95_ms)?;
        non_negative("cpu_cores", self.cpu_cores)?;
        non_negative("memory_mb", self.memory_mb)?;
        if let Some(busy) = self.busy_fraction
            && !(0.0..=1.0).contains(&busy)
        {
            return Err(format!("busy_fraction must lie in [0, 1], got {busy}"));
        }
        if let Some(recovery) = self.recovery_s {
            positive("recovery_s", recovery)?;
        }
        Ok(Observation {
            config: JobConfig {
                parallelism: self.parallelism,
                slots_per_tm: self.slots_per_tm,
                tm_memory_mb: self.tm_memory_mb,
                tm_cpu_millis: (self.tm_cpu_cores * 1000.0).round() as u32,
                checkpoint_interval_s: self.checkpoint_interval_s,
            },
            rate: self.rate,
            busy_fraction: self.busy_fraction,
            latency_p95_ms: self.latency_p95_ms,
            recovery_s: self.recovery_s,
            cpu_cores: self.cpu_cores,
            memory_mb: self.memory_mb,
        })
    }

    fn from_observation(o: &Observation) -> Self {
        Row {
            parallelism: o.config.parallelism,
            slots_per_tm: o.config.slots_per_tm,
            tm_memory_mb: o.config.tm_memory_mb,
            tm_cpu_cores: o.config.tm_cpu_cores(),
            checkpoint_interval_s: o.config.checkpoint_interval_s,
            rate: o.rate,
            busy_fraction: o.busy_fraction,
            latency_p95_ms: o.latency_p95_ms,
            recovery_s: o.recovery_s,
            cpu_cores: o.cpu_cores,
            memory_mb: o.memory_mb,
        }
    }
}

/// Parses observations CSV text. `source` names the input in error messages (a path, usually).
pub fn parse_csv(text: &str, source: &str) -> Result<Vec<Observation>> {
    let invalid = |message: String| Error::InvalidFile {
        path: source.into(),
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| invalid(describe_csv_error(&e)))?
        .clone();
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| invalid(describe_csv_error(&e)))?;
        let line = record.position().map_or(0, csv::Position::line);
        let row: Row = record
            .deserialize(Some(&headers))
            .map_err(|e| invalid(format!("line {line}: {}", describe_csv_error(&e))))?;
        let observation = row
            .into_observation()
            .map_err(|message| invalid(format!("line {line}: {message}")))?;
        out.push(observation);
    }
    if out.is_empty() {
        return Err(invalid("no observations (only a header, or empty)".into()));
    }
    Ok(out)
}

fn describe_csv_error(error: &csv::Error) -> String {
    let line = error.position().map(csv::Position::line);
    let what = match error.kind() {
        csv::ErrorKind::Deserialize { err, .. } => match err.field() {
            Some(field) => format!("column {}: {}", field + 1, err.kind()),
            None => err.kind().to_string(),
        },
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields, the header has {expected_len}"),
        _ => error.to_string(),
    };
    match line {
        Some(line) => format!("line {line}: {what}"),
        None => what,
    }
}

/// Writes observations as CSV with the schema above (what `parse_csv` reads back).
pub fn to_csv(observations: &[Observation]) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for o in observations {
        writer
            .serialize(Row::from_observation(o))
            .map_err(|e| Error::Model(format!("writing observations: {e}")))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| Error::Model(format!("writing observations: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Error::Model(format!("writing observations: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const HEADER: &str = "parallelism,slots_per_tm,tm_memory_mb,tm_cpu_cores,checkpoint_interval_s,rate,busy_fraction,latency_p95_ms,recovery_s,cpu_cores,memory_mb";

    #[test]
    fn parses_rows_with_optional_cells_and_comments() {
        let text = format!(
            "# profiling run 1\n{HEADER}\n12,2,2048,1.5,30,20000,0.5,180,95,7.1,9000\n8,1,1024,1,10,5000,,90,,4,6000\n"
        );
        let rows = parse_csv(&text, "t.csv").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].config.to_string(),
            "p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s"
        );
        assert_eq!(rows[0].capacity_estimate(), Some(40_000.0));
        assert_eq!(rows[1].busy_fraction, None);
        assert_eq!(rows[1].recovery_s, None);
        assert_eq!(rows[1].capacity_estimate(), None);
        assert_eq!(parse_csv(&to_csv(&rows).unwrap(), "again").unwrap(), rows);
    }

    #[test]
    fn errors_name_the_line() {
        let bad_value = format!(
            "{HEADER}\n12,2,2048,1.5,30,20000,0.5,180,95,7.1,9000\n8,1,1024,1,10,5000,1.5,90,,4,6000\n"
        );
        let message = parse_csv(&bad_value, "t.csv").unwrap_err().to_string();
        assert!(
            message.contains("line 3") && message.contains("busy_fraction"),
            "{message}"
        );

        let bad_number = format!("{HEADER}\n12,2,2048,1.5,30,fast,0.5,180,95,7.1,9000\n");
        let message = parse_csv(&bad_number, "t.csv").unwrap_err().to_string();
        assert!(
            message.contains("line 2") && message.contains("column 6"),
            "{message}"
        );

        let short = format!("{HEADER}\n12,2,2048\n");
        let message = parse_csv(&short, "t.csv").unwrap_err().to_string();
        assert!(message.contains("line 2"), "{message}");

        let missing_latency = format!("{HEADER}\n12,2,2048,1.5,30,20000,0.5,,95,7.1,9000\n");
        assert!(parse_csv(&missing_latency, "t.csv").is_err());
        assert!(parse_csv(HEADER, "t.csv").is_err());
    }

    #[test]
    fn saturated_rows_bound_capacity_and_idle_rows_give_nothing() {
        let mut o = parse_csv(
            &format!("{HEADER}\n12,2,2048,1.5,30,20000,0.99,180,95,7.1,9000\n"),
            "t.csv",
        )
        .unwrap()[0];
        assert_eq!(o.capacity_estimate(), None);
        assert_eq!(o.capacity_bound(), Some(20_000.0));
        o.busy_fraction = Some(0.01);
        assert_eq!(o.capacity_estimate(), None);
        assert_eq!(o.capacity_bound(), None);
        o.busy_fraction = Some(0.5);
        assert_eq!(o.capacity_bound(), None, "a measurement is not a bound");
    }
}

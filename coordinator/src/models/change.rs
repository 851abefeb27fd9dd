//! [`JobConfig`] as text (`p=2,slots=2,mem=1g,cpu=1,ckpt=5s`) and partial configurations: what
//! an apply changes, and the configuration it asks for over the current one.

use std::str::FromStr;

pub use demeter_common::protocol::jobs::ConfigChange;

use super::space::JobConfig;
use crate::{Error, Result};

impl FromStr for JobConfig {
    type Err = Error;

    /// Parses `p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s` (any order; `mem` accepts `m`/`g`
    /// suffixes or plain MB, `ckpt` an optional `s`).
    fn from_str(text: &str) -> Result<Self> {
        let change = parse_change(text)?;
        let bad = |message: String| Error::Model(format!("configuration {text:?}: {message}"));
        let missing = |name: &str| bad(format!("missing {name}"));
        let config = JobConfig {
            parallelism: change.parallelism.ok_or_else(|| missing("p"))?,
            slots_per_tm: change.slots.ok_or_else(|| missing("slots"))?,
            tm_memory_mb: change.tm_memory_mb.ok_or_else(|| missing("mem"))?,
            tm_cpu_millis: change.tm_cpu_millis.ok_or_else(|| missing("cpu"))?,
            checkpoint_interval_s: change
                .checkpoint_interval_s
                .ok_or_else(|| missing("ckpt"))?,
        };
        Ok(config)
    }
}

/// Parses some of `p=…,slots=…,mem=…,cpu=…,ckpt=…` (the [`JobConfig`] syntax): what an
/// apply changes. Every given value must be positive.
pub fn parse_change(text: &str) -> Result<ConfigChange> {
    let bad = |message: String| Error::Model(format!("configuration {text:?}: {message}"));
    let mut change = ConfigChange::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| bad(format!("{part:?} is not key=value")))?;
        let value = value.trim();
        let (field, parsed) = match key.trim() {
            "p" | "parallelism" => (&mut change.parallelism, parse_u32(value)),
            "slots" => (&mut change.slots, parse_u32(value)),
            "mem" | "memory" => (&mut change.tm_memory_mb, parse_memory_mb(value)),
            "cpu" => (&mut change.tm_cpu_millis, parse_cpu_millis(value)),
            "ckpt" | "checkpoint" => (
                &mut change.checkpoint_interval_s,
                parse_u32(value.strip_suffix('s').unwrap_or(value)),
            ),
            other => return Err(bad(format!("unknown key {other:?}"))),
        };
        let parsed = parsed.ok_or_else(|| bad(format!("bad value in {part:?}")))?;
        if parsed == 0 {
            return Err(bad("every value must be positive".into()));
        }
        *field = Some(parsed);
    }
    Ok(change)
}

/// `change` over `current`: the configuration an apply asks for. Without a current one (a
/// first deployment) every value must be given.
pub fn apply_change(change: &ConfigChange, current: Option<&JobConfig>) -> Result<JobConfig> {
    let pick = |given: Option<u32>, now: Option<u32>, name: &str| {
        given
            .or(now)
            .ok_or_else(|| Error::Model(format!("{name} is needed: the job does not run yet")))
    };
    Ok(JobConfig {
        parallelism: pick(
            change.parallelism,
            current.map(|c| c.parallelism),
            "parallelism",
        )?,
        slots_per_tm: pick(change.slots, current.map(|c| c.slots_per_tm), "slots")?,
        tm_memory_mb: pick(
            change.tm_memory_mb,
            current.map(|c| c.tm_memory_mb),
            "tm-memory",
        )?,
        tm_cpu_millis: pick(
            change.tm_cpu_millis,
            current.map(|c| c.tm_cpu_millis),
            "tm-cpu",
        )?,
        checkpoint_interval_s: pick(
            change.checkpoint_interval_s,
            current.map(|c| c.checkpoint_interval_s),
            "checkpoint-interval",
        )?,
    })
}

fn parse_u32(text: &str) -> Option<u32> {
    text.parse().ok()
}

fn parse_memory_mb(text: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    if let Some(gb) = lower.strip_suffix('g') {
        let gb: f64 = gb.parse().ok()?;
        return to_u32(gb * 1024.0);
    }
    parse_u32(lower.strip_suffix('m').unwrap_or(&lower))
}

fn parse_cpu_millis(text: &str) -> Option<u32> {
    let cores: f64 = text.parse().ok()?;
    to_u32(cores * 1000.0)
}

pub(crate) fn to_u32(value: f64) -> Option<u32> {
    let rounded = value.round();
    (rounded.is_finite() && rounded >= 0.0 && rounded <= f64::from(u32::MAX))
        .then_some(rounded as u32)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_change_gives_some_values_and_the_rest_comes_from_the_current_config() {
        let change = parse_change("mem=1.5g, ckpt=20s").unwrap();
        assert_eq!(
            change,
            ConfigChange {
                tm_memory_mb: Some(1536),
                checkpoint_interval_s: Some(20),
                ..ConfigChange::default()
            }
        );
        let current: JobConfig = "p=2,slots=2,mem=1g,cpu=0.5,ckpt=5".parse().unwrap();
        let to = apply_change(&change, Some(&current)).unwrap();
        assert_eq!(to, "p=2,slots=2,mem=1536m,cpu=0.5,ckpt=20".parse().unwrap());
        let first = apply_change(&change, None).unwrap_err().to_string();
        assert!(first.contains("parallelism is needed"), "{first}");
        for bad in ["p=0", "mem=lots", "gpu=1", "p"] {
            assert!(parse_change(bad).is_err(), "{bad}");
        }
        assert!(
            "p=2,slots=2".parse::<JobConfig>().is_err(),
            "all five needed"
        );
    }
}

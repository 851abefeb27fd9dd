//! The JobManager's effective configuration (`GET /jobmanager/config`) and the settings whose
//! Flink defaults undermine what Demeter reads from the cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::client::{FlinkClient, Target};
use crate::Result;

/// Flink's default `web.timeout` (10 min).
pub const DEFAULT_WEB_TIMEOUT: Duration = Duration::from_secs(600);

/// Longest `web.timeout` Demeter accepts without a warning. The JobManager's metric fetcher
/// starts no new fetch until the last one ended, and a fetch waits up to `web.timeout` for a
/// TaskManager that stopped answering (a frozen JVM, a lost host): every REST metric — input
/// rate, busy time, restarts — stays frozen that long. Demeter's risk checks and its recovery
/// watch need fresh figures within a minute; a lab cluster froze over 2 min with the default and
/// exactly 30 s with `web.timeout: 30 s`.
pub const MAX_WEB_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Deserialize)]
struct Entry {
    key: String,
    value: String,
}

/// The configuration a JobManager runs with: what its config file and dynamic properties set
/// (Flink lists only those, not its defaults).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterConfig {
    entries: BTreeMap<String, String>,
}

/// A setting Demeter's operator should change, with why.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFinding {
    pub key: &'static str,
    /// What the cluster runs with (`None`: unset, Flink's default applies).
    pub value: Option<String>,
    pub advice: String,
}

impl ClusterConfig {
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            entries: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// What the cluster should change for Demeter's readings to stay fresh; empty when nothing.
    pub fn findings(&self) -> Vec<ConfigFinding> {
        let mut findings = Vec::new();
        let value = self.get("web.timeout");
        let timeout = match value {
            None => Some(DEFAULT_WEB_TIMEOUT),
            Some(v) => parse_flink_duration(v),
        };
        let advice = match timeout {
            None => Some("unreadable as a Flink duration; set e.g. `web.timeout: 30 s`".to_owned()),
            Some(t) if t > MAX_WEB_TIMEOUT => Some(format!(
                "REST metrics freeze up to {} s after a TaskManager stops answering (the metric \
                 fetcher waits this long before it fetches again); set `web.timeout: 30 s` \
                 (at most {} s) in the JobManager's config.yaml",
                t.as_secs(),
                MAX_WEB_TIMEOUT.as_secs()
            )),
            Some(_) => None,
        };
        if let Some(advice) = advice {
            findings.push(ConfigFinding {
                key: "web.timeout",
                value: value.map(str::to_owned),
                advice,
            });
        }
        findings
    }
}

/// A duration in Flink's configuration syntax: a non-negative integer, optional blanks, an
/// optional unit (`ms`, `s`, `min`, `h`, `d` and their long forms, any case); no unit means
/// milliseconds.
pub fn parse_flink_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let amount: u64 = text[..digits].parse().ok()?;
    let unit = text[digits..].trim().to_ascii_lowercase();
    let per_unit = match unit.as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => Duration::from_nanos(1),
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => {
            Duration::from_micros(1)
        }
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Duration::from_millis(1),
        "s" | "sec" | "secs" | "second" | "seconds" => Duration::from_secs(1),
        "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(60),
        "h" | "hour" | "hours" => Duration::from_secs(3_600),
        "d" | "day" | "days" => Duration::from_secs(86_400),
        _ => return None,
    };
    per_unit.checked_mul(u32::try_from(amount).ok()?)
}

impl FlinkClient {
    /// `GET /jobmanager/config`: the JobManager's configured keys and values.
    pub async fn jobmanager_config(&self) -> Result<ClusterConfig> {
        let entries: Vec<Entry> = self
            .get_json(Target {
                op: "jobmanager_config",
                segments: &["jobmanager", "config"],
                query: &[],
                job: None,
            })
            .await?;
        Ok(ClusterConfig::from_pairs(
            entries.into_iter().map(|e| (e.key, e.value)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    fn captured() -> ClusterConfig {
        let entries: Vec<Entry> = fixture("jobmanager_config.json");
        ClusterConfig::from_pairs(entries.into_iter().map(|e| (e.key, e.value)))
    }

    #[test]
    fn a_lab_cluster_needs_no_change() {
        let config = captured();
        assert_eq!(config.get("web.timeout"), Some("30 s"));
        assert_eq!(config.findings(), vec![]);
    }

    #[test]
    fn flinks_default_web_timeout_is_reported() {
        let mut config = captured();
        config.entries.remove("web.timeout");
        let findings = config.findings();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].key, "web.timeout");
        assert_eq!(findings[0].value, None);
        assert!(findings[0].advice.contains("600 s"), "{findings:?}");
    }

    #[test]
    fn long_or_unreadable_timeouts_are_reported() {
        for value in ["10 min", "120000", "2 m", "30 fortnights", "-5 s"] {
            let config = ClusterConfig::from_pairs([("web.timeout", value)]);
            assert_eq!(config.findings().len(), 1, "{value}");
        }
        for value in ["30 s", "60000", "45s", "1 min"] {
            let config = ClusterConfig::from_pairs([("web.timeout", value)]);
            assert_eq!(config.findings(), vec![], "{value}");
        }
    }

    #[test]
    fn flink_duration_syntax() {
        let cases = [
            ("30 s", Some(Duration::from_secs(30))),
            ("600000", Some(Duration::from_secs(600))),
            ("10min", Some(Duration::from_secs(600))),
            ("2 Hours", Some(Duration::from_secs(7_200))),
            ("1 d", Some(Duration::from_secs(86_400))),
            ("250 ms", Some(Duration::from_millis(250))),
            ("", None),
            ("s", None),
            ("1.5 s", None),
            ("99999999999999999999 s", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_flink_duration(text), expected, "{text:?}");
        }
    }
}

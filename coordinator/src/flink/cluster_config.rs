//! The JobManager's effective configuration (`GET /jobmanager/config`) and the settings whose
//! Flink defaults undermine what Demeter reads from the cluster: how long a metric can freeze
//! (`web.timeout`) and how often metrics refresh (`metrics.fetcher.update-interval`).

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

/// Flink's default `metrics.fetcher.update-interval` (10 s).
pub const DEFAULT_FETCHER_INTERVAL: Duration = Duration::from_secs(10);

/// Longest metric fetcher interval Demeter accepts without a warning. The live loop reads the
/// job once a second and counts seconds over the QoS and backlog growth tick by tick; a fetcher
/// refreshing every 10 s hands it the same reading ten times, so one stale latency figure
/// counts as ten seconds (or hides ten).
pub const MAX_FETCHER_INTERVAL: Duration = Duration::from_secs(2);

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
        let web_timeout = self.duration_finding(
            "web.timeout",
            DEFAULT_WEB_TIMEOUT,
            MAX_WEB_TIMEOUT,
            "30 s",
            |t| {
                format!(
                    "REST metrics freeze up to {} s after a TaskManager stops answering (the \
                     metric fetcher waits this long before it fetches again)",
                    t.as_secs()
                )
            },
        );
        let fetcher = self.duration_finding(
            "metrics.fetcher.update-interval",
            DEFAULT_FETCHER_INTERVAL,
            MAX_FETCHER_INTERVAL,
            "1 s",
            |t| {
                format!(
                    "REST metrics refresh only every {} s while Demeter reads them every second \
                     and counts seconds over the QoS from them",
                    t.as_secs_f64()
                )
            },
        );
        web_timeout.into_iter().chain(fetcher).collect()
    }

    fn duration_finding(
        &self,
        key: &'static str,
        default: Duration,
        max: Duration,
        advised: &str,
        harm: impl Fn(Duration) -> String,
    ) -> Option<ConfigFinding> {
        let value = self.get(key);
        let set_it = format!("set `{key}: {advised}` in the JobManager's config.yaml");
        let advice = match value.map_or(Some(default), parse_flink_duration) {
            None => format!("unreadable as a Flink duration; {set_it}"),
            Some(d) if d > max => format!("{}; {set_it} (at most {} s)", harm(d), max.as_secs()),
            Some(_) => return None,
        };
        Some(ConfigFinding {
            key,
            value: value.map(str::to_owned),
            advice,
        })
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
        Ok(ClusterConfig::from(entries))
    }
}

impl From<Vec<Entry>> for ClusterConfig {
    fn from(entries: Vec<Entry>) -> Self {
        Self::from_pairs(entries.into_iter().map(|e| (e.key, e.value)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    fn captured() -> ClusterConfig {
        let entries: Vec<Entry> = fixture("jobmanager_config.json");
        ClusterConfig::from(entries)
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
        assert_eq!(config.get("metrics.fetcher.update-interval"), Some("1000"));
        let findings = config.findings();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].key, "web.timeout");
        assert_eq!(findings[0].value, None);
        assert!(findings[0].advice.contains("600 s"), "{findings:?}");
    }

    fn keys_reported(pairs: &[(&str, &str)]) -> Vec<&'static str> {
        let config = ClusterConfig::from_pairs(pairs.iter().copied());
        config.findings().iter().map(|f| f.key).collect()
    }

    #[test]
    fn long_or_unreadable_timeouts_are_reported() {
        const FETCHER: (&str, &str) = ("metrics.fetcher.update-interval", "1000");
        for value in ["10 min", "120000", "2 m", "30 fortnights", "-5 s"] {
            let reported = keys_reported(&[("web.timeout", value), FETCHER]);
            assert_eq!(reported, ["web.timeout"], "{value}");
        }
        for value in ["30 s", "60000", "45s", "1 min"] {
            let reported = keys_reported(&[("web.timeout", value), FETCHER]);
            assert_eq!(reported, Vec::<&str>::new(), "{value}");
        }
    }

    #[test]
    fn a_slow_or_default_metric_fetcher_is_reported() {
        const TIMEOUT: (&str, &str) = ("web.timeout", "30 s");
        let key = "metrics.fetcher.update-interval";
        assert_eq!(keys_reported(&[TIMEOUT]), [key], "Flink's default is 10 s");
        for value in ["10 s", "5000", "3s"] {
            assert_eq!(keys_reported(&[TIMEOUT, (key, value)]), [key], "{value}");
        }
        for value in ["1000", "1 s", "2 s", "500 ms"] {
            let reported = keys_reported(&[TIMEOUT, (key, value)]);
            assert_eq!(reported, Vec::<&str>::new(), "{value}");
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

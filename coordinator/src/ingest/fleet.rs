//! The in-memory view of the fleet: who is connected, and a time-indexed window of recent
//! samples per agent. Sans-IO: callers pass the time.

use std::collections::{BTreeMap, VecDeque};

use demeter_common::metrics::{JvmSample, Sample};
use demeter_common::protocol::AgentSummary;

#[derive(Debug, Clone)]
struct Connection {
    id: u64,
    remote_addr: String,
    software: String,
    connected_since_ms: u64,
    boot_id: u64,
}

#[derive(Debug, Default)]
struct AgentState {
    connection: Option<Connection>,
    stored_up_to: u64,
    /// (seq, sample), oldest first, trimmed to the window by `taken_at_ms`.
    recent: VecDeque<(u64, Sample)>,
}

#[derive(Debug)]
pub struct Fleet {
    window_ms: u64,
    agents: BTreeMap<String, AgentState>,
}

impl Fleet {
    pub fn new(window_ms: u64) -> Self {
        Self {
            window_ms,
            agents: BTreeMap::new(),
        }
    }

    /// Registers a connection; returns the id of a connection it replaces (the agent
    /// reconnected before the old one timed out), which the caller should close.
    #[allow(clippy::too_many_arguments)]
    pub fn connected(
        &mut self,
        name: &str,
        connection_id: u64,
        remote_addr: String,
        software: String,
        boot_id: u64,
        stored_up_to: u64,
        now_ms: u64,
    ) -> Option<u64> {
        let state = self.agents.entry(name.to_string()).or_default();
        let replaced = state.connection.take().map(|c| c.id);
        state.connection = Some(Connection {
            id: connection_id,
            remote_addr,
            software,
            connected_since_ms: now_ms,
            boot_id,
        });
        state.stored_up_to = stored_up_to;
        replaced
    }

    /// Forgets a connection unless a newer one already replaced it.
    pub fn disconnected(&mut self, name: &str, connection_id: u64) {
        if let Some(state) = self.agents.get_mut(name)
            && state
                .connection
                .as_ref()
                .is_some_and(|c| c.id == connection_id)
        {
            state.connection = None;
        }
    }

    /// Adds durably stored samples to the window and trims what fell out of it.
    pub fn record(&mut self, name: &str, first_seq: u64, samples: &[Sample], stored_up_to: u64) {
        let window_ms = self.window_ms;
        let state = self.agents.entry(name.to_string()).or_default();
        state.stored_up_to = stored_up_to;
        for (i, sample) in samples.iter().enumerate() {
            state
                .recent
                .push_back((first_seq + i as u64, sample.clone()));
        }
        if let Some(newest) = state.recent.back().map(|(_, s)| s.taken_at_ms) {
            let horizon = newest.saturating_sub(window_ms);
            while state
                .recent
                .front()
                .is_some_and(|(_, s)| s.taken_at_ms < horizon)
            {
                state.recent.pop_front();
            }
        }
    }

    /// Samples of `name` taken in `[from_ms, to_ms]`.
    pub fn window(&self, name: &str, from_ms: u64, to_ms: u64) -> Vec<&Sample> {
        self.agents
            .get(name)
            .map(|s| {
                s.recent
                    .iter()
                    .map(|(_, sample)| sample)
                    .filter(|sample| (from_ms..=to_ms).contains(&sample.taken_at_ms))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// From every connected agent's newest sample, the TaskManager JVMs whose resource id
    /// starts with `prefix` (a job's TaskManagers are `<job>-tm<i>`).
    pub fn latest_jvms(&self, prefix: &str) -> Vec<JvmSample> {
        self.agents
            .values()
            .filter(|s| s.connection.is_some())
            .filter_map(|s| s.recent.back())
            .flat_map(|(_, sample)| sample.jvms.iter())
            .filter(|j| {
                j.taskmanager_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with(prefix))
            })
            .cloned()
            .collect()
    }

    /// Every connected agent's newest sample (host figures and its TaskManager JVMs), by name.
    pub fn latest_samples(&self) -> Vec<(String, Sample)> {
        self.agents
            .iter()
            .filter(|(_, s)| s.connection.is_some())
            .filter_map(|(name, s)| {
                s.recent
                    .back()
                    .map(|(_, sample)| (name.clone(), sample.clone()))
            })
            .collect()
    }

    pub fn connected_names(&self) -> Vec<String> {
        self.agents
            .iter()
            .filter(|(_, s)| s.connection.is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn summaries(&self) -> Vec<AgentSummary> {
        self.summaries_page(None, usize::MAX)
    }

    /// Connected agents whose names sort after `after`, at most `limit`.
    pub fn summaries_page(&self, after: Option<&str>, limit: usize) -> Vec<AgentSummary> {
        let start = match after {
            Some(name) => std::ops::Bound::Excluded(name.to_string()),
            None => std::ops::Bound::Unbounded,
        };
        self.agents
            .range((start, std::ops::Bound::Unbounded))
            .filter_map(|(name, state)| {
                let c = state.connection.as_ref()?;
                Some(AgentSummary {
                    name: name.clone(),
                    remote_addr: c.remote_addr.clone(),
                    software: c.software.clone(),
                    connected_since_ms: c.connected_since_ms,
                    boot_id: c.boot_id,
                    stored_up_to: state.stored_up_to,
                    last_sample: state.recent.back().map(|(_, s)| s.clone()),
                })
            })
            .take(limit)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use demeter_common::metrics::HostSample;

    fn sample(t: u64) -> Sample {
        Sample {
            taken_at_ms: t,
            host: HostSample::default(),
            jvms: vec![],
        }
    }

    #[test]
    fn window_keeps_only_recent_samples() {
        let mut fleet = Fleet::new(1_000);
        fleet.record("a", 1, &[sample(0), sample(500), sample(1_000)], 3);
        fleet.record("a", 4, &[sample(1_600)], 4);
        let kept: Vec<u64> = fleet
            .window("a", 0, u64::MAX)
            .iter()
            .map(|s| s.taken_at_ms)
            .collect();
        assert_eq!(kept, vec![1_000, 1_600]);
        assert_eq!(fleet.window("a", 1_500, 2_000).len(), 1);
    }

    #[test]
    fn reconnect_replaces_and_stale_disconnect_is_ignored() {
        let mut fleet = Fleet::new(1_000);
        assert_eq!(
            fleet.connected("a", 1, "x".into(), "v".into(), 7, 0, 10),
            None
        );
        assert_eq!(
            fleet.connected("a", 2, "y".into(), "v".into(), 7, 0, 20),
            Some(1)
        );
        fleet.disconnected("a", 1);
        assert_eq!(fleet.connected_names(), vec!["a".to_string()]);
        fleet.disconnected("a", 2);
        assert!(fleet.connected_names().is_empty());
        assert!(fleet.summaries().is_empty());
    }
}

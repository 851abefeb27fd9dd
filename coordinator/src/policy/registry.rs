//! Policies by name: what `demeter-coordinator simulate --policy NAME` (and later the daemon)
//! constructs. The one place that knows every policy.

use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::Policy;
use crate::policy::baselines::oracle::Foresight;
use crate::policy::baselines::{Fixed, Oracle, OracleSettings, Reactive, ReactiveSettings};
use crate::policy::demeter::DemeterConfig;
use crate::twin::truth::GroundTruth;
use crate::{Error, Result};

/// Every policy name, in the order comparisons list them.
pub const POLICY_NAMES: [&str; 4] = ["static", "reactive", "demeter", "oracle"];

/// What a policy may be built from. `truth`, `rates` and `failures_every_s` are the simulated
/// job's ground truth, future input and failure schedule: only the oracle may look at them.
#[derive(Debug, Clone, Copy)]
pub struct PolicyContext<'a> {
    pub space: &'a SearchSpace,
    pub qos: Qos,
    pub seed: u64,
    /// The static peak default (also the cost reference).
    pub static_config: JobConfig,
    pub truth: &'a GroundTruth,
    pub rates: &'a [f64],
    pub failures_every_s: Option<u64>,
    pub oracle: OracleSettings,
    /// The Demeter policy's knobs.
    pub demeter: &'a DemeterConfig,
}

/// Builds the policy called `name`.
pub fn build(name: &str, ctx: &PolicyContext<'_>) -> Result<Box<dyn Policy>> {
    match name {
        "static" => Ok(Box::new(Fixed)),
        "reactive" => Ok(Box::new(Reactive::new(
            ctx.space.clone(),
            ReactiveSettings::default(),
        ))),
        "demeter" => demeter_policy(ctx.space, ctx.qos, ctx.demeter.clone(), ctx.seed),
        "oracle" => Ok(Box::new(Oracle::new(
            Foresight {
                truth: ctx.truth.clone(),
                space: ctx.space.clone(),
                qos: ctx.qos,
                rates: ctx.rates.to_vec(),
                reference: ctx.static_config,
                failures_every_s: ctx.failures_every_s,
            },
            ctx.oracle,
        ))),
        other => Err(Error::Policy(format!(
            "unknown policy {other:?} (known: {})",
            POLICY_NAMES.join(", ")
        ))),
    }
}

/// Demeter's own policy. It sees only what the daemon will have — the search space, the QoS, its
/// knobs and a seed — never the twin's truth or future rates.
pub fn demeter_policy(
    space: &SearchSpace,
    qos: Qos,
    config: DemeterConfig,
    seed: u64,
) -> Result<Box<dyn Policy>> {
    let policy = crate::policy::demeter::demeter_policy(space.clone(), qos, config, seed)?;
    Ok(Box::new(policy))
}

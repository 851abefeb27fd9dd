//! The policies Demeter is measured against (issue 5 item 4): `static` (the peak default, never
//! changes), `reactive` (Flink's autoscaler rule, parallelism only) and `oracle` (knows the
//! future rate and the true curves: a lower bound on cost). Same sans-IO interface as Demeter's.

pub mod fixed;
pub mod oracle;
pub mod reactive;

pub use fixed::Fixed;
pub use oracle::{Oracle, OracleSettings};
pub use reactive::{Reactive, ReactiveSettings};

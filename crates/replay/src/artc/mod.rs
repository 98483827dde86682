//! ARTC (ROOT, Weiss et al.): replay a system-call trace with the original's concurrency.
//!
//! [`model`] follows the file system through the trace to find which resources (files,
//! path names, descriptors) each call touched; [`plan`] turns ROOT's ordering rules over
//! those resources into a plan: a replay thread per traced thread and, for each call, the
//! calls of other threads it must wait for. Modes ARTC, temporally ordered, single-threaded
//! and unconstrained are plans, not code paths.

pub mod model;
pub mod plan;
pub mod run;
pub mod verify;

pub use plan::{action_series, compile, Mode, Plan, Rules};
pub use run::{agrees, init, init_data, run, Outcome, Report, Side, Timing};
pub use verify::{compare, State, Verdict};

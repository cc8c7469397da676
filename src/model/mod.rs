//! The shared vocabulary of the agent and the control plane: what a check is,
//! what running it produced, and how runs add up to a check session.
//!
//! Executors and the service both depend on this module and on nothing of each other.

pub mod check;
pub mod result;
pub mod session;

pub use check::{
    Assertion, AssertionSource, CheckSpec, CheckType, Comparison, IpFamily, Pool, UrlMonitorSpec,
    UrlRequest, ValidationError,
};
pub use result::{
    AssertionResult, ErrorKind, HttpResponseSummary, RunError, RunResult, RunStatus, TimingPhases,
};
pub use session::{ResultType, RunSource, SessionStatus};

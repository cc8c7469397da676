//! The shared vocabulary of the agent and the control plane: what a check is,
//! what running it produced, and how runs add up to a check session.
//!
//! Executors and the service both depend on this module and on nothing of each other.

pub mod check;
pub mod heartbeat;
pub mod jsonpath;
pub mod proxy;
pub mod result;
pub mod session;

pub use check::{
    ApiCheckSpec, ApiRequest, Assertion, AssertionSource, BasicAuth, BodyType, CheckSpec,
    CheckType, Comparison, EnvironmentVariable, HttpMethod, IpFamily, KeyValue, Pool,
    UrlMonitorSpec, UrlRequest, ValidationError,
};
pub use heartbeat::{HeartbeatConfig, HeartbeatState, TimeUnit};
pub use proxy::{ProxyUrl, ProxyUrlError};
pub use result::{
    ArtifactRef, AssertionResult, Diagnostics, ErrorKind, HttpRequestSummary, HttpResponseSummary,
    RunError, RunResult, RunStatus, TimingPhases,
};
pub use session::{ResultType, RunSource, SessionStatus};

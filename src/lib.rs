//! Outpost: a self-hosted synthetic-monitoring control plane and private-location agent.
//! See ARCHITECTURE.md for the code map and the invariants.

pub mod admin_cli;
pub mod agent;
pub mod deploy;
pub mod executors;
pub mod model;
pub mod protocol;
pub mod scrub;
pub mod service;
pub mod shutdown;
pub mod telemetry;

/// This build's version, reported by the agent and the service.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

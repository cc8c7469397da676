//! Internal error events: error-level failures of the agent itself, logged with a stable
//! event name so they can be counted and (when EXTERNAL_OBSERVABILITY is on) reported.
//! Messages pass the scrubber first.

use super::scrub::Scrubber;

/// Stable names of internal error events.
pub mod names {
    pub const LOOP_DIED: &str = "agent.loop_died";
    pub const SPOOL_WRITE: &str = "agent.spool.write_failed";
    pub const SPOOL_CORRUPT: &str = "agent.spool.corrupt_file";
    pub const RESULT_REJECTED: &str = "agent.result.rejected";
    pub const REQUEST_REJECTED: &str = "agent.request.rejected";
    pub const RELEASE_FAILED: &str = "agent.release.failed";
}

/// Logs internal errors. `external` marks them for error reporting to the service.
#[derive(Clone)]
pub struct Events {
    external: bool,
    scrubber: Scrubber,
}

impl Events {
    pub fn new(external: bool, scrubber: Scrubber) -> Events {
        Events { external, scrubber }
    }

    /// Whether error reports may leave the agent.
    pub fn external(&self) -> bool {
        self.external
    }

    /// An error-level failure of the agent itself.
    pub fn internal_error(&self, event: &'static str, message: &str) {
        let message = self.scrubber.scrub(message);
        tracing::error!(event, external_report = self.external, "{message}");
    }
}

//! Internal error events: error-level failures of the agent itself, logged with a stable
//! event name so they can be counted, and queued as error reports for the service when
//! EXTERNAL_OBSERVABILITY is on (see [`super::error_reports`]). Messages pass the
//! scrubber first.

use super::error_reports::ReportSink;
use super::scrub::Scrubber;

/// Stable names of internal error events.
pub mod names {
    pub const LOOP_DIED: &str = "agent.loop_died";
    pub const SPOOL_WRITE: &str = "agent.spool.write_failed";
    pub const SPOOL_CORRUPT: &str = "agent.spool.corrupt_file";
    pub const RESULT_REJECTED: &str = "agent.result.rejected";
    pub const REQUEST_REJECTED: &str = "agent.request.rejected";
    pub const RELEASE_FAILED: &str = "agent.release.failed";
    /// A thread of the agent panicked (reported with its backtrace).
    pub const PANIC: &str = "agent.panic";
    /// Error reports were dropped because too many waited (reported with their count).
    pub const REPORTS_DROPPED: &str = "agent.error_reports.dropped";
}

/// Logs internal errors and, with a sink, queues them as error reports.
#[derive(Clone)]
pub struct Events {
    scrubber: Scrubber,
    reports: Option<ReportSink>,
}

impl Events {
    /// Events that are only logged.
    pub fn new(scrubber: Scrubber) -> Events {
        Events {
            scrubber,
            reports: None,
        }
    }

    /// Events that are also reported to the service through `sink`.
    pub fn with_reports(mut self, sink: ReportSink) -> Events {
        self.reports = Some(sink);
        self
    }

    /// Whether error reports may leave the agent.
    pub fn external(&self) -> bool {
        self.reports.is_some()
    }

    /// An error-level failure of the agent itself.
    pub fn internal_error(&self, event: &'static str, message: &str) {
        let message = self.scrubber.scrub(message);
        tracing::error!(event, external_report = self.external(), "{message}");
        if let Some(sink) = &self.reports {
            sink.record(event, &message, None);
        }
    }
}

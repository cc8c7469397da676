//! Panics become error reports: a process-wide panic hook records the panic's message,
//! place and a captured backtrace, then calls the hook that was installed before (the
//! standard one prints the panic to stderr). It holds the sink weakly: once the agent
//! stopped, panics are only printed. It never blocks: when the queue is busy (a panic
//! while a report is being recorded) the panic is counted as a dropped report.

use std::backtrace::Backtrace;
use std::panic::PanicHookInfo;
use std::sync::Arc;

use super::ReportSink;
use crate::agent::events::names;

/// Installs the hook for `sink`, chained before the current one.
pub fn install(sink: &ReportSink) {
    let shared = Arc::downgrade(&sink.shared);
    let scrubber = sink.scrubber.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(shared) = shared.upgrade() {
            let backtrace = Backtrace::force_capture().to_string();
            let sink = ReportSink {
                shared,
                scrubber: scrubber.clone(),
            };
            sink.try_record(names::PANIC, &panic_message(info), Some(&backtrace));
        }
        previous(info);
    }));
}

/// `thread 'NAME' panicked at FILE:LINE: MESSAGE`, as the standard hook says it.
pub fn panic_message(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)");
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    match info.location() {
        Some(at) => format!(
            "thread '{name}' panicked at {}:{}: {message}",
            at.file(),
            at.line()
        ),
        None => format!("thread '{name}' panicked: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrub::{MASK, Scrubber};

    #[test]
    fn a_panicking_thread_becomes_a_report_with_its_backtrace() {
        let sink = ReportSink::new(Scrubber::new(["pl-secret-key"]));
        install(&sink);
        let joined = std::thread::Builder::new()
            .name("doomed-worker".into())
            .spawn(|| panic!("lost the thread with pl-secret-key"))
            .map(|handle| handle.join());
        assert!(matches!(joined, Ok(Err(_))), "the thread panicked");
        let reports: Vec<_> = sink
            .take_all()
            .into_iter()
            .filter(|r| r.message.contains("doomed-worker"))
            .collect();
        assert_eq!(reports.len(), 1, "{reports:?}");
        let report = &reports[0];
        assert_eq!(report.event, names::PANIC);
        assert!(
            report.message.starts_with(
                "thread 'doomed-worker' panicked at src/agent/error_reports/panic_hook.rs:"
            ),
            "{}",
            report.message
        );
        assert!(
            report
                .message
                .ends_with(&format!("lost the thread with {MASK}")),
            "{}",
            report.message
        );
        let backtrace = report.backtrace.as_deref().unwrap_or_default();
        assert!(
            backtrace.contains("a_panicking_thread_becomes_a_report_with_its_backtrace"),
            "{backtrace}"
        );
        // Once the sink is gone the hook only passes panics on.
        drop(sink);
        let joined = std::thread::spawn(|| panic!("after the agent")).join();
        assert!(joined.is_err());
    }
}

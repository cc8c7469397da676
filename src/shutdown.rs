//! Process-wide shutdown: the first SIGTERM/SIGINT starts a graceful drain, the second
//! forces the exit.

use tokio_util::sync::CancellationToken;

/// Handed to every long-running part. `drain` fires on the first signal.
#[derive(Clone, Default)]
pub struct Shutdown {
    drain: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Starts the drain (as the first signal does).
    pub fn trigger(&self) {
        self.drain.cancel();
    }

    pub fn is_draining(&self) -> bool {
        self.drain.is_cancelled()
    }

    /// Resolves once the drain has started.
    pub async fn draining(&self) {
        self.drain.cancelled().await
    }

    /// A token that fires with the drain, for APIs that take one.
    pub fn token(&self) -> CancellationToken {
        self.drain.clone()
    }
}

/// Listens for SIGTERM and SIGINT: the first triggers `shutdown`, the second exits the
/// process at once with status 130.
pub fn install_signal_handlers(shutdown: Shutdown) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let mut seen = 0u32;
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            seen += 1;
            if seen == 1 {
                tracing::info!(
                    signal = name,
                    "shutdown requested: draining (send again to force)"
                );
                shutdown.trigger();
            } else {
                tracing::warn!(signal = name, "second signal: exiting now");
                std::process::exit(130);
            }
        }
    });
    Ok(())
}

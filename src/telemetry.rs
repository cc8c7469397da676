//! Logging setup: tracing to stderr, text or JSON lines.

use tracing_subscriber::EnvFilter;

/// Log levels of the reference agent (`LOG` sits between DEBUG and INFO; we map it to INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// Parses DEBUG, LOG, INFO, WARN, ERROR (any case; TRACE counts as DEBUG).
    pub fn parse(s: &str) -> Option<LogLevel> {
        match s.trim().to_ascii_uppercase().as_str() {
            "TRACE" | "DEBUG" => Some(LogLevel::Debug),
            "LOG" | "INFO" => Some(LogLevel::Info),
            "WARN" | "WARNING" => Some(LogLevel::Warn),
            "ERROR" => Some(LogLevel::Error),
            _ => None,
        }
    }

    fn directive(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Output format of the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber. Our crate logs at `level`; dependencies at WARN
/// unless `RUST_LOG` says otherwise.
pub fn init(level: LogLevel, format: LogFormat) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("warn,outpost={}", level.directive())));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests, `up`) is harmless: the first subscriber stays.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

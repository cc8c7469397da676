//! Agent configuration from the reference agent's environment variables (flags too).
//! Every value is taken as a string and validated here, so that a bad value is one line
//! naming the variable. The API key is never part of a message.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// Raw agent settings; every flag falls back to its environment variable.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// The private location's agent key (required).
    #[arg(long, env = "API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Base URL of the control plane, e.g. https://outpost.example.com (required).
    #[arg(long, env = "API_URL")]
    pub api_url: Option<String>,
    /// Heavy checks (browser, multistep, suites) run at once: 1 to 10, default 1.
    #[arg(long, env = "JOB_CONCURRENCY")]
    pub job_concurrency: Option<String>,
    /// Uptime checks (URL, API, TCP, DNS, ICMP) run at once: 1 to 1000, default 100.
    #[arg(long, env = "UPTIME_CONCURRENCY")]
    pub uptime_concurrency: Option<String>,
    /// Port of the health server (0.0.0.0), default 8081.
    #[arg(long, env = "AGENT_HEALTH_PORT")]
    pub health_port: Option<String>,
    /// Address the health server binds, default 0.0.0.0.
    #[arg(long, env = "AGENT_HEALTH_HOST")]
    pub health_host: Option<String>,
    /// `off` disables error reports to the service.
    #[arg(long, env = "EXTERNAL_OBSERVABILITY")]
    pub external_observability: Option<String>,
    /// Seconds running jobs get to finish after SIGTERM, default 300.
    #[arg(long, env = "SHUTDOWN_GRACE_SECONDS")]
    pub shutdown_grace_seconds: Option<String>,
    /// Where undelivered results wait for the service (survives restarts).
    #[arg(long, env = "SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
}

/// Validated agent configuration.
#[derive(Clone)]
pub struct AgentConfig {
    pub api_key: String,
    pub api_url: url::Url,
    pub job_concurrency: u32,
    pub uptime_concurrency: u32,
    pub health_addr: SocketAddr,
    pub external_observability: bool,
    pub shutdown_grace: Duration,
    pub spool_dir: PathBuf,
}

impl std::fmt::Debug for AgentConfig {
    /// Like a derived Debug, with the API key left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("api_key", &"[redacted]")
            .field("api_url", &self.api_url.as_str())
            .field("job_concurrency", &self.job_concurrency)
            .field("uptime_concurrency", &self.uptime_concurrency)
            .field("health_addr", &self.health_addr)
            .field("external_observability", &self.external_observability)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("spool_dir", &self.spool_dir)
            .finish()
    }
}

/// A missing or invalid setting; the message names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable} {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl ConfigError {
    fn new(variable: &'static str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            variable,
            message: message.into(),
        }
    }
}

/// Default and bounds of the heavy pool.
pub const DEFAULT_JOB_CONCURRENCY: u32 = 1;
pub const MAX_JOB_CONCURRENCY: u32 = 10;
/// Default and bounds of the uptime pool.
pub const DEFAULT_UPTIME_CONCURRENCY: u32 = 100;
pub const MAX_UPTIME_CONCURRENCY: u32 = 1000;
pub const DEFAULT_HEALTH_PORT: u16 = 8081;
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 300;
/// Longest grace period accepted (one day).
pub const MAX_SHUTDOWN_GRACE_SECS: u64 = 86_400;

/// Longest echo of a bad value in an error message.
const MAX_ECHO_CHARS: usize = 80;

impl AgentConfig {
    /// Validates the raw settings. Empty values of optional settings count as unset.
    pub fn from_args(args: &AgentArgs) -> Result<AgentConfig, ConfigError> {
        let api_key = parse_api_key(args.api_key.as_deref())?;
        let api_url = parse_api_url(args.api_url.as_deref())?;
        let job_concurrency = parse_bounded(
            "JOB_CONCURRENCY",
            args.job_concurrency.as_deref(),
            1,
            MAX_JOB_CONCURRENCY,
            DEFAULT_JOB_CONCURRENCY,
        )?;
        let uptime_concurrency = parse_bounded(
            "UPTIME_CONCURRENCY",
            args.uptime_concurrency.as_deref(),
            1,
            MAX_UPTIME_CONCURRENCY,
            DEFAULT_UPTIME_CONCURRENCY,
        )?;
        let port = match present(args.health_port.as_deref()) {
            None => DEFAULT_HEALTH_PORT,
            Some(raw) => raw.parse::<u16>().map_err(|_| {
                ConfigError::new(
                    "AGENT_HEALTH_PORT",
                    format!("must be a port number from 0 to 65535 (got {})", echo(raw)),
                )
            })?,
        };
        let host = match present(args.health_host.as_deref()) {
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(raw) => raw.parse::<IpAddr>().map_err(|_| {
                ConfigError::new(
                    "AGENT_HEALTH_HOST",
                    format!("must be an IP address (got {})", echo(raw)),
                )
            })?,
        };
        let external_observability =
            parse_external_observability(args.external_observability.as_deref())?;
        let grace_secs = parse_bounded(
            "SHUTDOWN_GRACE_SECONDS",
            args.shutdown_grace_seconds.as_deref(),
            0,
            MAX_SHUTDOWN_GRACE_SECS,
            DEFAULT_SHUTDOWN_GRACE_SECS,
        )?;
        let spool_dir = match &args.spool_dir {
            Some(dir) if !dir.as_os_str().is_empty() => dir.clone(),
            _ => default_spool_dir(&api_key),
        };
        Ok(AgentConfig {
            api_key,
            api_url,
            job_concurrency,
            uptime_concurrency,
            health_addr: SocketAddr::new(host, port),
            external_observability,
            shutdown_grace: Duration::from_secs(grace_secs),
            spool_dir,
        })
    }
}

/// EXTERNAL_OBSERVABILITY: on unless `off` (or `false`, `0`, `no`); blank is unset.
pub fn parse_external_observability(raw: Option<&str>) -> Result<bool, ConfigError> {
    match present(raw) {
        None => Ok(true),
        Some(raw) => match raw.to_ascii_lowercase().as_str() {
            "off" | "false" | "0" | "no" => Ok(false),
            "on" | "true" | "1" | "yes" => Ok(true),
            _ => Err(ConfigError::new(
                "EXTERNAL_OBSERVABILITY",
                format!("must be on or off (got {})", echo(raw)),
            )),
        },
    }
}

/// `<temp dir>/outpost-spool-<first 12 hex chars of sha256(key)>`: one spool per key,
/// stable across restarts, without revealing the key.
pub fn default_spool_dir(api_key: &str) -> PathBuf {
    let digest = Sha256::digest(api_key.as_bytes());
    let hex = hex::encode(digest);
    let short = hex.get(..12).unwrap_or(&hex);
    std::env::temp_dir().join(format!("outpost-spool-{short}"))
}

/// The value with surrounding whitespace removed, or `None` when unset or blank.
fn present(raw: Option<&str>) -> Option<&str> {
    raw.map(str::trim).filter(|s| !s.is_empty())
}

/// A bad value quoted for an error message: escaped (one line) and shortened.
fn echo(raw: &str) -> String {
    if raw.chars().count() > MAX_ECHO_CHARS {
        let short: String = raw.chars().take(MAX_ECHO_CHARS).collect();
        format!("{short:?}...")
    } else {
        format!("{raw:?}")
    }
}

fn parse_api_key(raw: Option<&str>) -> Result<String, ConfigError> {
    let Some(key) = present(raw) else {
        return Err(ConfigError::new(
            "API_KEY",
            "is required: set it to the agent key of the private location",
        ));
    };
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError::new(
            "API_KEY",
            "must contain only visible ASCII characters (no spaces or line breaks)",
        ));
    }
    Ok(key.to_owned())
}

fn parse_api_url(raw: Option<&str>) -> Result<url::Url, ConfigError> {
    let Some(raw) = present(raw) else {
        return Err(ConfigError::new(
            "API_URL",
            "is required: set it to the base URL of the Outpost service, e.g. https://outpost.example.com",
        ));
    };
    let bad = || {
        ConfigError::new(
            "API_URL",
            format!("must be an http:// or https:// URL (got {})", echo(raw)),
        )
    };
    // The URL parser silently drops tabs and line breaks; a value with any is a mistake.
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    let url = url::Url::parse(raw).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::new(
            "API_URL",
            "must not contain a user name or password",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::new(
            "API_URL",
            format!("must not have a query or fragment (got {})", echo(raw)),
        ));
    }
    Ok(url)
}

fn parse_bounded<T>(
    variable: &'static str,
    raw: Option<&str>,
    min: T,
    max: T,
    default: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(raw) = present(raw) else {
        return Ok(default);
    };
    match raw.parse::<T>() {
        Ok(v) if v >= min && v <= max => Ok(v),
        _ => Err(ConfigError::new(
            variable,
            format!("must be an integer from {min} to {max} (got {})", echo(raw)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "pl_0123456789abcdef";

    fn base() -> AgentArgs {
        AgentArgs {
            api_key: Some(KEY.to_owned()),
            api_url: Some("https://outpost.example.com".to_owned()),
            ..AgentArgs::default()
        }
    }

    fn error_of(args: AgentArgs) -> ConfigError {
        AgentConfig::from_args(&args).expect_err("should be rejected")
    }

    /// The message is one line, starts with the variable and never shows the key.
    fn assert_one_line_naming(err: &ConfigError, variable: &str) {
        let text = err.to_string();
        assert_eq!(err.variable, variable);
        assert!(text.starts_with(variable), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert!(!text.contains(KEY), "{text}");
    }

    #[test]
    fn defaults() {
        let c = AgentConfig::from_args(&base()).unwrap();
        assert_eq!(c.api_key, KEY);
        assert_eq!(c.api_url.as_str(), "https://outpost.example.com/");
        assert_eq!(c.job_concurrency, 1);
        assert_eq!(c.uptime_concurrency, 100);
        assert_eq!(c.health_addr, "0.0.0.0:8081".parse().unwrap());
        assert!(c.external_observability);
        assert_eq!(c.shutdown_grace, Duration::from_secs(300));
        let hex = hex::encode(Sha256::digest(KEY.as_bytes()));
        assert_eq!(
            c.spool_dir,
            std::env::temp_dir().join(format!("outpost-spool-{}", &hex[..12]))
        );
        assert!(!format!("{c:?}").contains(KEY));
    }

    #[test]
    fn explicit_values() {
        let c = AgentConfig::from_args(&AgentArgs {
            job_concurrency: Some("10".into()),
            uptime_concurrency: Some(" 1000 ".into()),
            health_port: Some("0".into()),
            health_host: Some("127.0.0.1".into()),
            external_observability: Some("OFF".into()),
            shutdown_grace_seconds: Some("0".into()),
            spool_dir: Some("/var/spool/x".into()),
            ..base()
        })
        .unwrap();
        assert_eq!(c.job_concurrency, 10);
        assert_eq!(c.uptime_concurrency, 1000);
        assert_eq!(c.health_addr, "127.0.0.1:0".parse().unwrap());
        assert!(!c.external_observability);
        assert_eq!(c.shutdown_grace, Duration::ZERO);
        assert_eq!(c.spool_dir, PathBuf::from("/var/spool/x"));
        for off in ["false", "0", "off"] {
            let c = AgentConfig::from_args(&AgentArgs {
                external_observability: Some(off.into()),
                ..base()
            })
            .unwrap();
            assert!(!c.external_observability, "{off}");
        }
        let c = AgentConfig::from_args(&AgentArgs {
            job_concurrency: Some("".into()),
            ..base()
        })
        .unwrap();
        assert_eq!(c.job_concurrency, 1, "blank counts as unset");
    }

    #[test]
    fn api_key_missing_or_blank() {
        for key in [None, Some(""), Some("   ")] {
            let err = error_of(AgentArgs {
                api_key: key.map(str::to_owned),
                ..base()
            });
            assert_one_line_naming(&err, "API_KEY");
            assert!(err.to_string().contains("required"));
        }
        let err = error_of(AgentArgs {
            api_key: Some("abc def".into()),
            ..base()
        });
        assert_one_line_naming(&err, "API_KEY");
        assert!(!err.to_string().contains("abc def"));
    }

    #[test]
    fn api_url_missing_or_invalid() {
        let err = error_of(AgentArgs {
            api_url: None,
            ..base()
        });
        assert_one_line_naming(&err, "API_URL");
        for bad in [
            "outpost.example.com",
            "ftp://x.example.com",
            "http://",
            "https://a.example.com/?x=1",
            "https://u:p@a.example.com/",
            "http://a\nb",
        ] {
            let err = error_of(AgentArgs {
                api_url: Some(bad.into()),
                ..base()
            });
            assert_one_line_naming(&err, "API_URL");
        }
        let err = error_of(AgentArgs {
            api_url: Some("https://u:secret@a.example.com/".into()),
            ..base()
        });
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn numbers_out_of_range_name_their_variable() {
        type Setter = fn(&mut AgentArgs, String);
        let cases: [(&str, Setter); 4] = [
            ("JOB_CONCURRENCY", |a, v| a.job_concurrency = Some(v)),
            ("UPTIME_CONCURRENCY", |a, v| a.uptime_concurrency = Some(v)),
            ("AGENT_HEALTH_PORT", |a, v| a.health_port = Some(v)),
            ("SHUTDOWN_GRACE_SECONDS", |a, v| {
                a.shutdown_grace_seconds = Some(v)
            }),
        ];
        for (variable, set) in cases {
            for bad in ["abc", "-1", "1.5", "99999999", "100000000000000000000"] {
                let mut args = base();
                set(&mut args, bad.to_owned());
                let err = error_of(args);
                assert_one_line_naming(&err, variable);
            }
        }
        let err = error_of(AgentArgs {
            job_concurrency: Some("abc".into()),
            ..base()
        });
        assert_eq!(
            err.to_string(),
            r#"JOB_CONCURRENCY must be an integer from 1 to 10 (got "abc")"#
        );
        for bad in ["0", "11"] {
            let err = error_of(AgentArgs {
                job_concurrency: Some(bad.into()),
                ..base()
            });
            assert_one_line_naming(&err, "JOB_CONCURRENCY");
        }
        for bad in ["0", "1001"] {
            let err = error_of(AgentArgs {
                uptime_concurrency: Some(bad.into()),
                ..base()
            });
            assert_one_line_naming(&err, "UPTIME_CONCURRENCY");
        }
    }

    #[test]
    fn other_invalid_values() {
        let err = error_of(AgentArgs {
            external_observability: Some("maybe".into()),
            ..base()
        });
        assert_one_line_naming(&err, "EXTERNAL_OBSERVABILITY");
        let err = error_of(AgentArgs {
            health_host: Some("localhost".into()),
            ..base()
        });
        assert_one_line_naming(&err, "AGENT_HEALTH_HOST");
        let long = "x".repeat(500);
        let err = error_of(AgentArgs {
            job_concurrency: Some(long),
            ..base()
        });
        assert!(err.to_string().len() < 200);
    }
}

//! The `outpost` binary: argument parsing and process exit codes. Everything else
//! lives in the library; anyhow is used only here, at the edge.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

use outpost::agent::{self, AgentArgs, AgentConfig};
use outpost::executors::{self, ExecEnv};
use outpost::model::{CheckSpec, RunStatus};
use outpost::service::alerts::email::SmtpConfig;
use outpost::service::{BoundService, ServeConfig};
use outpost::shutdown::{Shutdown, install_signal_handlers};
use outpost::telemetry::{self, LogFormat, LogLevel};

#[derive(Parser)]
#[command(name = "outpost", version, about = "Self-hosted synthetic monitoring")]
struct Cli {
    /// DEBUG, LOG, INFO, WARN or ERROR.
    #[arg(long, global = true, env = "LOG_LEVEL", default_value = "INFO")]
    log_level: String,
    /// Log lines as text or JSON.
    #[arg(
        long,
        global = true,
        env = "LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane.
    Serve(ServeArgs),
    /// Run the private-location agent (configured by the reference agent's environment).
    Agent(AgentArgs),
    /// Run the control plane and one agent in one process, creating credentials on first start.
    Up(UpArgs),
    /// Administer tenants (accounts, API keys, private locations, agent keys) in a data directory.
    Admin(outpost::admin_cli::AdminArgs),
    /// Run one check definition (a JSON file, `-` for stdin) and print its result as JSON.
    /// Exit 0 passed, 1 failed or degraded, 2 bad input.
    Check {
        /// Path of the check document: the body of `POST /v1/checks/<type>`.
        file: PathBuf,
        /// Write the run's artifacts (packet capture, traceroute of a network failure)
        /// into this directory; without it they are only listed in the result.
        #[arg(long, value_name = "DIR")]
        artifacts_dir: Option<PathBuf>,
    },
    /// Deploy a project file (YAML, TOML or JSON) of heartbeat monitors and alert
    /// channels; prints `<logical id> <ping URL>` per monitor. Exit 2 bad input, 1
    /// service errors.
    Deploy {
        /// The project file (.yaml, .yml, .toml or .json).
        file: PathBuf,
        /// The credentials.json that `outpost up`/`serve` writes; without it
        /// OUTPOST_API_URL, OUTPOST_API_KEY and OUTPOST_ACCOUNT_ID are read.
        #[arg(long, value_name = "PATH")]
        credentials: Option<PathBuf>,
        /// Print the changes (`<action> <type> <logical id>`) without making them.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(clap::Args, Clone)]
struct ServeArgs {
    /// Address the control plane listens on.
    #[arg(long, env = "OUTPOST_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Where the SQLite database, artifacts and credentials live.
    #[arg(long, env = "OUTPOST_DATA_DIR", default_value = "./outpost-data")]
    data_dir: PathBuf,
    /// Public base URL used in links (default: http://<listen>).
    #[arg(long, env = "OUTPOST_PUBLIC_URL")]
    public_url: Option<url::Url>,
    /// Seconds a job lease lives without renewal.
    #[arg(long, env = "OUTPOST_LEASE_TTL_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(2..=600))]
    lease_ttl_secs: u64,
    /// Base URL of heartbeat ping addresses (default: <public url>/ping).
    #[arg(long, env = "OUTPOST_PING_URL")]
    ping_url: Option<url::Url>,
    /// SMTP server of e-mail alerts: smtp://host:port, smtp://host:port?tls=required or
    /// smtps://user:pass@host:port (prefer the environment variable for a password).
    #[arg(
        long,
        env = "OUTPOST_SMTP_URL",
        hide_env_values = true,
        requires = "smtp_from"
    )]
    smtp_url: Option<String>,
    /// Sender of e-mail alerts: alerts@example.com or "Outpost <alerts@example.com>".
    #[arg(long, env = "OUTPOST_SMTP_FROM")]
    smtp_from: Option<String>,
}

impl ServeArgs {
    fn config(&self) -> ServeConfig {
        ServeConfig {
            listen: self.listen,
            data_dir: self.data_dir.clone(),
            public_url: self.public_url.clone(),
            lease_ttl: Duration::from_secs(self.lease_ttl_secs),
            // --ping-url (OUTPOST_PING_URL); none: <public url>/ping.
            ping_url: self.ping_url.clone(),
            smtp: self.smtp_url.clone().map(|url| SmtpConfig {
                url,
                from: self.smtp_from.clone().unwrap_or_default(),
            }),
        }
    }
}

#[derive(clap::Args, Clone)]
struct UpArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Port of the embedded agent's health server.
    #[arg(long, env = "AGENT_HEALTH_PORT", default_value_t = 8081)]
    health_port: u16,
    /// Seconds running jobs get to finish after SIGTERM.
    #[arg(long, env = "SHUTDOWN_GRACE_SECONDS", default_value_t = 300)]
    shutdown_grace_seconds: u64,
    /// `off` disables the embedded agent's error reports.
    #[arg(long, env = "EXTERNAL_OBSERVABILITY")]
    external_observability: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(level) = LogLevel::parse(&cli.log_level) else {
        eprintln!(
            "error: LOG_LEVEL must be one of DEBUG, LOG, INFO, WARN, ERROR (got {:?})",
            cli.log_level
        );
        return ExitCode::from(2);
    };
    telemetry::init(level, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Check {
                file,
                artifacts_dir,
            } => run_check(&file, artifacts_dir.as_deref()).await,
            Command::Admin(args) => outpost::admin_cli::run(args).await,
            Command::Deploy {
                file,
                credentials,
                dry_run,
            } => match outpost::deploy::run(&file, credentials.as_deref(), dry_run).await {
                Ok(lines) => {
                    for line in lines {
                        println!("{line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(e.exit_code())
                }
            },
            command => match run_daemon(command).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::FAILURE
                }
            },
        }
    })
}

async fn run_daemon(command: Command) -> anyhow::Result<()> {
    let shutdown = Shutdown::new();
    install_signal_handlers(shutdown.clone()).context("installing signal handlers")?;
    match command {
        Command::Serve(args) => {
            let service = BoundService::bind(args.config()).await?;
            service.ensure_credentials().await?;
            tracing::info!(
                addr = %service.local_addr(),
                credentials = %args.data_dir.join("credentials.json").display(),
                "control plane listening"
            );
            service.serve(shutdown).await?;
        }
        Command::Agent(args) => {
            let config = match AgentConfig::from_args(&args) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            agent::run(config, shutdown).await?;
        }
        Command::Up(args) => {
            let external_observability = match agent::config::parse_external_observability(
                args.external_observability.as_deref(),
            ) {
                Ok(on) => on,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            run_up(args, external_observability, shutdown).await?
        }
        Command::Check { .. } | Command::Admin(_) | Command::Deploy { .. } => {
            unreachable!("handled before")
        }
    }
    Ok(())
}

/// `outpost up`: the control plane plus one agent of its default location. On shutdown
/// the agent drains first (its results still reach the service), then the service stops.
async fn run_up(
    args: UpArgs,
    external_observability: bool,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let service = BoundService::bind(args.serve.config()).await?;
    let creds = service.ensure_credentials().await?;
    let addr = service.local_addr();
    println!(
        "Outpost is running.\n  API:              {}\n  account id:       {}\n  API key:          {}\n  private location: {}\n  credentials file: {}\n\nTry:\n  curl -H 'Authorization: Bearer {}' -H 'x-service-account: {}' {}/v1/checks\n",
        creds.api_url,
        creds.account_id,
        creds.api_key,
        creds.private_location,
        args.serve.data_dir.join("credentials.json").display(),
        creds.api_key,
        creds.account_id,
        creds.api_url,
    );
    let agent_config = AgentConfig {
        api_key: creds.agent_key.clone(),
        api_url: url::Url::parse(&format!("http://{addr}"))
            .context("building the agent's API URL")?,
        job_concurrency: 1,
        uptime_concurrency: 100,
        health_addr: SocketAddr::from(([0, 0, 0, 0], args.health_port)),
        external_observability,
        shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        spool_dir: args.serve.data_dir.join("spool"),
    };
    let service_shutdown = Shutdown::new();
    let server = tokio::spawn(service.serve(service_shutdown.clone()));
    let agent_result = agent::run(agent_config, shutdown).await;
    service_shutdown.trigger();
    let served = server.await.context("control plane task")?;
    agent_result?;
    served?;
    Ok(())
}

/// Largest check document `outpost check` reads.
const MAX_CHECK_FILE_BYTES: u64 = 1024 * 1024;

async fn run_check(file: &std::path::Path, artifacts_dir: Option<&std::path::Path>) -> ExitCode {
    let doc = match read_check_document(file).await {
        Ok(doc) => doc,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let spec = match CheckSpec::from_document(&doc) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("error: invalid check definition: {e}");
            return ExitCode::from(2);
        }
    };
    let env = match ExecEnv::from_system() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let executors::RunOutput { result, artifacts } =
        executors::run_check_with_artifacts(&spec, &env).await;
    if let Some(dir) = artifacts_dir
        && let Err(e) = write_artifacts(dir, &artifacts).await
    {
        eprintln!(
            "error: cannot write the artifacts to {}: {e}",
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    match serde_json::to_string_pretty(&result) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("error: cannot print the result: {e}");
            return ExitCode::FAILURE;
        }
    }
    if result.status == RunStatus::Passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Writes each artifact as `dir/<name>` (names are plain file names, `[A-Za-z0-9._-]`).
async fn write_artifacts(
    dir: &std::path::Path,
    artifacts: &[executors::netdiag::Artifact],
) -> std::io::Result<()> {
    tokio::fs::create_dir_all(dir).await?;
    for artifact in artifacts {
        let safe = !artifact.name.is_empty()
            && !artifact.name.starts_with('.')
            && artifact
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !safe {
            return Err(std::io::Error::other(format!(
                "refusing the artifact name {:?}",
                artifact.name
            )));
        }
        tokio::fs::write(dir.join(&artifact.name), &artifact.bytes).await?;
    }
    Ok(())
}

async fn read_check_document(file: &std::path::Path) -> Result<serde_json::Value, String> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let read = if file.as_os_str() == "-" {
        tokio::io::stdin()
            .take(MAX_CHECK_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .await
    } else {
        match tokio::fs::File::open(file).await {
            Ok(f) => {
                f.take(MAX_CHECK_FILE_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .await
            }
            Err(e) => Err(e),
        }
    };
    read.map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if bytes.len() as u64 > MAX_CHECK_FILE_BYTES {
        return Err(format!(
            "{} is larger than {} bytes",
            file.display(),
            MAX_CHECK_FILE_BYTES
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{} is not valid JSON: {e}", file.display()))
}

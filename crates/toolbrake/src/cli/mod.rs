//! Command-line surface: one module per subcommand.
//!
//! Commands print through [`outln!`] and [`out!`], which return the write error instead of
//! panicking: `toolbrake sessions | head -1` ends quietly when the reader goes away.

/// `println!` that returns the error (a closed pipe) from the enclosing function.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($t)*)?
    }};
}

/// `print!` that returns the error (a closed pipe) from the enclosing function.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($t)*)?
    }};
}

/// `eprintln!` that never panics (a closed stderr is ignored).
macro_rules! warn {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

mod artifacts;
mod config;
mod explain;
mod feedback;
mod hook;
mod init;
mod mcp;
mod operate;
mod replay;
mod sessions;
mod traces;
mod tune;
mod ui;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use toolbrake_http::HttpLimits;

/// What an HTTP listener (`ui`, `mcp --listen`) grants its connections.
#[derive(Debug, clap::Args)]
pub struct Connections {
    /// Seconds a connection has to send a whole request head (headers included) before it
    /// is closed; slow or silent clients cannot hold connections open.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = HttpLimits::HEADER_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub header_timeout: u64,
    /// Connections served at once; further ones wait, unaccepted, for a free slot.
    #[arg(
        long,
        value_name = "N",
        default_value_t = HttpLimits::MAX_CONNECTIONS as u64,
        value_parser = clap::value_parser!(u64).range(1..=65536)
    )]
    pub max_connections: u64,
}

impl Connections {
    /// The limits these flags set.
    pub fn limits(&self) -> HttpLimits {
        HttpLimits {
            header_timeout: Duration::from_secs(self.header_timeout),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        }
    }
}

/// A circuit breaker for AI agents' tool calls.
#[derive(Debug, Parser)]
#[command(name = "toolbrake", version, about, long_about = None)]
pub struct Cli {
    /// Configuration file (default lookup: $TOOLBRAKE_CONFIG, ./toolbrake.toml,
    /// $XDG_CONFIG_HOME/toolbrake/config.toml, built-in defaults).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// Whether this command judges recorded events in bulk (a replay, a sweep): the binary
    /// gives those a faster allocator. Not a hook, which would pay its start-up on every
    /// tool call, and not the MCP proxy, whose calls come one at a time with cold caches:
    /// there mimalloc measured no faster and its CPU per message a little higher
    /// (BENCHMARKS.md, issue 26, sixth round).
    pub fn judges_in_bulk(&self) -> bool {
        matches!(self.command, Command::Replay(_) | Command::Tune(_))
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(hide = true)]
    Man,
    /// Validate or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Replay protocol events (or recorded runs) through the engines: one output line per event.
    Replay(replay::Args),
    /// Replay recorded runs under a sweep of thresholds: waste stopped and harmful stops
    /// per setting, the frontier, and the recommended `toolbrake.toml` change.
    Tune(tune::Args),
    /// Serve the protocol as a long-running sidecar: one answer line per event, at once.
    Serve {
        /// Speak the protocol on stdin/stdout.
        #[arg(long, required = true)]
        stdio: bool,
        #[command(flatten)]
        operate: operate::Operate,
    },
    /// Handle one coding-agent hook event (stdin JSON) and answer on stdout. Never
    /// blocks the host by accident: on its own failure it lets the call run (unless
    /// `[store] fail_closed = true`).
    Hook {
        /// The host's dialect.
        #[arg(value_enum)]
        dialect: HookDialect,
        /// The event this hook was installed for, for hosts whose payloads do not name it
        /// (GitHub Copilot CLI: `toolbrake hook copilot preToolUse`).
        event: Option<String>,
    },
    /// Install toolbrake's hooks into an agent's settings (Claude Code, Codex, Gemini CLI,
    /// GitHub Copilot CLI, Qwen Code, Cursor, Factory Droid) or its hook files (Cline), or
    /// its plugin into opencode's or Kilo Code's configuration (or remove them).
    /// Refuses to install hooks while the configuration is invalid.
    Init {
        /// The host.
        #[arg(value_enum)]
        dialect: InitHost,
        /// The user's settings (~/.claude/settings.json, ~/.codex/hooks.json,
        /// ~/.config/opencode/opencode.json, ~/.config/kilo/kilo.json): the default.
        #[arg(long, conflicts_with_all = ["project", "local"])]
        user: bool,
        /// This project's shared settings (.claude/settings.json, .codex/hooks.json,
        /// opencode.json, kilo.json), which teams commit: every teammate needs `toolbrake`
        /// on PATH (the plugin: the Node package at the same path).
        #[arg(long, conflicts_with = "local")]
        project: bool,
        /// This project's personal settings (.claude/settings.local.json, which Claude Code
        /// keeps out of version control). Claude Code only.
        #[arg(long)]
        local: bool,
        /// Remove toolbrake's hooks (or plugin) instead.
        #[arg(long)]
        remove: bool,
        /// opencode and Kilo Code: the folder of toolbrake's Node package, built
        /// (`bindings/node` after `npm ci && npm run build`, or where it is installed).
        #[arg(long, value_name = "DIR")]
        plugin: Option<PathBuf>,
    },
    /// Put toolbrake in front of an MCP server: speak MCP on stdio to the client, run
    /// the server as a child, and judge every tools/call.
    Mcp(mcp::Server),
    /// Serve the dashboard: live sessions, their recent decisions, and the settings form.
    Ui {
        /// Address to listen on (beyond loopback only with a token).
        #[arg(long, default_value = "127.0.0.1:4477")]
        listen: std::net::SocketAddr,
        /// Require this token on every request (Authorization: Bearer, or ?token= once).
        #[arg(long, env = "TOOLBRAKE_UI_TOKEN", hide_env_values = true)]
        token: Option<String>,
        #[command(flatten)]
        connections: Connections,
    },
    /// List stored sessions, or reset one.
    Sessions {
        #[command(subcommand)]
        action: Option<SessionsCommand>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Mark a stored run: a stop in it was mistaken (`--mistaken`), or it was stuck
    /// (`--stuck`). Kept with the session; calibration reads it.
    Feedback {
        /// The session key, as `toolbrake sessions` lists it.
        session: String,
        #[command(flatten)]
        verdict: feedback::Verdict,
    },
    /// Show how a call is identified: canonical JSON, hash, and every fingerprint.
    Explain {
        /// Also show what this session's state says of the call (its streak, failure
        /// streaks, window counts, the unchanged track and cycles), read from the store.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Tool name, e.g. `bash`.
        tool: String,
        /// Arguments as JSON, e.g. '{"command":"ls"}'; `-` reads them from stdin.
        args: String,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HookDialect {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// GitHub Copilot CLI.
    Copilot,
    /// Qwen Code.
    Qwen,
    /// Cursor.
    Cursor,
    /// Cline.
    Cline,
    /// Factory Droid.
    Factory,
}

/// The hosts `toolbrake init` configures.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum InitHost {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// opencode (a plugin: the Node package).
    Opencode,
    /// Kilo Code's CLI (an opencode fork: the same plugin).
    Kilo,
    /// GitHub Copilot CLI.
    Copilot,
    /// Qwen Code.
    Qwen,
    /// Cursor.
    Cursor,
    /// Cline (hook files).
    Cline,
    /// Factory Droid.
    Factory,
}

impl From<HookDialect> for toolbrake_hooks::Dialect {
    fn from(d: HookDialect) -> Self {
        use toolbrake_hooks::Dialect as D;
        match d {
            HookDialect::Claude => D::Claude,
            HookDialect::Codex => D::Codex,
            HookDialect::Gemini => D::Gemini,
            HookDialect::Copilot => D::Copilot,
            HookDialect::Qwen => D::Qwen,
            HookDialect::Cursor => D::Cursor,
            HookDialect::Cline => D::Cline,
            HookDialect::Factory => D::Factory,
        }
    }
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Forget one session (its counts, streaks, exemptions and refusals).
    Reset {
        /// The session key, as `toolbrake sessions` lists it.
        key: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a configuration file (or the one the lookup finds) and print the effective configuration.
    Check {
        /// The file to check.
        path: Option<PathBuf>,
    },
    /// Print a commented configuration file holding the defaults.
    Default,
}

/// Whether an error is the reader of our output going away (a closed pipe): not a failure
/// of the command, so it ends quietly.
pub fn is_closed_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Errors reported to the user with exit code 2.
pub type CliError = Box<dyn std::error::Error>;

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Completions { shell } => artifacts::completions(shell),
        Command::Man => artifacts::man(),
        Command::Config(ConfigCommand::Check { path }) => {
            config::check(path.or(cli.config).as_deref())
        }
        Command::Config(ConfigCommand::Default) => config::default(),
        Command::Explain {
            session,
            tool,
            args,
        } => explain::run(cli.config.as_deref(), session.as_deref(), &tool, &args),
        Command::Replay(args) => replay::replay(cli.config.as_deref(), args),
        Command::Tune(args) => tune::run(cli.config.as_deref(), args),
        Command::Serve { stdio: _, operate } => replay::serve(cli.config.as_deref(), &operate),
        Command::Hook { dialect, event } => Ok(hook::run(
            cli.config.as_deref(),
            dialect.into(),
            event.as_deref(),
        )),
        Command::Mcp(server) => mcp::run(cli.config.as_deref(), server),
        Command::Init {
            dialect,
            user: _,
            project,
            local,
            remove,
            plugin,
        } => {
            let scope = match (project, local) {
                (true, _) => init::Scope::Project,
                (_, true) => init::Scope::Local,
                _ => init::Scope::User,
            };
            let hook_dialect = match dialect {
                InitHost::Claude => Some(toolbrake_hooks::Dialect::Claude),
                InitHost::Codex => Some(toolbrake_hooks::Dialect::Codex),
                InitHost::Gemini => Some(toolbrake_hooks::Dialect::Gemini),
                InitHost::Copilot => Some(toolbrake_hooks::Dialect::Copilot),
                InitHost::Qwen => Some(toolbrake_hooks::Dialect::Qwen),
                InitHost::Cursor => Some(toolbrake_hooks::Dialect::Cursor),
                InitHost::Cline => Some(toolbrake_hooks::Dialect::Cline),
                InitHost::Factory => Some(toolbrake_hooks::Dialect::Factory),
                InitHost::Opencode | InitHost::Kilo => None,
            };
            match (hook_dialect, plugin) {
                (Some(_), Some(_)) => Err("--plugin is for opencode and kilo, which load toolbrake as a plugin; the other hosts run `toolbrake hook`".into()),
                (Some(d), None) => init::init(cli.config.as_deref(), d, scope, remove),
                (None, plugin) => {
                    let host = if matches!(dialect, InitHost::Kilo) {
                        init::PluginHost::Kilo
                    } else {
                        init::PluginHost::Opencode
                    };
                    init::init_plugin(host, scope, remove, plugin.as_deref())
                }
            }
        }
        Command::Ui {
            listen,
            token,
            connections,
        } => ui::run(cli.config.as_deref(), listen, token, connections.limits()),
        Command::Feedback { session, verdict } => {
            feedback::run(cli.config.as_deref(), &session, &verdict)
        }
        Command::Sessions { action, json } => match action {
            None => sessions::list(cli.config.as_deref(), json),
            Some(SessionsCommand::Reset { key }) => sessions::reset(cli.config.as_deref(), &key),
        },
    }
}

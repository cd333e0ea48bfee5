//! The name this project had before it was toolbrake, and only what `init` needs of it.
//!
//! Builds from before the rename installed hooks that run `<path>/loopbrake hook DIALECT`,
//! Cline hook files marked as written by `loopbrake init cline`, GitHub Copilot CLI's
//! `hooks/loopbrake.json`, and opencode / Kilo Code plugin entries naming a Node package
//! called `loopbrake`. That program is gone once toolbrake replaces it, and a hook whose
//! program is gone breaks the host (exit 127: Copilot denies every call, the others run
//! unchecked). So `init` replaces such entries with its own, and `init --remove` removes
//! them with its own. Nothing else reads this name: not the configuration, not the state,
//! not the environment.

/// The former name of the command, the Node package and the files named after them.
pub const NAME: &str = "loopbrake";

/// The mark line of a Cline hook file a build from before the rename wrote.
pub fn cline_mark() -> String {
    format!("# Written by `{NAME} init cline`")
}

//! `kevo sandbox-exec` (hidden): confine this process, then become the
//! command. kevo runs a confined `cmd:` proposer (`cmd_sandbox = true` in
//! the model settings) through it, since a process can confine only
//! itself, and only while it has one thread.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use kevo_worker::kevo_sandbox::{self, Layer, Options};

#[derive(clap::Args)]
pub struct SandboxExecArgs {
    /// The command's directory: the only place it may write.
    #[arg(long)]
    pub dir: PathBuf,
    /// More paths it may read (repeatable), besides the system directories
    /// and its directory.
    #[arg(long)]
    pub readable: Vec<PathBuf>,
    /// Let it reach the network (files stay confined).
    #[arg(long)]
    pub network: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Confine, check that what must hold does, and exec the command. A
/// layer this machine lacks is an error: a call asked to be confined
/// never runs unconfined.
pub fn sandbox_exec(args: SandboxExecArgs) -> Result<ExitCode> {
    let options = Options {
        enabled: true,
        required: false,
        scratch: Some(args.dir.clone()),
        writable: Vec::new(),
        readable: args.readable.clone(),
        // Sockets are the network's: with it allowed, the namespace, the
        // TCP rules and the socket filter go; files and scopes stay.
        skip: if args.network {
            vec![Layer::Namespaces, Layer::Tcp, Layer::Syscalls]
        } else {
            Vec::new()
        },
    };
    let status = kevo_sandbox::enter(&options)?;
    let status = kevo_sandbox::filter_syscalls(&options, status)?;
    let mut lacking = Vec::new();
    if status.filesystem.is_none() {
        lacking.push("file confinement (Landlock)");
    }
    if !status.no_new_privileges {
        lacking.push("no new privileges");
    }
    if !args.network && (status.network.is_empty() || status.syscalls.is_none()) {
        lacking.push("no network (namespace or Landlock TCP rules, and the socket filter)");
    }
    if !lacking.is_empty() {
        bail!(
            "cannot confine the command on this machine: no {} ({})",
            lacking.join(", no "),
            status.summary()
        );
    }
    let err = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    bail!("cannot run `{}`: {err}", args.command[0])
}

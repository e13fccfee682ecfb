//! `kevo tool`: the tools of an external run's pending proposal (a run
//! created with `--llm external --agent-tools`), for an agent whose turns
//! happen away from the GPU host. One call (`kevo tool RUN ID check
//! kernel.cu`), or every request waiting in a mailbox folder, carried to
//! the GPU host with the workspace and back with the replies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kevo_evolve::ToolRequest;
use serde::{Deserialize, Serialize};

use crate::asktell::{environment, runtime};
use crate::evolve::StoreArgs;

/// A request file's suffix; its reply is written beside it.
const REQUEST: &str = ".req.json";
const REPLY: &str = ".reply.json";
/// Files one request may carry, and their size in all (a kernel or two).
const MAX_FILES: usize = 8;
const MAX_FILES_BYTES: usize = 1 << 20;

/// `kevo tool`'s arguments.
#[derive(clap::Args)]
pub struct ToolArgs {
    /// The run (created with --llm external --agent-tools).
    #[arg(required_unless_present = "mailbox")]
    run: Option<String>,
    /// The pending proposal the call belongs to (`kevo ask` printed it).
    #[arg(required_unless_present = "mailbox")]
    proposal: Option<i64>,
    /// The call, as `kevo-tool` takes it: compile FILE, check FILE, time
    /// FILE [SIZE...], profile FILE SIZE, show parent|incumbent|elite N,
    /// sizes.
    #[arg(required_unless_present = "mailbox")]
    request: Vec<String>,
    /// Where the files the call names are read (no further: a name that
    /// resolves outside it is refused).
    #[arg(long, default_value = ".", conflicts_with = "mailbox")]
    dir: PathBuf,
    /// Answer every `NAME.req.json` in this folder that has no
    /// `NAME.reply.json` yet ({"run", "proposal", "request", "files":
    /// {name: text}}), each reply written beside its request.
    #[arg(long, conflicts_with_all = ["run", "proposal", "request"])]
    mailbox: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

/// A request left in a mailbox.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mailed {
    run: String,
    proposal: i64,
    request: String,
    #[serde(default)]
    files: BTreeMap<String, String>,
}

/// Its reply.
#[derive(Debug, Serialize)]
struct Replied {
    ok: bool,
    text: String,
}

pub fn tool(args: ToolArgs) -> Result<ExitCode> {
    if let Some(mailbox) = &args.mailbox {
        return answer_mailbox(mailbox, &args.store);
    }
    let (Some(run), Some(proposal)) = (&args.run, args.proposal) else {
        bail!("kevo tool needs RUN, PROPOSAL and a request, or --mailbox DIR");
    };
    let request = ToolRequest {
        proposal,
        line: args.request.join(" "),
        dir: args.dir.clone(),
    };
    let replies = runtime()?.block_on(async {
        let env = environment(&args.store).await?;
        let run = env.store.resolve_run(run).await?;
        Ok::<_, anyhow::Error>(kevo_evolve::answer_tools(&run.0, &[request], &env).await?)
    })?;
    let reply = &replies[0];
    println!("{}", reply.text.trim_end());
    Ok(if reply.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Every unanswered request of `mailbox`, by run, in the order of their
/// file names. A request that cannot be read, or whose run refuses (a
/// finished run, an answered proposal), gets that as its reply.
fn answer_mailbox(mailbox: &Path, store: &StoreArgs) -> Result<ExitCode> {
    let mut names: Vec<String> = std::fs::read_dir(mailbox)
        .with_context(|| format!("cannot read the mailbox {}", mailbox.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(REQUEST).map(str::to_string))
        .filter(|n| !mailbox.join(format!("{n}{REPLY}")).exists())
        .collect();
    names.sort();
    let scratch = tempfile::tempdir().context("no scratch folder for the requests' files")?;
    let mut by_run: BTreeMap<String, Vec<(String, ToolRequest)>> = BTreeMap::new();
    for name in &names {
        match read_request(mailbox, name, scratch.path()) {
            Ok((run, request)) => by_run.entry(run).or_default().push((name.clone(), request)),
            Err(e) => write_reply(mailbox, name, false, &format!("{e:#}"))?,
        }
    }
    let answered = runtime()?.block_on(async {
        let env = environment(store).await?;
        let mut answered = 0;
        for (run, requests) in &by_run {
            let calls: Vec<ToolRequest> = requests.iter().map(|(_, r)| r.clone()).collect();
            let replies = match env.store.resolve_run(run).await {
                Ok(id) => kevo_evolve::answer_tools(&id.0, &calls, &env)
                    .await
                    .map_err(anyhow::Error::from),
                Err(e) => Err(e.into()),
            };
            for (i, (name, _)) in requests.iter().enumerate() {
                match &replies {
                    Ok(r) => write_reply(mailbox, name, r[i].ok, &r[i].text)?,
                    Err(e) => write_reply(mailbox, name, false, &format!("{e:#}"))?,
                }
                answered += 1;
            }
        }
        Ok::<_, anyhow::Error>(answered)
    })?;
    println!(
        "answered {} request(s) in {} ({answered} reached a run)",
        names.len(),
        mailbox.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Request `name`: its run, and the call with its files written into a
/// folder of its own under `scratch` (plain names only, within limits).
fn read_request(mailbox: &Path, name: &str, scratch: &Path) -> Result<(String, ToolRequest)> {
    let path = mailbox.join(format!("{name}{REQUEST}"));
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mailed: Mailed = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a tool request", path.display()))?;
    if mailed.files.len() > MAX_FILES
        || mailed.files.values().map(String::len).sum::<usize>() > MAX_FILES_BYTES
    {
        bail!("a request carries at most {MAX_FILES} files of {MAX_FILES_BYTES} bytes in all");
    }
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (file, content) in &mailed.files {
        let plain = !file.is_empty()
            && !file.starts_with('.')
            && file
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !plain {
            bail!("`{file}` is not a plain file name (letters, digits, '.', '_', '-')");
        }
        std::fs::write(dir.join(file), content).with_context(|| format!("cannot write {file}"))?;
    }
    let request = ToolRequest {
        proposal: mailed.proposal,
        line: mailed.request,
        dir,
    };
    Ok((mailed.run, request))
}

fn write_reply(mailbox: &Path, name: &str, ok: bool, text: &str) -> Result<()> {
    let path = mailbox.join(format!("{name}{REPLY}"));
    let json = serde_json::to_vec_pretty(&Replied {
        ok,
        text: text.to_string(),
    })?;
    kevo_store::artifacts::write_atomic(&path, &json)
        .with_context(|| format!("cannot write {}", path.display()))
}

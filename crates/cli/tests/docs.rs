//! The docs check: every `kevo ...` line in a fenced code block of
//! README.md and docs/guide/*.md must name a real subcommand and only flags
//! that the subcommand's `--help` lists, so the docs cannot drift from the
//! binary unnoticed. A few cheap commands that need no device and no
//! network are also run and must succeed.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One `kevo` command line of a document: where it starts and its words.
#[derive(Debug)]
struct DocCommand {
    file: String,
    line: usize,
    words: Vec<String>,
}

/// What `kevo <path> --help` offers: its subcommands and its long flags.
#[derive(Debug, Default)]
struct Help {
    commands: BTreeSet<String>,
    flags: BTreeSet<String>,
}

/// `kevo <path> --help` for each path asked, run once per path: the docs
/// name the same subcommands many times.
struct HelpCache {
    helps: HashMap<Vec<String>, Option<Help>>,
}

impl HelpCache {
    fn new() -> Self {
        HelpCache {
            helps: HashMap::new(),
        }
    }

    /// The help of `path`, or None when kevo does not know that path.
    fn get(&mut self, path: &[String]) -> Option<&Help> {
        self.helps
            .entry(path.to_vec())
            .or_insert_with(|| {
                let out = kevo_help(path);
                out.status
                    .success()
                    .then(|| parse_help(&String::from_utf8_lossy(&out.stdout)))
            })
            .as_ref()
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kevo_help(path: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap()
}

/// The documents whose commands users copy: the README and the guide.
fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    guide.sort();
    files.extend(guide);
    files
}

/// Every `kevo` command in the fenced code blocks of `text`, numbered by
/// the line it starts on. Lines ending in `\` continue on the next one.
fn extract(file: &str, text: &str) -> Vec<DocCommand> {
    let mut found = Vec::new();
    let mut in_fence = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            pending = None;
            continue;
        }
        if !in_fence {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(line.trim());
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, format!("{head} ")));
            continue;
        }
        let words = shell_words(&joined);
        if words.first().is_some_and(|w| w == "kevo") {
            let file = file.to_string();
            found.push(DocCommand {
                file,
                line: start,
                words,
            });
        }
    }
    found
}

/// The words of one shell line up to a comment, a pipe, a redirection or a
/// second command; a leading `$ ` prompt is dropped.
fn shell_words(line: &str) -> Vec<String> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    line.split_whitespace()
        .take_while(|w| !w.starts_with('#') && !["|", ">", ">>", "<", "&&", ";"].contains(w))
        .map(str::to_string)
        .collect()
}

/// The long flags a command line uses, by name (`--llm=x` is `--llm`;
/// `[--n K]` and `--a|--b` as written in usage lines count too).
fn flags_used(words: &[String]) -> Vec<String> {
    words
        .iter()
        .flat_map(|w| w.split('|'))
        .map(|w| w.trim_start_matches(['[', '(']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            let name: String = w[2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            format!("--{name}")
        })
        .collect()
}

/// The subcommands and long flags of a clap help text: the first word of
/// each line under `Commands:`, and each `--flag` that opens an option line.
fn parse_help(text: &str) -> Help {
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed == "Commands:" {
            in_commands = true;
            continue;
        }
        if trimmed.is_empty() || !line.starts_with(' ') {
            in_commands = false;
            continue;
        }
        if in_commands {
            let name = trimmed.split_whitespace().next().unwrap_or_default();
            help.commands.insert(name.to_string());
        } else if trimmed.starts_with('-') {
            help.flags.extend(option_names(trimmed));
        }
    }
    help
}

/// The long names that open one option line (`-h, --help  Print help`),
/// stopping at its first word that is not an option or a value name.
fn option_names(line: &str) -> Vec<String> {
    line.split_whitespace()
        .map(|w| w.trim_end_matches(','))
        .take_while(|w| w.starts_with('-') || w.starts_with('<'))
        .filter(|w| {
            w.starts_with("--")
                && w[2..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        .map(str::to_string)
        .collect()
}

/// The subcommand path of a command line (`kevo task new x` is
/// `["task", "new"]`): a second word counts only where the first has
/// subcommands of its own. Err names the word kevo does not know.
fn command_path(cmd: &DocCommand, cli: &mut HelpCache) -> Result<Vec<String>, String> {
    let mut path: Vec<String> = Vec::new();
    for word in cmd.words.iter().skip(1) {
        let Some(help) = cli.get(&path) else {
            return Err(format!("`kevo {}` does not exist", path.join(" ")));
        };
        if help.commands.is_empty() || word.starts_with('-') {
            break;
        }
        if !help.commands.contains(word) {
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" {}", path.join(" "))
            };
            return Err(format!("unknown subcommand `{word}` of `kevo{at}`"));
        }
        path.push(word.clone());
    }
    Ok(path)
}

/// What is wrong with one documented command, as `file:line: ...` lines.
fn problems(cmd: &DocCommand, cli: &mut HelpCache) -> Vec<String> {
    let at = format!("{}:{}: `{}`", cmd.file, cmd.line, cmd.words.join(" "));
    let path = match command_path(cmd, cli) {
        Ok(path) => path,
        Err(why) => return vec![format!("{at}: {why}")],
    };
    let Some(help) = cli.get(&path) else {
        return vec![format!("{at}: `kevo {}` has no help", path.join(" "))];
    };
    let needs_sub = !help.commands.is_empty();
    let asks_help = cmd.words.iter().any(|w| w == "--help" || w == "-h");
    let mut found = Vec::new();
    if needs_sub && !asks_help && !path.is_empty() {
        found.push(format!(
            "{at}: `kevo {}` needs a subcommand",
            path.join(" ")
        ));
    }
    for flag in flags_used(&cmd.words) {
        if !help.flags.contains(&flag) {
            let sub = path.join(" ");
            found.push(format!("{at}: `{flag}` is not a flag of `kevo {sub}`"));
        }
    }
    found
}

/// Every problem of every command in `commands`, checked against the binary.
fn check_all(commands: &[DocCommand]) -> Vec<String> {
    let mut cli = HelpCache::new();
    commands
        .iter()
        .flat_map(|c| problems(c, &mut cli))
        .collect()
}

#[test]
fn documented_commands_name_real_subcommands_and_flags() {
    let root = repo_root();
    let mut commands = Vec::new();
    for path in doc_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        commands.extend(extract(&name, &text));
    }
    // A broken extractor would find nothing and pass; the docs hold dozens.
    assert!(
        commands.len() >= 40,
        "only {} commands found",
        commands.len()
    );
    let bad = check_all(&commands);
    assert!(
        bad.is_empty(),
        "{} bad command lines in the docs:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The check itself must fail on a wrong flag, subcommand or
/// sub-subcommand, name the right line, and ignore text outside fences.
#[test]
fn the_docs_check_reports_bad_lines_with_file_and_line() {
    let text = "Prose: `kevo eval --no-such-flag` is not checked.\n\
                ```sh\n\
                kevo eval --task saxpy --sizes smoke   # fine\n\
                kevo eval --task saxpy --no-such-flag\n\
                kevo frobnicate --task saxpy\n\
                kevo task renew my-task\n\
                kevo evolve --task heat2d \\\n    --llm openai:gpt-5 --itrations 4\n\
                kevo ask <run> --n 2 --json > out.json\n\
                cargo build --release\n\
                ```\n\
                kevo eval --bogus\n";
    let commands = extract("inline.md", text);
    assert_eq!(commands.len(), 6, "{commands:?}");
    let bad = check_all(&commands);
    let expected = [
        "inline.md:4: `kevo eval --task saxpy --no-such-flag`: `--no-such-flag` is not a flag of `kevo eval`",
        "inline.md:5: `kevo frobnicate --task saxpy`: unknown subcommand `frobnicate` of `kevo`",
        "inline.md:6: `kevo task renew my-task`: unknown subcommand `renew` of `kevo task`",
        "inline.md:7: `kevo evolve --task heat2d --llm openai:gpt-5 --itrations 4`: `--itrations` is not a flag of `kevo evolve`",
    ];
    assert_eq!(bad, expected);
}

/// Runs `kevo args` in `dir` with the workspace and cache kept there.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .current_dir(dir)
        .env("KEVO_WORKSPACE", dir.join(".kevo"))
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .env_remove("KEVO_STORE")
        .output()
        .unwrap()
}

/// Commands the docs show that need no device, model or network must
/// actually work, not only parse.
#[test]
fn cheap_documented_commands_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = "__global__ void f(float* a) { a[threadIdx.x] = 1.0f; }\n";
    std::fs::write(dir.path().join("k.cu"), kernel).unwrap();
    let runs: [&[&str]; 9] = [
        &["--help"],
        &["--version"],
        &["tasks"],
        &["tasks", "--json"],
        &[
            "config",
            "show",
            "--task",
            "heat2d",
            "--llm",
            "openai:gpt-5",
        ],
        &["completions", "bash"],
        &["task", "new", "my-task", "--from", "heat2d"],
        &["translate", "k.cu"],
        &["runs"],
    ];
    for args in runs {
        let out = run_in(dir.path(), args);
        // An empty workspace lists no runs: said on stderr, nothing created.
        let said = if args == ["runs"] {
            &out.stderr
        } else {
            &out.stdout
        };
        assert!(
            out.status.success() && !said.is_empty(),
            "kevo {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(dir.path().join("my-task/task.toml").is_file());
}

/// docs/guide/settings.md is `kevo config keys`, so the reference cannot
/// drift from the definitions; `KEVO_DOCS_UPDATE=1` rewrites it.
#[test]
fn the_settings_reference_is_generated_from_the_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["config", "keys"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let page = repo_root().join("docs/guide/settings.md");
    if std::env::var_os("KEVO_DOCS_UPDATE").is_some() {
        std::fs::write(&page, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        written == generated,
        "docs/guide/settings.md differs from `kevo config keys`; run the test with KEVO_DOCS_UPDATE=1"
    );
    for flag in ["--timeout", "--no-sandbox", "--strategy-seed", "--history"] {
        assert!(generated.contains(&format!("`{flag}")), "{flag} missing");
    }
}

//! `kevo task new` and `kevo task check`: scaffold a task folder from a
//! working example, and validate one before it scores anything (its
//! definition, its reference at every size, its seed at every size, and
//! whether its check rejects kernels that skip the work).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use kevo_eval::Evaluator;
use kevo_tasks::folder::{FolderTask, ReferenceDef};
use kevo_tasks::{SizeSet, Task};
use kevo_worker::{Worker, WorkerCommand};
use serde_json::{Value, json};

use crate::settings::{ConfigFileArg, DeviceArgs};

#[derive(Subcommand)]
pub enum TaskCommand {
    /// Make a task folder NAME (a runnable task, copied from an example
    /// under examples/tasks) to edit into your own.
    New {
        /// The new task's name; the folder is created as ./NAME (or under --dir).
        name: String,
        /// The example to start from.
        #[arg(long, default_value = "saxpy", value_parser = EXAMPLE_NAMES)]
        from: String,
        /// The directory to create the folder in (default: the current one).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Validate a task folder: its definition, its reference at every size,
    /// its seed at every size (held out included), and its check against
    /// null candidates (a kernel that writes nothing, zeros, a constant, or
    /// copies an input must fail). Exit 0 when all holds, 1 when something
    /// does not, 2 when the folder is not a task.
    Check {
        path: PathBuf,
        #[command(flatten)]
        device: Box<DeviceArgs>,
        /// Size sets to check (repeatable; default smoke and full: large
        /// sizes take GiBs and minutes, check them when you will use them).
        #[arg(long)]
        sizes: Vec<SizeSet>,
        #[command(flatten)]
        config: ConfigFileArg,
        #[arg(long)]
        json: bool,
    },
}

/// The files of examples/tasks/NAME (the eight every example has, and
/// `extra` ones), built into the binary so that `task new` works wherever
/// kevo is installed.
macro_rules! example {
    ($name:literal $(, $extra:literal)*) => {
        (
            $name,
            &[$((
                $extra,
                include_str!(concat!("../../../examples/tasks/", $name, "/", $extra)),
            ),)*
            ("task.toml", include_str!(concat!("../../../examples/tasks/", $name, "/task.toml"))),
            ("brief.md", include_str!(concat!("../../../examples/tasks/", $name, "/brief.md"))),
            ("seed.cu", include_str!(concat!("../../../examples/tasks/", $name, "/seed.cu"))),
            ("seed.cl", include_str!(concat!("../../../examples/tasks/", $name, "/seed.cl"))),
            ("signature.cu", include_str!(concat!("../../../examples/tasks/", $name, "/signature.cu"))),
            ("signature.cl", include_str!(concat!("../../../examples/tasks/", $name, "/signature.cl"))),
            ("reference.cu", include_str!(concat!("../../../examples/tasks/", $name, "/reference.cu"))),
            ("reference.cl", include_str!(concat!("../../../examples/tasks/", $name, "/reference.cl"))),
            ] as &[(&str, &str)],
        )
    };
}

/// The examples `kevo task new --from` copies: a one-launch task, a
/// stencil whose state ping-pongs over steps, and a multi-output task with
/// vector buffers and two ping-pong pairs.
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    example!("saxpy", "reference.py"),
    example!("heat2d"),
    example!("nbody"),
];

const EXAMPLE_NAMES: [&str; 3] = ["saxpy", "heat2d", "nbody"];

pub fn task(command: TaskCommand) -> Result<ExitCode> {
    match command {
        TaskCommand::New { name, from, dir } => new(&name, &from, dir.as_deref()),
        TaskCommand::Check {
            path,
            device,
            sizes,
            config,
            json,
        } => check(&path, &device, &sizes, &config, json),
    }
}

fn new(name: &str, from: &str, dir: Option<&Path>) -> Result<ExitCode> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.starts_with(|c: char| c.is_ascii_alphabetic());
    if !valid {
        bail!(
            "task name `{name}`: expected a letter, then letters, digits, `-` or `_` \
             (at most 64), as it names the folder and the task's runs"
        );
    }
    if kevo_tasks::Registry::builtin().get(name).is_ok() {
        bail!("task name `{name}` is a built-in task's; choose another");
    }
    let (_, files) = EXAMPLES
        .iter()
        .find(|(n, _)| *n == from)
        .with_context(|| format!("--from {from}: no such example"))?;
    let root = dir.unwrap_or(Path::new(".")).join(name);
    if root.exists() {
        bail!(
            "{} already exists; kevo task new makes a new folder",
            root.display()
        );
    }
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    for (file, text) in *files {
        let text = if *file == "task.toml" {
            rename_task(text, name)
        } else {
            text.to_string()
        };
        std::fs::write(root.join(file), text)
            .with_context(|| format!("cannot write {}", root.join(file).display()))?;
    }
    // What was written must load: the example is a working task.
    FolderTask::load(&root).map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "created {} from the {from} example: a runnable task. Edit task.toml, the brief and \
         the kernels, then run `kevo task check {}`; `kevo eval --task {}` scores its seed.",
        root.display(),
        root.display(),
        root.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The example's task.toml with its `name = "..."` line set to `name`.
fn rename_task(toml: &str, name: &str) -> String {
    let mut out = String::with_capacity(toml.len());
    let mut done = false;
    for line in toml.lines() {
        if !done && line.trim_start().starts_with("name = ") {
            out.push_str(&format!("name = \"{name}\""));
            done = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// One finding of `task check`: what was checked, whether it holds, and
/// the details.
struct Finding {
    what: String,
    ok: bool,
    detail: String,
}

fn check(
    path: &Path,
    device: &DeviceArgs,
    sets: &[SizeSet],
    config: &ConfigFileArg,
    json_out: bool,
) -> Result<ExitCode> {
    let sets = if sets.is_empty() {
        vec![SizeSet::Smoke, SizeSet::Full]
    } else {
        sets.to_vec()
    };
    let folder = match FolderTask::load(path) {
        Ok(f) => f,
        Err(e) => {
            if json_out {
                println!(
                    "{}",
                    json!({"ok": false, "error": e.to_string(), "file": e.file, "key": e.key})
                );
            } else {
                eprintln!("error: {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let mut findings = definition_findings(&folder);
    let task: &'static Task = kevo_tasks::register(folder.into_task())?;
    let path_text = path.display().to_string();
    let settings = crate::settings::evaluation_settings(
        config,
        Some(&path_text),
        Some(sets[0]),
        None,
        false,
        device,
    )?;
    let worker_config = settings.worker_config()?;
    let seed = worker_config
        .eval
        .inputs_secret
        .expect("worker_config draws one")
        .timed_seed(task.default_seed());

    // The reference and the check's strength, in this process: the task's
    // own code and kernels only, no candidate.
    let mut evaluator = crate::candidate::open_evaluator(&worker_config)?;
    let dialect = evaluator.backend().info().dialect;
    for &set in &sets {
        findings.extend(reference_findings(&mut evaluator, task, set, seed));
    }
    drop(evaluator);

    // The seed, and a kernel reference as a candidate (its times are the
    // baseline a speedup is measured against), through the confined worker.
    let mut worker = Worker::start(WorkerCommand::current_exe()?, worker_config)?;
    let scores = kernel_findings(&mut worker, (task, dialect), &sets, &mut findings)?;
    let ok = findings.iter().all(|f| f.ok);
    if json_out {
        print_findings_json(task, ok, &findings, scores)?;
    } else {
        print_findings(task, path, &worker, &findings);
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What loading the folder established (its definition holds at every
/// size), and whether its inputs change with the seed.
fn definition_findings(folder: &FolderTask) -> Vec<Finding> {
    let reference_kind = match &folder.reference {
        ReferenceDef::Kernel(k) => format!(
            "kernel ({})",
            k.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
        ReferenceDef::Command(c) => format!("command {c:?}"),
        ReferenceDef::Golden(d) => format!("golden files under {d}/"),
    };
    let definition = Finding {
        what: "definition".into(),
        ok: true,
        detail: format!(
            "{}, {}, {}, {}, dialects {}; every \
             expression whole and in range at every size; reference: {reference_kind}",
            counted(folder.buffers.len(), "buffer"),
            counted(folder.scalars.len(), "scalar"),
            counted(folder.launches.len(), "launch"),
            counted(folder.checks.len(), "checked output"),
            folder
                .dialects
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let random = folder.buffers.iter().any(|b| {
        matches!(
            b.init,
            Some(
                kevo_tasks::folder::Init::Uniform { .. }
                    | kevo_tasks::folder::Init::Normal { .. }
                    | kevo_tasks::folder::Init::Integers { .. }
            )
        )
    });
    let inputs = Finding {
        what: "inputs".into(),
        ok: true,
        detail: if random {
            "drawn from the seed: each verification run uses fresh inputs".into()
        } else {
            "WARNING: no input depends on the seed, so the verification runs repeat the timed \
             inputs and cannot catch a kernel that replays an answer; prefer random starts"
                .into()
        },
    };
    vec![definition, inputs]
}

/// How each kind of null candidate fared against the check over the
/// sizes of a set: the first size where it passed, and the detail of the
/// last rejection.
struct Screened {
    kind: String,
    passed: Option<String>,
    last: String,
}

/// One size set: the reference at every size (held out included), and the
/// folder's null candidates (a kernel that writes nothing, zeros, a
/// constant, or copies an input) against the check at each.
fn reference_findings(
    evaluator: &mut Evaluator<Box<dyn kevo_backend::Backend>>,
    task: &Task,
    set: SizeSet,
    seed: u64,
) -> Vec<Finding> {
    let folder = task.folder().expect("registered from a folder");
    let plan = task.sizes(set);
    let mut findings = Vec::new();
    let mut reference_times = Vec::new();
    let mut reference_ok = true;
    let mut screened: Vec<Screened> = Vec::new();
    for size in plan.in_distribution.iter().chain([&plan.held_out]) {
        let started = Instant::now();
        let found = folder
            .expected_at(size, seed)
            .map_err(|e| e.to_string())
            .and_then(|_| {
                evaluator
                    .reference_at(task, size, seed)
                    .map_err(|e| e.to_string())
            });
        let (problem, reference) = match found {
            Ok(r) => r,
            Err(e) => {
                findings.push(Finding {
                    what: format!("reference at {set} {}", size.label),
                    ok: false,
                    detail: e,
                });
                reference_ok = false;
                continue;
            }
        };
        reference_times.push(format!(
            "{} {:.3} s",
            size.label,
            started.elapsed().as_secs_f64()
        ));
        screen_nulls(task, size, &problem, &reference, &mut screened);
    }
    if reference_ok {
        findings.push(Finding {
            what: format!("reference at the {set} sizes"),
            ok: true,
            detail: reference_times.join(", "),
        });
    }
    findings.extend(screened.into_iter().map(|s| null_finding(s, set)));
    findings
}

/// The folder's null candidates at one size through the task's check,
/// tallied by kind.
fn screen_nulls(
    task: &Task,
    size: &kevo_tasks::Size,
    problem: &kevo_tasks::Problem,
    reference: &kevo_tasks::Reference,
    screened: &mut Vec<Screened>,
) {
    let folder = task.folder().expect("registered from a folder");
    let expected = &reference
        .downcast_ref::<kevo_tasks::folder::ExpectedOutputs>()
        .expect("a folder task's reference is its expected outputs")
        .0;
    for null in folder.folder().null_candidates(problem, expected) {
        let verdict = task.check(size, problem, reference, &null.outputs);
        let at = match screened.iter().position(|s| s.kind == null.kind) {
            Some(at) => at,
            None => {
                screened.push(Screened {
                    kind: null.kind.clone(),
                    passed: None,
                    last: String::new(),
                });
                screened.len() - 1
            }
        };
        let detail = format!(
            "{} = {:.4}{}",
            verdict.metric,
            verdict.value,
            verdict
                .tolerance
                .map_or(String::new(), |t| format!(" (needs {t})"))
        );
        if verdict.passed && screened[at].passed.is_none() {
            screened[at].passed = Some(format!("{} at {}: {detail}", null.name, size.label));
        } else if !verdict.passed {
            screened[at].last = detail;
        }
    }
}

/// A kind of null candidate the check must reject at every size.
fn null_finding(s: Screened, set: SizeSet) -> Finding {
    Finding {
        what: format!("a kernel that {} ({set})", s.kind),
        ok: s.passed.is_none(),
        detail: match s.passed {
            Some(how) => format!(
                "PASSES the check ({how}): the check cannot tell it from a kernel \
                 that does the work; tighten atol/rtol, raise `within`, or add a \
                 cosine floor or a peak_error"
            ),
            None => format!("rejected at every size (last: {})", s.last),
        },
    }
}

/// The seed and (where the folder has one) the reference kernel, as
/// candidates at every size of every set; their evaluations by "ROLE SET".
fn kernel_findings(
    worker: &mut Worker,
    (task, dialect): (&Task, kevo_backend::Dialect),
    sets: &[SizeSet],
    findings: &mut Vec<Finding>,
) -> Result<serde_json::Map<String, Value>> {
    let mut kernels = vec![("seed", task.seed(dialect).map(str::to_string))];
    if let Some(reference) = task.device_reference(dialect) {
        kernels.push(("reference kernel", Some(reference.to_string())));
    }
    let mut scores = serde_json::Map::new();
    for (role, source) in kernels {
        let Some(source) = source else {
            findings.push(Finding {
                what: format!("{role} ({dialect})"),
                ok: false,
                detail: format!("the folder offers no {dialect} kernel for this device"),
            });
            continue;
        };
        for &set in sets {
            let plan = task.sizes(set);
            let mut sizes = plan.in_distribution.clone();
            sizes.push(plan.held_out.clone());
            let timeout = std::time::Duration::from_secs(900);
            let evaluation = worker.evaluate(task, &source, &sizes, timeout);
            let times: Vec<String> = evaluation
                .sizes
                .iter()
                .map(|s| format!("{} {:.4} ms", s.label, s.time.median_s * 1e3))
                .collect();
            findings.push(Finding {
                what: format!("{role} at the {set} sizes ({dialect})"),
                ok: evaluation.outcome.is_correct(),
                detail: format!("{}; {}", evaluation.outcome.summary(), times.join(", ")),
            });
            scores.insert(format!("{role} {set}"), serde_json::to_value(&evaluation)?);
        }
    }
    Ok(scores)
}

/// The findings and the kernels' evaluations as JSON.
fn print_findings_json(
    task: &Task,
    ok: bool,
    findings: &[Finding],
    scores: serde_json::Map<String, Value>,
) -> Result<()> {
    let value = json!({
        "ok": ok,
        "task": task.name(),
        "version": task.content_hash(),
        "findings": findings.iter().map(|f| json!({"what": f.what, "ok": f.ok, "detail": f.detail})).collect::<Vec<Value>>(),
        "evaluations": scores,
    });
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// The findings as text, and whether the task is ready.
fn print_findings(task: &Task, path: &Path, worker: &Worker, findings: &[Finding]) {
    println!(
        "task {} ({}, version {}) on {}",
        task.name(),
        path.display(),
        task.content_hash(),
        worker.device().name
    );
    for f in findings {
        println!(
            "{} {}: {}",
            if f.ok { "ok  " } else { "FAIL" },
            f.what,
            f.detail
        );
    }
    let failed = findings.iter().filter(|f| !f.ok).count();
    if failed == 0 {
        println!("the folder defines a usable task");
    } else {
        println!("{failed} problem(s): the task is not ready to score candidates");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_folder_is_embedded_whole_and_renames() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks");
        let mut on_disk: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = EXAMPLES.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
        assert_eq!(EXAMPLE_NAMES.len(), EXAMPLES.len());
        for (name, files) in EXAMPLES {
            let mut disk: Vec<String> = std::fs::read_dir(root.join(name))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            disk.sort();
            let mut listed: Vec<String> = files.iter().map(|(f, _)| f.to_string()).collect();
            listed.sort();
            assert_eq!(disk, listed, "{name}");
            let toml = files.iter().find(|(f, _)| *f == "task.toml").unwrap().1;
            let renamed = rename_task(toml, "mine");
            assert!(renamed.contains("\nname = \"mine\"\n"), "{name}");
            assert_eq!(renamed.matches("name = \"mine\"").count(), 1, "{name}");
        }
    }
}

/// "1 launch", "2 launches": a count with its noun in the right number.
fn counted(n: usize, noun: &str) -> String {
    match (n, noun.ends_with(['s', 'h', 'x'])) {
        (1, _) => format!("1 {noun}"),
        (_, true) => format!("{n} {noun}es"),
        (_, false) => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod counted_tests {
    #[test]
    fn one_is_singular_and_other_counts_plural() {
        assert_eq!(super::counted(1, "launch"), "1 launch");
        assert_eq!(super::counted(2, "launch"), "2 launches");
        assert_eq!(super::counted(0, "buffer"), "0 buffers");
        assert_eq!(super::counted(3, "checked output"), "3 checked outputs");
    }
}

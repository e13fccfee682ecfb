//! `kevo kernelbench import`: KernelBench problems as task folders.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use kevo_kernelbench as kb;

#[derive(clap::Subcommand)]
pub enum KernelBenchCommand {
    /// Convert KernelBench problems into task folders: each problem's
    /// module is probed through Python (torch), screened against null
    /// candidates, timed eagerly and with torch.compile (--time), and
    /// written as a folder whose reference is the module itself.
    Import(ImportArgs),
    /// Evaluate each imported problem's seed (or --kernels DIR/<task>.cu)
    /// at the full size and report correct rate, speedup over the eager
    /// and torch.compile baselines the import timed, fast_p (p = 0, 1,
    /// 1.5, 2) and kevo's roofline fraction.
    Eval(EvalArgs),
}

#[derive(clap::Args)]
pub struct EvalArgs {
    /// The folder `kevo kernelbench import --out` wrote.
    pub dir: PathBuf,
    /// Kernels to evaluate instead of the seeds: DIR/<task>.cu or .cl.
    #[arg(long)]
    pub kernels: Option<PathBuf>,
    #[command(flatten)]
    pub device: Box<crate::settings::DeviceArgs>,
    /// Size set: full (the problem's own size, the default) or smoke.
    #[arg(long)]
    pub sizes: Option<kevo_tasks::SizeSet>,
    /// Print JSON lines instead of the table: one per problem as soon as
    /// it is evaluated (a run cut short keeps what it measured), then one
    /// with the `summary`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A KernelBench checkout (or a folder holding level1/, level2/), or
    /// the name of an installed Python package that holds them.
    pub source: String,
    /// Which level: 1 (single operators) or 2 (fusions).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub level: u8,
    /// Problems by id: `1,3,19-25` (default all of the level).
    #[arg(long, default_value = "")]
    pub problems: String,
    /// Where the task folders go (one per problem), with screen.json.
    #[arg(long)]
    pub out: PathBuf,
    /// The interpreter with torch and numpy; it also runs each folder's
    /// reference command.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Where the probe runs the module: cpu or cuda.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Time the eager module (the speedup's baseline) on --device;
    /// problems under 10 µs eager are then dropped.
    #[arg(long)]
    pub time: bool,
    /// With --time, leave out torch.compile's baseline (timed by default:
    /// speedups are reported against the faster of eager and compiled;
    /// compilation takes tens of seconds per problem, outside the timing).
    #[arg(long, requires = "time")]
    pub no_compile: bool,
    /// Seed kernels: DIR/<problem>.cu (CUDA) and DIR/<problem>.cl
    /// (OpenCL), e.g. DIR/19_ReLU.cu. A problem without one is not
    /// written.
    #[arg(long)]
    pub seeds: Option<PathBuf>,
    /// A published screen to add to the probe's (JSON lines keyed by
    /// `p`, e.g. `level1/19_ReLU.py`, with zero4, const4, ident4,
    /// inpindep4 and det4), such as an H200 survey of every problem.
    #[arg(long)]
    pub survey: Option<PathBuf>,
    /// Write problems the screen would drop too (their flags are kept in
    /// kernelbench.json).
    #[arg(long)]
    pub keep_flagged: bool,
    /// The check's tau (every element within tau (|ref| + rms(ref))) is
    /// this many times the worst error of the honest variants (the module
    /// in float64, and in float32 on the CPU)...
    #[arg(long, default_value_t = 16.0)]
    pub tolerance_margin: f64,
    /// ...and at least this (fast-math exp errs up to about 2e-6 of the
    /// output's scale; float16 and TF32 rounding up to 4.9e-4), and at
    /// least a naive float32 sum's error over the problem's reduction
    /// length (4 x 2^-24 sqrt(terms): 1.5e-5 at 4096 terms).
    #[arg(long, default_value_t = 1e-5)]
    pub tolerance_floor: f64,
    /// Seconds one problem's probe may run (import, screen and timing)
    /// before it is stopped and the problem reported as failed.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_timeout: u64,
    /// Kernels in sequence per problem (`stage1`..`stageN`, sharing a
    /// scratch buffer). Default: 2 where forward() reduces over a matrix
    /// product or convolution (a GEMM then a norm or softmax), else 1.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub stages: Option<u8>,
    /// Print the screen as JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn kernelbench(command: KernelBenchCommand) -> Result<ExitCode> {
    match command {
        KernelBenchCommand::Import(args) => import(args),
        KernelBenchCommand::Eval(args) => eval(args),
    }
}

/// One problem's line of the screen.
#[derive(Debug, serde::Serialize)]
struct Line {
    problem: String,
    task: Option<String>,
    status: &'static str,
    eager_ms: Option<f64>,
    compile_ms: Option<f64>,
    flags: Vec<String>,
    error: Option<String>,
    /// Kernels in sequence, for a written problem.
    stages: Option<usize>,
}

fn import(args: ImportArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        args.tolerance_margin.is_finite()
            && args.tolerance_margin >= 1.0
            && args.tolerance_floor.is_finite()
            && args.tolerance_floor > 0.0
            && args.tolerance_floor < 1.0,
        "--tolerance-margin must be at least 1 and --tolerance-floor in (0, 1), got {} and {}",
        args.tolerance_margin,
        args.tolerance_floor
    );
    anyhow::ensure!(
        matches!(args.device.as_str(), "cpu" | "cuda"),
        "--device is cpu or cuda, not {}",
        args.device
    );
    let survey = match &args.survey {
        Some(path) => kb::read_survey(
            &std::fs::read_to_string(path)
                .with_context(|| format!("--survey: cannot read {}", path.display()))?,
        )
        .map_err(|e| anyhow::anyhow!("--survey {}: {e}", path.display()))?,
        None => Default::default(),
    };
    let problems = selected_problems(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let importing = Importing {
        args: &args,
        survey,
        scratch: tempfile::tempdir()?,
        probe_options: kb::ProbeOptions {
            python: args.python.clone(),
            device: args.device.clone(),
            time: args.time,
            compile: args.time && !args.no_compile,
            margin: args.tolerance_margin,
            floor: args.tolerance_floor,
            timeout: std::time::Duration::from_secs(args.probe_timeout),
        },
    };
    let mut lines = Vec::new();
    for problem in &problems {
        let line = importing.problem(problem)?;
        report(&line, args.json);
        lines.push(line);
    }
    write_screen(&args, &lines)?;
    let written = lines.iter().filter(|l| l.task.is_some()).count();
    let dropped = lines.iter().filter(|l| l.status == "dropped").count();
    let failed = lines.len() - written - dropped;
    if !args.json {
        println!(
            "{} problems: {written} written, {dropped} dropped by the screen, {failed} failed; the screen is in {}",
            lines.len(),
            args.out.join("screen.json").display()
        );
    }
    Ok(if written > 0 || lines.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The level's problems, or those `--problems` names (every one of which
/// must exist).
fn selected_problems(args: &ImportArgs) -> Result<Vec<kb::Problem>> {
    let wanted = kb::parse_selection(&args.problems)?;
    let mut problems = kb::discover(&args.source, args.level, &args.python)?;
    if !wanted.is_empty() {
        let missing: Vec<String> = wanted
            .iter()
            .filter(|id| !problems.iter().any(|p| p.id == **id))
            .map(u32::to_string)
            .collect();
        anyhow::ensure!(
            missing.is_empty(),
            "--problems: level {} has no problem {}",
            args.level,
            missing.join(", ")
        );
        problems.retain(|p| wanted.contains(&p.id));
    }
    Ok(problems)
}

/// What every problem of one import is probed, screened and written with.
struct Importing<'a> {
    args: &'a ImportArgs,
    survey: std::collections::BTreeMap<String, kb::SurveyEntry>,
    scratch: tempfile::TempDir,
    probe_options: kb::ProbeOptions,
}

impl Importing<'_> {
    /// One problem probed, screened and (unless the screen drops it)
    /// written as a task folder; its line of the screen. A problem that
    /// fails is a line; only a Python that cannot run stops the import.
    fn problem(&self, problem: &kb::Problem) -> Result<Line> {
        let args = self.args;
        let mut line = Line {
            problem: problem.stem.clone(),
            task: None,
            status: "failed",
            eager_ms: None,
            compile_ms: None,
            flags: Vec::new(),
            error: None,
            stages: None,
        };
        let probe = match kb::probe(&problem.path, &self.probe_options, self.scratch.path()) {
            Ok(p) => p,
            Err(e @ kb::KernelBenchError::Python { .. }) => return Err(e.into()),
            Err(e) => {
                line.error = Some(e.to_string());
                remove_stale(&args.out, problem, &mut line);
                return Ok(line);
            }
        };
        let mut screen = kb::screen(&probe);
        if let Some(entry) = self
            .survey
            .get(&format!("level{}/{}.py", problem.level, problem.stem))
        {
            let added = kb::survey_flags(&screen, entry);
            screen.flags.extend(added);
        }
        line.eager_ms = probe.eager_ms.as_ref().and_then(kb::Timing::median_ms);
        line.compile_ms = probe.compile_ms.as_ref().and_then(kb::Timing::median_ms);
        line.flags = screen.flags.iter().map(kb::Flag::describe).collect();
        if screen.dropped() && !args.keep_flagged {
            line.status = "dropped";
            remove_stale(&args.out, problem, &mut line);
            return Ok(line);
        }
        let options = self.folder_options(problem)?;
        match kb::write_folder(problem, &probe, &screen, &args.out, &options) {
            Ok(w) => {
                line.status = if screen.dropped() {
                    "written (flagged)"
                } else {
                    "written"
                };
                line.task = Some(w.dir.display().to_string());
                line.stages = Some(w.stages);
            }
            Err(e) => {
                line.error = Some(e.to_string());
                remove_stale(&args.out, problem, &mut line);
            }
        }
        Ok(line)
    }

    /// The check's tolerances, the stages, and the problem's seed kernels
    /// from `--seeds` (a dialect without a file has none).
    fn folder_options(&self, problem: &kb::Problem) -> Result<kb::FolderOptions> {
        let args = self.args;
        let mut options = kb::FolderOptions::new(&args.python);
        options.stages = args.stages.map(usize::from);
        if let Some(dir) = &args.seeds {
            for (dialect, ext) in [("cuda", "cu"), ("opencl", "cl"), ("triton", "py")] {
                let path = dir.join(format!("{}.{ext}", problem.stem));
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        options.seeds.insert(dialect.to_string(), text);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => anyhow::bail!("--seeds: cannot read {}: {e}", path.display()),
                }
            }
        }
        Ok(options)
    }
}

/// screen.json: this import's lines, and those of problems imported into
/// this folder before (same level) and not this time, by problem id.
fn write_screen(args: &ImportArgs, lines: &[Line]) -> Result<()> {
    let screen_path = args.out.join("screen.json");
    let mut merged: Vec<serde_json::Value> = std::fs::read_to_string(&screen_path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .filter(|v| v["level"] == args.level)
        .and_then(|v| v["problems"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|old| !lines.iter().any(|l| old["problem"] == l.problem.as_str()))
        .collect();
    merged.extend(
        lines
            .iter()
            .map(|l| serde_json::to_value(l).unwrap_or_default()),
    );
    let id = |v: &serde_json::Value| {
        v["problem"]
            .as_str()
            .and_then(|p| p.split('_').next())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    };
    merged.sort_by_key(id);
    let summary = serde_json::json!({
        "level": args.level,
        "source": args.source,
        "problems": merged,
    });
    std::fs::write(&screen_path, serde_json::to_string_pretty(&summary)?)?;
    Ok(())
}

/// Remove the folder an earlier import wrote for `problem` (one holding
/// kernelbench.json), now that this import did not write it: `kevo
/// kernelbench eval` would otherwise still evaluate it.
fn remove_stale(out: &std::path::Path, problem: &kb::Problem, line: &mut Line) {
    let dir = out.join(problem.task_name());
    if dir.join("kernelbench.json").is_file() {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => line.flags.push(format!(
                "removed {}, an earlier import's folder",
                dir.display()
            )),
            Err(e) => line.flags.push(format!(
                "could not remove {} of an earlier import: {e}",
                dir.display()
            )),
        }
    }
}

fn report(line: &Line, json: bool) {
    if json {
        println!("{}", serde_json::to_string(line).unwrap_or_default());
        return;
    }
    let ms = |v: Option<f64>| {
        v.map(|m| format!("{m:.3} ms"))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:<44} {:<18} eager {:>10}  compile {:>10}",
        line.problem,
        line.status,
        ms(line.eager_ms),
        ms(line.compile_ms)
    );
    if let Some(n) = line.stages.filter(|n| *n > 1) {
        println!(
            "    {n} kernels in sequence (stage1..stage{n}): forward() reduces over a contraction"
        );
    }
    for f in &line.flags {
        println!("    {f}");
    }
    if let Some(e) = &line.error {
        for l in e.lines() {
            println!("    {l}");
        }
    }
}

/// One evaluated problem, with how long kevo took over it.
#[derive(Debug, serde::Serialize)]
struct Evaluated {
    task: String,
    #[serde(flatten)]
    result: kb::ProblemResult,
    outcome: String,
    /// Wall seconds of the whole evaluation (compile, inputs, reference,
    /// device, check) and of the compilation alone.
    evaluation_s: f64,
    compile_s: f64,
}

fn eval(args: EvalArgs) -> Result<ExitCode> {
    let folders = imported_folders(&args.dir)?;
    let size_set = args.sizes.unwrap_or(kevo_tasks::SizeSet::Full);
    let settings = crate::settings::evaluation_settings(
        &crate::settings::ConfigFileArg::default(),
        None,
        Some(size_set),
        None,
        false,
        &args.device,
    )?;
    let config = settings.worker_config()?;
    let mut worker =
        kevo_worker::Worker::start(kevo_worker::WorkerCommand::current_exe()?, config)?;
    if !args.json {
        println!(
            "{} on {} ({} sizes)",
            args.dir.display(),
            worker.device().name,
            size_set
        );
    }
    let mut rows = Vec::new();
    let mut skipped_baselines = Vec::new();
    for folder in &folders {
        // A folder that cannot be evaluated (no seed for this device's
        // dialect, a missing --kernels file) is a failed row, not the end
        // of the report.
        let row = evaluate_problem(&args, folder, &mut worker, size_set, &mut skipped_baselines)
            .unwrap_or_else(|e| not_evaluated(folder, e));
        print_row(&row, args.json)?;
        rows.push(row);
    }
    print_eval_summary(&args, &worker, size_set, &rows, &skipped_baselines)?;
    Ok(ExitCode::SUCCESS)
}

/// The folders of `dir` that an import wrote (kernelbench.json beside
/// task.toml), in order; none is an error.
fn imported_folders(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("kernelbench.json").is_file() && p.join("task.toml").is_file())
        .collect();
    folders.sort();
    anyhow::ensure!(
        !folders.is_empty(),
        "{} holds no imported problems (folders with kernelbench.json); run `kevo kernelbench import --out {}` first",
        dir.display(),
        dir.display()
    );
    Ok(folders)
}

/// One problem's kernel (its seed, or `--kernels DIR/<task>.EXT`) at the
/// set's sizes, beside the baselines its import timed where they compare
/// (the full size, on the same device); otherwise that is noted in
/// `skipped_baselines`.
fn evaluate_problem(
    args: &EvalArgs,
    folder: &std::path::Path,
    worker: &mut kevo_worker::Worker,
    size_set: kevo_tasks::SizeSet,
    skipped_baselines: &mut Vec<String>,
) -> Result<Evaluated> {
    let dialect = worker.device().dialect;
    let meta: kb::KernelBenchMeta =
        serde_json::from_str(&std::fs::read_to_string(folder.join("kernelbench.json"))?)
            .with_context(|| format!("{}: kernelbench.json is unreadable", folder.display()))?;
    let task = kevo_tasks::resolve(&folder.display().to_string())?;
    let kernel =
        match &args.kernels {
            Some(dir) => {
                let path = dir.join(format!("{}.{}", task.name(), dialect.extension()));
                Some(std::fs::read_to_string(&path).with_context(|| {
                    format!("no kernel for {} at {}", task.name(), path.display())
                })?)
            }
            None => None,
        };
    // A speedup compares one size on one device: the baselines were
    // timed at the full size on the import's --device.
    let comparable = size_set == kevo_tasks::SizeSet::Full && meta.device == worker.device().name;
    if !comparable && (meta.eager_ms.is_some() || meta.compile_ms.is_some()) {
        skipped_baselines.push(format!(
            "{}: baselines timed on {} at the full size, the kernel ran on {} at the {size_set} size",
            task.name(),
            meta.device,
            worker.device().name
        ));
    }
    let source = crate::candidate::source_for(task, &kernel, dialect)?;
    let plan = task.sizes(size_set);
    let timeout =
        crate::candidate::default_timeout(task, size_set, &plan.in_distribution, worker.ceilings());
    let e = worker.evaluate(task, &source, &plan.in_distribution, timeout);
    let correct = e.outcome.score().is_some();
    let last = e.sizes.last();
    let baseline = |t: &Option<kb::Timing>| {
        t.as_ref()
            .and_then(kb::Timing::median_ms)
            .filter(|_| comparable)
    };
    Ok(Evaluated {
        task: task.name().to_string(),
        result: kb::ProblemResult {
            problem: meta.problem.clone(),
            correct,
            kernel_ms: last.filter(|_| correct).map(|s| s.time.median_s * 1e3),
            eager_ms: baseline(&meta.eager_ms),
            compile_ms: baseline(&meta.compile_ms),
            fraction: e.outcome.score(),
        },
        outcome: e.outcome.summary(),
        evaluation_s: e.wall.total_s,
        compile_s: e.wall.compile_s,
    })
}

/// The failed row of a folder that could not be evaluated, and why.
fn not_evaluated(folder: &std::path::Path, e: anyhow::Error) -> Evaluated {
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Evaluated {
        task: name.clone(),
        result: kb::ProblemResult {
            problem: name,
            correct: false,
            kernel_ms: None,
            eager_ms: None,
            compile_ms: None,
            fraction: None,
        },
        outcome: format!("not evaluated: {e:#}"),
        evaluation_s: 0.0,
        compile_s: 0.0,
    }
}

/// A problem's row as soon as it is evaluated: a JSON line (flushed, so
/// a run cut short keeps it) or a table line.
fn print_row(row: &Evaluated, json: bool) -> Result<()> {
    let correct = row.result.correct;
    if json {
        println!("{}", serde_json::to_string(&row)?);
        std::io::Write::flush(&mut std::io::stdout())?;
        return Ok(());
    }
    let ms = |v: Option<f64>| v.map(|m| format!("{m:.4}")).unwrap_or_else(|| "-".into());
    let x = |v: Option<f64>| v.map(|m| format!("{m:.2}x")).unwrap_or_else(|| "-".into());
    println!(
        "{:<40} {:<8} kernel {:>9} ms  eager {:>9} ms ({:>7})  compile {:>9} ms ({:>7})  best {:>7}  fraction {:>6}  evaluated in {:.2} s (compile {:.2} s)",
        row.task,
        if correct { "correct" } else { "wrong" },
        ms(row.result.kernel_ms),
        ms(row.result.eager_ms),
        x(row.result.speedup()),
        ms(row.result.compile_ms),
        x(row.result.speedup_over_compile()),
        x(row.result.speedup_over_best()),
        row.result
            .fraction
            .map(|f| format!("{f:.3}"))
            .unwrap_or_else(|| "-".into()),
        row.evaluation_s,
        row.compile_s,
    );
    if !correct {
        println!("    {}", row.outcome);
    }
    Ok(())
}

/// The summary over every problem: correct rate, fast_p over both
/// baselines, geomean speedup, mean evaluation latency, and which
/// baselines did not compare.
fn print_eval_summary(
    args: &EvalArgs,
    worker: &kevo_worker::Worker,
    size_set: kevo_tasks::SizeSet,
    rows: &[Evaluated],
    skipped_baselines: &[String],
) -> Result<()> {
    let results: Vec<kb::ProblemResult> = rows.iter().map(|r| r.result.clone()).collect();
    let summary = kb::summarize(&results);
    let latencies: Vec<f64> = rows.iter().map(|r| r.evaluation_s).collect();
    let mean_latency = latencies.iter().sum::<f64>() / latencies.len().max(1) as f64;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({
                "device": worker.device().name,
                "sizes": size_set.to_string(),
                "summary": summary,
                "mean_evaluation_s": mean_latency,
                "baselines_not_compared": skipped_baselines,
            }))?
        );
        return Ok(());
    }
    let fast = |v: &[(f64, f64)]| {
        v.iter()
            .map(|(p, f)| format!("fast_{p} {:.0}%", f * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let x = |g: Option<f64>| g.map(|g| format!("{g:.2}x")).unwrap_or_else(|| "-".into());
    println!(
        "{} problems: correct {:.0}%; over the faster of eager and torch.compile: {}, geomean speedup {}; over eager: {}, geomean {}; over torch.compile: {}; mean evaluation {:.2} s",
        summary.problems,
        summary.correct_rate * 100.0,
        fast(&summary.fast_p_best),
        x(summary.geomean_speedup_best),
        fast(&summary.fast_p),
        x(summary.geomean_speedup),
        fast(&summary.fast_p_compile),
        mean_latency
    );
    for s in skipped_baselines {
        println!("no speedup for {s}");
    }
    if results.iter().all(|r| r.eager_ms.is_none()) {
        println!(
            "no baselines: import with --time --device cuda on the machine the kernels run on, and evaluate at the full size, for speedups and fast_p"
        );
    }
    Ok(())
}

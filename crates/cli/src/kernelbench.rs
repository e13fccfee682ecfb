//! `kevo kernelbench import`: KernelBench problems as task folders.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use kevo_kernelbench as kb;

#[derive(Debug, clap::Subcommand)]
pub enum KernelBenchCommand {
    /// Convert KernelBench problems into task folders: each problem's
    /// module is probed through Python (torch), screened against null
    /// candidates, timed eagerly and with torch.compile (--time), and
    /// written as a folder whose reference is the module itself.
    Import(ImportArgs),
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
    /// Time the eager module and torch.compile (the speedup's baselines)
    /// on --device; problems under 10 µs eager are then dropped.
    #[arg(long)]
    pub time: bool,
    /// Seed kernels: DIR/<problem>.cu (CUDA) and DIR/<problem>.cl
    /// (OpenCL), e.g. DIR/19_ReLU.cu. A problem without one is not
    /// written.
    #[arg(long)]
    pub seeds: Option<PathBuf>,
    /// Write problems the screen would drop too (their flags are kept in
    /// kernelbench.json).
    #[arg(long)]
    pub keep_flagged: bool,
    /// Relative tolerance of the check.
    #[arg(long, default_value_t = 1e-2)]
    pub rtol: f64,
    /// The fraction of output elements that must be within it.
    #[arg(long, default_value_t = 0.99)]
    pub within: f64,
    /// Floor on the output's cosine similarity with the reference.
    #[arg(long, default_value_t = 0.999)]
    pub cosine: f64,
    /// Print the screen as JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn kernelbench(command: KernelBenchCommand) -> Result<ExitCode> {
    match command {
        KernelBenchCommand::Import(args) => import(args),
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
}

fn import(args: ImportArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        args.rtol > 0.0 && args.within > 0.0 && args.within <= 1.0 && args.cosine <= 1.0,
        "--rtol must be positive, --within in (0, 1] and --cosine at most 1"
    );
    anyhow::ensure!(
        matches!(args.device.as_str(), "cpu" | "cuda"),
        "--device is cpu or cuda, not {}",
        args.device
    );
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
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let scratch = tempfile::tempdir()?;
    let probe_options = kb::ProbeOptions {
        python: args.python.clone(),
        device: args.device.clone(),
        time: args.time,
    };
    let mut lines = Vec::new();
    let mut screens = BTreeMap::new();
    for problem in &problems {
        let mut line = Line {
            problem: problem.stem.clone(),
            task: None,
            status: "failed",
            eager_ms: None,
            compile_ms: None,
            flags: Vec::new(),
            error: None,
        };
        let probe = match kb::probe(&problem.path, &probe_options, scratch.path()) {
            Ok(p) => p,
            Err(e @ kb::KernelBenchError::Python { .. }) => return Err(e.into()),
            Err(e) => {
                line.error = Some(e.to_string());
                report(&line, args.json);
                lines.push(line);
                continue;
            }
        };
        let screen = kb::screen(&probe);
        line.eager_ms = probe.eager_ms.as_ref().and_then(kb::Timing::median_ms);
        line.compile_ms = probe.compile_ms.as_ref().and_then(kb::Timing::median_ms);
        line.flags = screen.flags.iter().map(kb::Flag::describe).collect();
        screens.insert(
            problem.stem.clone(),
            (screen.clone(), probe.eager_ms.clone()),
        );
        if screen.dropped() && !args.keep_flagged {
            line.status = "dropped";
            report(&line, args.json);
            lines.push(line);
            continue;
        }
        let mut options = kb::FolderOptions::new(&args.python);
        options.rtol = args.rtol;
        options.within = args.within;
        options.cosine = args.cosine;
        if let Some(dir) = &args.seeds {
            for (dialect, ext) in [("cuda", "cu"), ("opencl", "cl")] {
                let path = dir.join(format!("{}.{ext}", problem.stem));
                if let Ok(text) = std::fs::read_to_string(&path) {
                    options.seeds.insert(dialect.to_string(), text);
                }
            }
        }
        match kb::write_folder(problem, &probe, &screen, &args.out, &options) {
            Ok(w) => {
                line.status = if screen.dropped() {
                    "written (flagged)"
                } else {
                    "written"
                };
                line.task = Some(w.dir.display().to_string());
            }
            Err(e) => line.error = Some(e.to_string()),
        }
        report(&line, args.json);
        lines.push(line);
    }
    let summary = serde_json::json!({
        "level": args.level,
        "source": args.source,
        "problems": lines,
    });
    std::fs::write(
        args.out.join("screen.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
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
    for f in &line.flags {
        println!("    {f}");
    }
    if let Some(e) = &line.error {
        for l in e.lines() {
            println!("    {l}");
        }
    }
}

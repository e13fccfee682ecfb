//! The benchmark tasks of kevo (the Metal-Sci suite, ported to CUDA and
//! OpenCL). Each task owns its brief, kernel signatures, seed kernels (real
//! source files under `assets/`), seeded inputs, CPU reference, check and
//! work model; the evaluator runs any of them through the same host loop.

mod block;
pub mod check;
mod entry;
mod expr;
pub mod folder;
pub mod hash;
mod host;
pub mod rng;
mod spec;
pub mod syntax;
mod task;
mod tasks {
    pub mod adi3d;
    pub mod fft3d;
    pub mod gradshaf;
    pub mod heat2d;
    pub mod hmc;
    pub mod ising;
    pub mod lbm;
    pub mod lj;
    pub mod morton;
    pub mod nbody;
    pub mod saxpy;
    pub mod wave3d;
}

use std::sync::{Arc, OnceLock};

pub use block::{BlockDeclarationError, BlockDeclarations};
pub use entry::{EntryPointError, parse_entry_points};
pub use expr::Expr;
pub use kevo_backend::VendorOp;
pub use spec::{Dim, TaskDefinitionError, TaskSpec};
pub use task::*;
pub use tasks::adi3d::Adi3d;
pub use tasks::fft3d::Fft3d;
pub use tasks::gradshaf::Gradshaf;
pub use tasks::heat2d::Heat2d;
pub use tasks::hmc::Hmc;
pub use tasks::ising::Ising;
pub use tasks::lbm::Lbm;
pub use tasks::lj::Lj;
pub use tasks::morton::Morton;
pub use tasks::nbody::Nbody;
pub use tasks::saxpy::Saxpy;
pub use tasks::wave3d::Wave3d;

/// The library code every task's reference and check build on; hashed
/// into every built-in task's [`Task::content_hash`].
const SHARED_SOURCES: [&str; 5] = [
    include_str!("check.rs"),
    include_str!("host.rs"),
    include_str!("rng.rs"),
    include_str!("hash.rs"),
    include_str!("task.rs"),
];

/// A built-in task: `assets/<name>/` (task.toml, brief.md, signature and
/// seed kernels) and the code in `src/tasks/<name>.rs`.
macro_rules! builtin {
    ($name:literal, $code:expr) => {{
        let asset = |file: &str| -> String {
            match file {
                "task.toml" => include_str!(concat!("../assets/", $name, "/task.toml")),
                "brief.md" => include_str!(concat!("../assets/", $name, "/brief.md")),
                "signature.cl" => include_str!(concat!("../assets/", $name, "/signature.cl")),
                "signature.cu" => include_str!(concat!("../assets/", $name, "/signature.cu")),
                "seed.cl" => include_str!(concat!("../assets/", $name, "/seed.cl")),
                "tunable.cl" => include_str!(concat!("../assets/", $name, "/tunable.cl")),
                "tunable.cu" => include_str!(concat!("../assets/", $name, "/tunable.cu")),
                "signature.py" => include_str!(concat!("../assets/", $name, "/signature.py")),
                "seed.py" => include_str!(concat!("../assets/", $name, "/seed.py")),
                _ => include_str!(concat!("../assets/", $name, "/seed.cu")),
            }
            .to_string()
        };
        let assets = TaskAssets {
            brief: asset("brief.md"),
            signatures: PerDialect {
                opencl: Some(asset("signature.cl")),
                cuda: Some(asset("signature.cu")),
                metal: None,
                triton: Some(asset("signature.py")),
            },
            seeds: PerDialect {
                opencl: Some(asset("seed.cl")),
                cuda: Some(asset("seed.cu")),
                metal: None,
                triton: Some(asset("seed.py")),
            },
            tunables: PerDialect {
                opencl: Some(asset("tunable.cl")),
                cuda: Some(asset("tunable.cu")),
                metal: None,
                triton: None,
            },
            references: PerDialect::default(),
        };
        let mut sources = SHARED_SOURCES.to_vec();
        sources.push(include_str!(concat!("tasks/", $name, ".rs")));
        Task::new(
            &asset("task.toml"),
            concat!("assets/", $name, "/task.toml"),
            assets,
            Arc::new($code),
            &sources,
        )
    }};
}

/// The tasks a run can name. The built-in suite is one; tasks defined in
/// folders can join it later through [`Registry::insert`].
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tasks: Vec<Arc<Task>>,
}

impl Registry {
    /// The twelve tasks of the specification, in its order.
    pub fn builtin() -> &'static Registry {
        static BUILTIN: OnceLock<Registry> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let tasks = [
                builtin!("saxpy", Saxpy),
                builtin!("heat2d", Heat2d),
                builtin!("wave3d", Wave3d),
                builtin!("nbody", Nbody),
                builtin!("hmc", Hmc),
                builtin!("lbm", Lbm),
                builtin!("ising", Ising),
                builtin!("lj", Lj),
                builtin!("gradshaf", Gradshaf),
                builtin!("fft3d", Fft3d),
                builtin!("adi3d", Adi3d),
                builtin!("morton", Morton),
            ];
            Registry {
                tasks: tasks
                    .into_iter()
                    // A built-in definition that does not load is a bug
                    // caught by this crate's tests, never a user's error.
                    .map(|t| Arc::new(t.unwrap_or_else(|e| panic!("built-in task: {e}"))))
                    .collect(),
            }
        })
    }

    /// Add `task`; a task of the same name is an error.
    pub fn insert(&mut self, task: Task) -> Result<(), TaskDefinitionError> {
        if self.tasks.iter().any(|t| t.name() == task.name()) {
            return Err(TaskDefinitionError::Invalid {
                task: task.name().to_string(),
                field: "name".into(),
                message: "a task of this name already exists".into(),
            });
        }
        self.tasks.push(Arc::new(task));
        Ok(())
    }

    pub fn tasks(&self) -> &[Arc<Task>] {
        &self.tasks
    }

    /// Look a task up by name.
    pub fn get(&self, name: &str) -> Result<Arc<Task>, UnknownTask> {
        self.tasks
            .iter()
            .find(|t| t.name() == name)
            .cloned()
            .ok_or_else(|| UnknownTask {
                name: name.to_string(),
                known: self
                    .tasks
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// kevo's cache directory: `$KEVO_CACHE_DIR`, else `$XDG_CACHE_HOME/kevo`,
/// else `~/.cache/kevo`, else a folder in the system temp directory. The
/// ceiling cache and task folders' reference answers live there (defined
/// here, the lowest crate that needs it).
pub fn cache_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    std::env::var_os("KEVO_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kevo")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kevo")))
        .unwrap_or_else(|| std::env::temp_dir().join("kevo"))
}

/// Every built-in task, in the order of the specification.
pub fn all() -> Vec<&'static Task> {
    Registry::builtin().tasks().iter().map(|t| &**t).collect()
}

/// Tasks defined by folders in this process, by name. A process holds one
/// version of a name: two folders that define the same name differently
/// would make every stored result ambiguous.
fn user_tasks() -> &'static std::sync::Mutex<Vec<&'static Task>> {
    static USER: OnceLock<std::sync::Mutex<Vec<&'static Task>>> = OnceLock::new();
    USER.get_or_init(Default::default)
}

/// Make a folder task known to [`by_name`] for the rest of the process.
/// The same task again returns the first copy; another task of a name in
/// use is refused.
pub fn register(task: Task) -> Result<&'static Task, TaskDefinitionError> {
    let clash = |message: String| TaskDefinitionError::Invalid {
        task: task.name().to_string(),
        field: "name".into(),
        message,
    };
    if Registry::builtin().get(task.name()).is_ok() {
        return Err(clash(
            "a built-in task has this name; give the folder's task another name".into(),
        ));
    }
    let mut user = user_tasks().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = user.iter().find(|t| t.name() == task.name()) {
        if known.content_hash() == task.content_hash() {
            return Ok(known);
        }
        return Err(clash(format!(
            "another task of this name (version {}) is already loaded; this one is {}",
            known.content_hash(),
            task.content_hash()
        )));
    }
    // Lives as long as the process, as a built-in task does.
    let task: &'static Task = Box::leak(Box::new(task));
    user.push(task);
    Ok(task)
}

/// Look a task up by name: the built-in ones, then those registered.
pub fn by_name(name: &str) -> Result<&'static Task, UnknownTask> {
    let builtin = Registry::builtin();
    if let Some(t) = builtin.tasks().iter().find(|t| t.name() == name) {
        return Ok(&**t);
    }
    let user = user_tasks().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = user.iter().find(|t| t.name() == name) {
        return Ok(*t);
    }
    let mut known: Vec<&str> = builtin.tasks().iter().map(|t| t.name()).collect();
    known.extend(user.iter().map(|t| t.name()));
    Err(UnknownTask {
        name: name.to_string(),
        known: known.join(", "),
    })
}

/// Whether `text` names a task folder rather than a task: it is a path
/// (has a `/`, or starts with `.`), or a directory that exists.
pub fn is_folder_reference(text: &str) -> bool {
    text.contains('/') || text.starts_with('.') || std::path::Path::new(text).is_dir()
}

/// A task by name, or the task folder at a path (`./my-task`), loaded and
/// registered so that later lookups by its name find it.
pub fn resolve(name_or_path: &str) -> Result<&'static Task, ResolveError> {
    if !is_folder_reference(name_or_path) {
        return Ok(by_name(name_or_path)?);
    }
    let folder = folder::FolderTask::load(std::path::Path::new(name_or_path))?;
    Ok(register(folder.into_task())?)
}

/// Why `--task` names no task.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Unknown(#[from] UnknownTask),
    #[error(transparent)]
    Folder(#[from] folder::FolderError),
    #[error(transparent)]
    Definition(#[from] TaskDefinitionError),
}

#[derive(Debug, thiserror::Error)]
#[error("unknown task `{name}` (known tasks: {known}; or a task folder's path, e.g. ./my-task)")]
pub struct UnknownTask {
    pub name: String,
    pub known: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_has_consistent_metadata() {
        for task in all() {
            for set in [SizeSet::Smoke, SizeSet::Full] {
                let plan = task.sizes(set);
                assert_eq!(plan.in_distribution.len(), 3, "{}", task.name());
                assert!(
                    !plan
                        .in_distribution
                        .iter()
                        .any(|s| s.label == plan.held_out.label)
                );
                for s in plan.all() {
                    assert!(task.work(s) > 0.0);
                }
            }
            // The plausibility rule's bytes never exceed the scored ones;
            // only fft3d counts less (its work model counts each complex
            // element twice).
            for s in task.sizes(SizeSet::Full).all() {
                let (scored, physical) = (task.work(s), task.plausibility_work(s));
                match task.name() {
                    "fft3d" => assert_eq!(physical * 2.0, scored, "{}", s.label),
                    _ => assert_eq!(physical, scored, "{} {}", task.name(), s.label),
                }
            }
            for set in [SizeSet::Smoke, SizeSet::Full, SizeSet::Large] {
                let plan = task.sizes(set);
                assert!(
                    !plan.validation.is_empty(),
                    "{} {set}: no validation size (--validate needs one)",
                    task.name()
                );
            }
            for d in [kevo_backend::Dialect::OpenCl, kevo_backend::Dialect::Cuda] {
                let seed = task.seed(d).expect("seed in every GPU dialect");
                let tunable = task
                    .tunable(d)
                    .expect("tunable variant in every GPU dialect");
                for k in task.kernel_names() {
                    assert!(seed.contains(k), "{} seed lacks {k}", task.name());
                    assert!(
                        tunable.contains(k),
                        "{} tunable variant lacks {k}",
                        task.name()
                    );
                }
                assert!(
                    tunable.contains("// kevo: tune "),
                    "{}'s tunable variant declares no parameter",
                    task.name()
                );
                assert!(task.signature(d).is_some());
            }
        }
    }

    #[test]
    fn hashes_differ_between_tasks_and_seeds_agree_with_the_code() {
        let hashes: std::collections::BTreeSet<&str> =
            all().iter().map(|t| t.content_hash()).collect();
        assert_eq!(hashes.len(), 12);
        assert!(hashes.iter().all(|h| h.len() == 16));
        // The code's own copies of the timed seed (lj counts P from it).
        assert_eq!(by_name("lj").unwrap().default_seed(), 0xCAFE);
        assert_eq!(by_name("hmc").unwrap().default_seed(), 0xBADC0DE);
    }

    #[test]
    fn a_second_task_of_the_same_name_is_refused() {
        let mut registry = Registry::builtin().clone();
        let saxpy = by_name("saxpy").unwrap();
        let again = Task::new(
            include_str!("../assets/saxpy/task.toml"),
            "copy",
            TaskAssets::default(),
            Arc::new(Saxpy),
            &[],
        )
        .unwrap();
        assert_ne!(again.content_hash(), saxpy.content_hash());
        let err = registry.insert(again).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
    }

    #[test]
    fn unknown_task_names_the_known_ones() {
        let e = by_name("nope").err().unwrap().to_string();
        assert!(
            e.contains("nope") && e.contains("saxpy") && e.contains("heat2d"),
            "{e}"
        );
    }

    #[test]
    fn full_sizes_match_the_specification() {
        let labels = |t: &Task| {
            let p = t.sizes(SizeSet::Full);
            (
                p.in_distribution
                    .iter()
                    .map(|s| s.label.clone())
                    .collect::<Vec<_>>(),
                p.held_out.label,
            )
        };
        assert_eq!(
            labels(by_name("saxpy").unwrap()),
            (vec!["1M".into(), "16M".into(), "64M".into()], "4M".into())
        );
        assert_eq!(
            labels(by_name("heat2d").unwrap()),
            (
                vec![
                    "256x256_50".into(),
                    "512x512_100".into(),
                    "1024x1024_50".into()
                ],
                "768x768_75".into()
            )
        );
        // Work models from the spec's derived figures.
        let heat = by_name("heat2d").unwrap().sizes(SizeSet::Full);
        assert_eq!(
            by_name("heat2d").unwrap().work(&heat.in_distribution[2]),
            419_430_400.0
        );
        assert_eq!(
            by_name("heat2d").unwrap().work(&heat.held_out),
            353_894_400.0
        );
        assert_eq!(
            by_name("saxpy").unwrap().work(
                &by_name("saxpy")
                    .unwrap()
                    .sizes(SizeSet::Full)
                    .in_distribution[2]
            ),
            805_306_368.0
        );
        let full = |t: &Task| {
            let p = t.sizes(SizeSet::Full);
            let mut v = p.in_distribution;
            v.push(p.held_out);
            v
        };
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (task, want, work) in [
            (
                by_name("wave3d").unwrap(),
                [
                    "64x64x64_30",
                    "160x160x160_20",
                    "192x192x192_15",
                    "128x128x128_20",
                ],
                [94_371_840.0, 983_040_000.0, 1_274_019_840.0, 503_316_480.0],
            ),
            (
                by_name("nbody").unwrap(),
                ["256_10", "1024_10", "2048_10", "512_10"],
                [13_107_200.0, 209_715_200.0, 838_860_800.0, 52_428_800.0],
            ),
            (
                by_name("hmc").unwrap(),
                ["d8_K16384", "d16_K4096", "d32_K1024", "d24_K2048"],
                [
                    4_325_376_000.0,
                    4_469_555_200.0,
                    4_541_644_800.0,
                    5_082_316_800.0,
                ],
            ),
            (
                by_name("lbm").unwrap(),
                ["64x64_50", "128x128_100", "256x256_100", "192x192_75"],
                [14_745_600.0, 117_964_800.0, 471_859_200.0, 199_065_600.0],
            ),
            (
                by_name("ising").unwrap(),
                [
                    "256x256_100",
                    "1024x1024_50",
                    "2048x2048_25",
                    "1536x1536_40",
                ],
                [13_107_200.0, 104_857_600.0, 209_715_200.0, 188_743_680.0],
            ),
        ] {
            let sizes = full(task);
            let labels: Vec<String> = sizes.iter().map(|s| s.label.clone()).collect();
            assert_eq!(labels, strs(&want), "{}", task.name());
            for (s, w) in sizes.iter().zip(work) {
                assert_eq!(task.work(s), w, "{} {}", task.name(), s.label);
            }
        }
        assert_eq!(
            [
                by_name("wave3d").unwrap().ceiling(),
                by_name("nbody").unwrap().ceiling(),
                by_name("hmc").unwrap().ceiling(),
                by_name("lbm").unwrap().ceiling(),
                by_name("ising").unwrap().ceiling()
            ],
            [
                CeilingKind::Bandwidth,
                CeilingKind::Fp32,
                CeilingKind::Fp32,
                CeilingKind::Bandwidth,
                CeilingKind::Bandwidth
            ]
        );
        // lj, gradshaf, fft3d, adi3d, morton: labels, ceilings, and the
        // spec's derived work figures.
        for (task, want, work, ceiling) in [
            (
                by_name("gradshaf").unwrap(),
                ["65x65_30", "257x257_40", "513x513_30", "129x129_35"],
                [1_521_000.0, 31_703_520.0, 94_740_840.0, 6_989_220.0],
                CeilingKind::Bandwidth,
            ),
            (
                by_name("fft3d").unwrap(),
                ["32cube", "64cube", "128cube", "256cube"],
                [3_145_728.0, 25_165_824.0, 201_326_592.0, 1_610_612_736.0],
                CeilingKind::Bandwidth,
            ),
            (
                by_name("adi3d").unwrap(),
                ["N64_20", "N96_15", "N128_10", "P256x192x128_10"],
                [125_829_120.0, 318_504_960.0, 503_316_480.0, 1_509_949_440.0],
                CeilingKind::Bandwidth,
            ),
            (
                by_name("morton").unwrap(),
                ["N32_120", "N64_60", "N128_30", "N256_10"],
                [31_457_280.0, 125_829_120.0, 503_316_480.0, 1_342_177_280.0],
                CeilingKind::Bandwidth,
            ),
            (
                by_name("lj").unwrap(),
                [
                    "N1728_M5_steps20",
                    "N4096_M7_steps15",
                    "N10648_M10_steps10",
                    "N2744_M6_steps12",
                ],
                // 40·P·n_steps with the spec's P = 29,051 / 68,859 / 178,608
                // / 46,093; our inputs are drawn by our own generator, so
                // P (and the FLOPs) may differ from numpy's by a little.
                [23_240_800.0, 41_315_400.0, 71_443_200.0, 22_124_640.0],
                CeilingKind::Fp32,
            ),
        ] {
            let sizes = full(task);
            let labels: Vec<String> = sizes.iter().map(|s| s.label.clone()).collect();
            assert_eq!(labels, strs(&want), "{}", task.name());
            assert_eq!(task.ceiling(), ceiling, "{}", task.name());
            for (s, w) in sizes.iter().zip(work) {
                let got = task.work(s);
                if task.name() == "lj" {
                    assert!((got - w).abs() < 0.02 * w, "lj {}: {got} vs {w}", s.label);
                } else {
                    assert_eq!(got, w, "{} {}", task.name(), s.label);
                }
            }
        }
    }
}

//! Prompt templates: snapshots of every template (through the prompts that
//! use them) and the guarantee that no held-out size reaches a prompt.

use kevo_backend::{
    BackendName, CompileDiagnostics, DeviceDetails, DeviceInfo, DeviceKind, Dialect, FaultKind,
    Simd,
};
use kevo_eval::{Evaluation, Outcome, SizeResult, TimeStats, WallTimes};
use kevo_proposer::prompt::feedback;
use kevo_proposer::{
    Attempt, DeviceBrief, EditMode, HistoryEntry, PromptBuilder, PromptError, StepOutcome,
    Templates, UserContext, attempt_note, evaluated_entry,
};
use kevo_roofline::{CeilingSource, Ceilings, LaunchOverhead, Spread};
use kevo_tasks::{
    PerDialect, Problem, Reference, Size, SizeSet, Task, TaskAssets, TaskCode, Verdict,
};

/// A fixed task for the snapshots, so they change only when the
/// templates or the feedback format do, not when a real task's brief does.
struct Demo;

const DEMO_CU: &str = "extern \"C\" __global__ void demo_step(const float* u_in, float* u_out, unsigned int N) {\n    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= N) return;\n    u_out[i] = 0.5f * u_in[i];\n}\n";
const DEMO_CL: &str = "__kernel void demo_step(__global const float* u_in, __global float* u_out, uint N) {\n    uint i = get_global_id(0);\n    if (i >= N) return;\n    u_out[i] = 0.5f * u_in[i];\n}\n";
const DEMO_METAL: &str = "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void demo_step(device const float* u_in [[buffer(0)]],\n                      device float* u_out [[buffer(1)]],\n                      constant uint& N [[buffer(2)]],\n                      uint i [[thread_position_in_grid]]) {\n    if (i >= N) return;\n    u_out[i] = 0.5f * u_in[i];\n}\n";

const DEMO_TOML: &str = r#"
name = "demo"
regime = "R0 bandwidth"
kernels = ["demo_step"]
dims = ["N"]
ceiling = "bandwidth"
work = "8 * N"
work_note = "effective, 8 B/element"
default_seed = 0

[sizes.smoke]
in_distribution = [{ label = "16K", dims = [16384] }, { label = "64K", dims = [65536] }, { label = "256K", dims = [262144] }]
held_out = { label = "32K", dims = [32768] }

[sizes.full]
in_distribution = [{ label = "1024K", dims = [1048576] }, { label = "16384K", dims = [16777216] }, { label = "65536K", dims = [67108864] }]
held_out = { label = "4096K", dims = [4194304] }

[sizes.large]
in_distribution = [{ label = "65536K", dims = [67108864] }, { label = "131072K", dims = [134217728] }, { label = "262144K", dims = [268435456] }]
held_out = { label = "98304K", dims = [100663296] }
"#;

impl TaskCode for Demo {
    fn problem(&self, _: &Size, _: u64) -> Problem {
        unreachable!("prompt tests never run the task")
    }
    fn reference(&self, _: &Size, _: &Problem) -> Reference {
        unreachable!("prompt tests never run the task")
    }
    fn check(&self, _: &Size, _: &Problem, _: &Reference, _: &[Vec<u8>]) -> Verdict {
        unreachable!("prompt tests never run the task")
    }
}

/// The demo task: its definition, brief, signatures and seeds.
fn demo() -> &'static Task {
    static DEMO: std::sync::OnceLock<Task> = std::sync::OnceLock::new();
    DEMO.get_or_init(|| {
        let each = |cu: &str, cl: &str, metal: &str| PerDialect {
            cuda: Some(cu.into()),
            opencl: Some(cl.into()),
            metal: Some(metal.into()),
            triton: None,
        };
        let assets = TaskAssets {
            brief: "demo: halve every element, u_out[i] = 0.5 * u_in[i], for i in [0, N).\nOne thread per element; threads with i >= N do nothing.\n".into(),
            signatures: each(
                "extern \"C\" __global__ void demo_step(const float* u_in, float* u_out, unsigned int N);\n",
                "__kernel void demo_step(__global const float* u_in, __global float* u_out, uint N);\n",
                "kernel void demo_step(device const float* u_in [[buffer(0)]], device float* u_out [[buffer(1)]], constant uint& N [[buffer(2)]], uint i [[thread_position_in_grid]]);\n",
            ),
            seeds: each(DEMO_CU, DEMO_CL, DEMO_METAL),
            tunables: PerDialect::default(),
            references: PerDialect::default(),
        };
        Task::new(DEMO_TOML, "demo", assets, std::sync::Arc::new(Demo), &[]).unwrap()
    })
}

fn h100() -> DeviceBrief {
    DeviceBrief {
        name: "NVIDIA H100 80GB HBM3".into(),
        ceilings: Ceilings {
            bandwidth_gbs: 3350.0,
            fp32_gflops: 67000.0,
            source: CeilingSource::Datasheet {
                entry: "NVIDIA H100 SXM".into(),
            },
            hierarchy: None,
            launch_overhead: None,
        },
        info: None,
    }
}

fn pocl() -> DeviceBrief {
    DeviceBrief {
        name: "cpu-haswell-AMD EPYC".into(),
        ceilings: Ceilings {
            bandwidth_gbs: 21.37,
            fp32_gflops: 151.2,
            source: CeilingSource::Measured {
                measured_unix: 1_700_000_000,
                cached: false,
            },
            hierarchy: None,
            launch_overhead: Some(LaunchOverhead {
                alone_us: Spread {
                    median: 4.1,
                    min: 3.8,
                    max: 6.0,
                },
                back_to_back_us: Spread {
                    median: 2.3,
                    min: 2.2,
                    max: 2.9,
                },
            }),
        },
        info: Some(DeviceInfo {
            backend: BackendName::Opencl,
            dialect: Dialect::OpenCl,
            platform: "Portable Computing Language".into(),
            name: "cpu-haswell-AMD EPYC".into(),
            vendor: "AuthenticAMD".into(),
            compute_units: 2,
            global_mem_bytes: 8 << 30,
            max_work_group_size: 4096,
            local_mem_bytes: 4 << 20,
            clock_mhz: 2000,
            arch: "OpenCL 3.0".into(),
            driver_version: "6.0".into(),
            is_cpu: true,
            cache_bytes: 0,
            integrated: false,
            details: DeviceDetails {
                simd: Some(Simd::Avx2),
                cores_available: Some(2),
                ..DeviceDetails::default()
            },
        }),
    }
}

fn ceiling(task: &Task, dev: &DeviceBrief) -> f64 {
    dev.ceilings.for_kind(task.ceiling())
}

/// A size that ran: correct at `fraction` of the ceiling, or wrong.
fn size_result(task: &Task, dev: &DeviceBrief, size: &Size, fraction: Option<f64>) -> SizeResult {
    let ceiling = ceiling(task, dev);
    let work = task.work(size);
    let f = fraction.unwrap_or(0.05);
    let median = work / (f * ceiling * 1e9);
    SizeResult {
        label: size.label.clone(),
        correct: fraction.is_some(),
        metric: "max_abs".into(),
        error: if fraction.is_some() { 2.5e-7 } else { 0.0123 },
        tolerance: Some(1.0e-5),
        time: TimeStats::from_samples(vec![median * 0.98, median, median * 1.03]),
        warmups: 3,
        work,
        achieved: work / median / 1e9,
        ceiling,
        fraction: f,
        unit: task.ceiling().unit().into(),
        work_note: task.work_note().into(),
        suspicious: None,
        working_set_bytes: 0,
        level: None,
    }
}

fn evaluation(
    task: &Task,
    dev: &DeviceBrief,
    sizes: Vec<SizeResult>,
    outcome: Outcome,
) -> Evaluation {
    Evaluation {
        task: task.name().into(),
        device: dev.name.clone(),
        backend: BackendName::Opencl,
        outcome,
        sizes,
        wall: WallTimes::default(),
        kernels: Vec::new(),
        source_sha: None,
    }
}

fn correct(task: &Task, dev: &DeviceBrief, set: SizeSet, fracs: [f64; 3]) -> Evaluation {
    let plan = task.sizes(set);
    let sizes: Vec<SizeResult> = plan
        .in_distribution
        .iter()
        .zip(fracs)
        .map(|(s, f)| size_result(task, dev, s, Some(f)))
        .collect();
    let score = kevo_eval::geometric_mean(fracs);
    evaluation(task, dev, sizes, Outcome::Correct { score })
}

fn wrong_at_second(task: &Task, dev: &DeviceBrief, set: SizeSet) -> Evaluation {
    let plan = task.sizes(set);
    let s = &plan.in_distribution;
    evaluation(
        task,
        dev,
        vec![
            size_result(task, dev, &s[0], Some(0.4)),
            size_result(task, dev, &s[1], None),
        ],
        Outcome::WrongResult {
            size: s[1].label.clone(),
            metric: "max_abs".into(),
            value: 0.0123,
            tolerance: Some(1.0e-5),
        },
    )
}

fn compile_error(task: &Task, dev: &DeviceBrief) -> Evaluation {
    let log = "kernel.cu(7): error: identifier \"uu\" is undefined\n      uu[i] = 0.0f;\n      ^\n\nkernel.cu(9): error: expected a \";\"\n\nkernel.cu(12): warning: variable \"t\" was declared but never referenced\n\nkernel.cu(15): error: too few arguments in function call\n\nkernel.cu(18): error: identifier \"vv\" is undefined\n\n4 errors detected in the compilation of \"kernel.cu\".\n";
    let diagnostics = CompileDiagnostics::from_log(log);
    evaluation(
        task,
        dev,
        vec![],
        Outcome::CompileError {
            message: diagnostics.summary(),
            diagnostics,
        },
    )
}

fn history(scores: &[(u32, Option<f64>, bool)]) -> Vec<HistoryEntry> {
    scores
        .iter()
        .map(|&(i, s, p)| match s {
            Some(score) => evaluated_entry(i, i64::from(i) + 1, &Outcome::Correct { score }, p),
            None => HistoryEntry::without_candidate(i, StepOutcome::CompileError),
        })
        .collect()
}

#[test]
fn system_prompts() {
    let t = Templates::builtin();
    for dialect in Dialect::all() {
        for mode in [EditMode::FullSource, EditMode::SearchReplace] {
            let text = PromptBuilder::system_prompt(&t, dialect, mode, true, None, 8).unwrap();
            let name = format!("system_{}_{:?}", dialect.extension(), mode).to_lowercase();
            if dialect == Dialect::Triton {
                // Tunables are C macros; a Triton kernel's are its
                // constexpr defaults, and the prompt does not offer tuning.
                assert!(!text.contains("kevo: tune"), "{text}");
                assert!(text.contains("# kevo: grid KERNEL"), "{text}");
                insta::assert_snapshot!(name, text);
                continue;
            }
            assert!(text.contains("`// kevo: tune NAME V1 V2 ...`"), "{text}");
            assert!(text.contains("up to 8 configurations"), "{text}");
            insta::assert_snapshot!(name, text);
            // Tuning off: the prompt does not offer it, and nothing else changes.
            let off = PromptBuilder::system_prompt(&t, dialect, mode, true, None, 0).unwrap();
            assert!(!off.contains("kevo: tune"), "{off}");
            let paragraph = text
                .lines()
                .find(|l| l.contains("kevo: tune"))
                .unwrap()
                .to_string();
            assert_eq!(text.replace(&format!("{paragraph}\n"), ""), off);
        }
    }
    // A CPU device gets advice of its own: local memory and barriers are
    // overhead there.
    let cpu = PromptBuilder::system_prompt(
        &t,
        Dialect::OpenCl,
        EditMode::FullSource,
        true,
        Some(DeviceKind::Cpu),
        0,
    )
    .unwrap();
    assert!(cpu.contains("for a CPU through OpenCL"), "{cpu}");
    assert!(cpu.contains("## This device is a CPU"), "{cpu}");
    assert!(
        !cpu.contains("Common optimisations: `__local` tiling"),
        "{cpu}"
    );
    insta::assert_snapshot!("system_cl_fullsource_cpu", cpu);
    let gpu = PromptBuilder::system_prompt(
        &t,
        Dialect::OpenCl,
        EditMode::FullSource,
        true,
        Some(DeviceKind::DiscreteGpu),
        0,
    )
    .unwrap();
    assert!(!gpu.contains("This device is"), "{gpu}");
    let integrated = PromptBuilder::system_prompt(
        &t,
        Dialect::OpenCl,
        EditMode::FullSource,
        true,
        Some(DeviceKind::IntegratedGpu),
        0,
    )
    .unwrap();
    assert!(
        integrated.contains("## This device is an integrated GPU"),
        "{integrated}"
    );
}

#[test]
fn user_first_iteration() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let text = b
        .user(&UserContext {
            previous: None,
            incumbent: Attempt {
                source: seed,
                evaluation: &eval,
            },
            incumbent_is_seed: true,
            incumbent_is_best: true,
            incumbent_score: None,
            history: &history(&[(0, eval.outcome.score(), true)]),
            elites: &[],
            inspirations: &[],
            hints: &[],
            incumbent_profile: None,
            previous_profile: None,
            analysis: None,
            previous_rejected: false,
            search: None,
        })
        .unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn user_after_a_compile_error() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let incumbent = seed.replace("0.5f * u_in[i]", "__ldg(u_in + i) * 0.5f");
    let inc_eval = correct(task, &dev, SizeSet::Full, [0.21, 0.35, 0.4]);
    let prev_src = "// kevo: block 512\nextern \"C\" __global__ void demo_step(const float* u_in, float* u_out, unsigned int N) {\n    uu[0] = 0.0f;\n}\n";
    let prev_eval = compile_error(task, &dev);
    let h = history(&[
        (0, Some(0.12), true),
        (1, Some(0.2), true),
        (2, None, false),
        (3, Some(0.31), true),
        (4, None, false),
    ]);
    let text = b
        .user(&UserContext {
            previous: Some(Attempt {
                source: prev_src,
                evaluation: &prev_eval,
            }),
            incumbent: Attempt {
                source: &incumbent,
                evaluation: &inc_eval,
            },
            incumbent_is_seed: false,
            incumbent_is_best: true,
            incumbent_score: None,
            history: &h,
            elites: &[],
            inspirations: &[],
            hints: &[],
            incumbent_profile: None,
            previous_profile: None,
            analysis: None,
            previous_rejected: false,
            search: None,
        })
        .unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn user_with_stagnation_notice_on_a_measured_device() {
    let task: &Task = demo();
    let dev = pocl();
    let b = PromptBuilder::new(task, Dialect::OpenCl, SizeSet::Smoke, dev.clone()).unwrap();
    let seed = task.seed(Dialect::OpenCl).unwrap();
    let inc_eval = correct(task, &dev, SizeSet::Smoke, [0.5, 0.6, 0.62]);
    let prev_eval = correct(task, &dev, SizeSet::Smoke, [0.48, 0.55, 0.6]);
    let best = inc_eval.outcome.score();
    let h: Vec<HistoryEntry> = (0..11)
        .map(|i| match i {
            0 => evaluated_entry(0, 1, &Outcome::Correct { score: 0.3 }, true),
            5 => evaluated_entry(
                5,
                6,
                &Outcome::Correct {
                    score: best.unwrap(),
                },
                true,
            ),
            // A model that names the held-out size (the smoke plan holds
            // 32K out) in its description: withheld, the prompt still built.
            8 => HistoryEntry {
                note: attempt_note(
                    "Tuned for 32K elements.\n```opencl\n...\n```",
                    "__kernel void demo_step() {}",
                ),
                ..evaluated_entry(8, 9, &prev_eval.outcome, false)
            },
            i if i >= 8 => HistoryEntry {
                note: attempt_note(
                    &format!("Variant {i}: divide instead of multiply.\n```opencl\n...\n```"),
                    "// kevo: block 64\n__kernel void demo_step() {}",
                ),
                ..evaluated_entry(i, i64::from(i) + 1, &prev_eval.outcome, false)
            },
            i => evaluated_entry(
                i,
                i64::from(i) + 1,
                &Outcome::NoCode { reason: "x".into() },
                false,
            ),
        })
        .collect();
    let text = b
        .user(&UserContext {
            previous: Some(Attempt {
                source: &seed.replace("0.5f * u_in[i]", "native_divide(u_in[i], 2.0f)"),
                evaluation: &prev_eval,
            }),
            incumbent: Attempt {
                source: seed,
                evaluation: &inc_eval,
            },
            incumbent_is_seed: false,
            incumbent_is_best: true,
            incumbent_score: Some(0.5750),
            history: &h,
            elites: &[],
            inspirations: &[],
            hints: &[],
            incumbent_profile: None,
            previous_profile: None,
            analysis: None,
            previous_rejected: false,
            search: None,
        })
        .unwrap();
    assert!(text.contains("## Stagnation notice"));
    assert!(text.contains("last 8 of 11 records"));
    // What a model needs to reason about speed on this device.
    for needle in [
        "cpu-haswell-AMD EPYC (CPU)",
        "an empty kernel takes 4.10 us as a run of its own and 2.30 us per launch back to back",
        "The kernel is also evaluated at sizes not shown here",
        "between two device-clock events",
        "over 3 runs)",
        "tried: Variant 10: divide instead of multiply; block 64",
        // The incumbent's score after re-measurement, beside its first
        // evaluation's lines.
        "score after re-measurement (median of interleaved rounds against the kernel it was compared with): 0.5750",
    ] {
        assert!(text.contains(needle), "missing {needle:?}:\n{text}");
    }
    assert!(
        text.contains("iter  8: compile OK, correct True, score 0.5411; tried: (description withheld: it names a size not shown)"),
        "{text}"
    );
    assert!(!text.contains("32K"), "{text}");
    // The CPU's stagnation advice does not lead with local-memory tiling.
    assert!(!text.contains("cooperative loads of a tile"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn user_in_diff_mode_with_evolve_blocks_after_a_wrong_result() {
    let task: &Task = demo();
    let dev = pocl();
    let b = PromptBuilder::new(task, Dialect::Metal, SizeSet::Smoke, dev.clone())
        .unwrap()
        .with_edit_mode(EditMode::SearchReplace);
    let incumbent = format!(
        "// EVOLVE-BLOCK-START\n{}// EVOLVE-BLOCK-END\n",
        task.seed(Dialect::Metal).unwrap()
    );
    let inc_eval = correct(task, &dev, SizeSet::Smoke, [0.2, 0.25, 0.3]);
    let prev_eval = wrong_at_second(task, &dev, SizeSet::Smoke);
    let h = history(&[(0, Some(0.2), true)]);
    let text = b
        .user(&UserContext {
            previous: Some(Attempt {
                source: &incumbent.replace("0.5f *", "0.25f *"),
                evaluation: &prev_eval,
            }),
            incumbent: Attempt {
                source: &incumbent,
                evaluation: &inc_eval,
            },
            incumbent_is_seed: true,
            incumbent_is_best: true,
            incumbent_score: None,
            history: &h,
            elites: &[],
            inspirations: &[],
            hints: &[],
            incumbent_profile: None,
            previous_profile: None,
            analysis: None,
            previous_rejected: false,
            search: None,
        })
        .unwrap();
    assert!(text.contains("EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END`"));
    insta::assert_snapshot!(text);
}

#[test]
fn feedback_packets_for_every_outcome() {
    let task: &Task = demo();
    let dev = h100();
    let plan = task.sizes(SizeSet::Full);
    let s = &plan.in_distribution;
    let mut flagged = correct(task, &dev, SizeSet::Full, [0.31, 0.82, 2.4]);
    flagged.sizes[2].suspicious =
        Some("240% of the ceiling with a working set larger than the 50 MB L2".into());
    let evals = [
        correct(task, &dev, SizeSet::Full, [0.31, 0.82, 0.9]),
        flagged,
        wrong_at_second(task, &dev, SizeSet::Full),
        evaluation(
            task,
            &dev,
            vec![size_result(task, &dev, &s[0], Some(0.2))],
            Outcome::RuntimeError {
                size: Some(s[1].label.clone()),
                fault: Some(FaultKind::IllegalAddress),
                message: "an illegal memory access was encountered".into(),
            },
        ),
        evaluation(
            task,
            &dev,
            vec![],
            Outcome::Timeout {
                size: Some(s[0].label.clone()),
                limit_s: 30.0,
            },
        ),
        compile_error(task, &dev),
        evaluation(
            task,
            &dev,
            vec![],
            Outcome::NoCode {
                reason: "no fenced code block (```cuda) in the response".into(),
            },
        ),
        evaluation(
            task,
            &dev,
            vec![SizeResult {
                error: f64::NAN,
                ..size_result(task, &dev, &s[0], None)
            }],
            Outcome::WrongResult {
                size: s[0].label.clone(),
                metric: "max_abs".into(),
                value: f64::NAN,
                tolerance: None,
            },
        ),
    ];
    let text = evals
        .iter()
        .map(|e| format!("# {}\n{}\n", e.outcome.kind(), feedback::render(e).text))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text);
}

fn contains_token(text: &str, name: &str) -> bool {
    let is_tok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    text.match_indices(name).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(is_tok)
            && !text[i + name.len()..].chars().next().is_some_and(is_tok)
    })
}

/// Every task, every dialect it supports, both size sets, every kind of
/// feedback: the held-out label never appears in a rendered prompt.
#[test]
fn no_held_out_label_reaches_any_prompt() {
    let mut rendered = 0;
    for task in kevo_tasks::all() {
        for dialect in Dialect::all() {
            if task.signature(dialect).is_none() || task.seed(dialect).is_none() {
                continue;
            }
            for set in [SizeSet::Smoke, SizeSet::Full] {
                for dev in [h100(), pocl()] {
                    for mode in [EditMode::FullSource, EditMode::SearchReplace] {
                        let held_out = task.sizes(set).held_out.label;
                        let b = PromptBuilder::new(task, dialect, set, dev.clone())
                            .unwrap()
                            .with_edit_mode(mode);
                        let seed = task.seed(dialect).unwrap();
                        let good = correct(task, &dev, set, [0.2, 0.3, 0.4]);
                        let evals = [
                            good.clone(),
                            wrong_at_second(task, &dev, set),
                            compile_error(task, &dev),
                        ];
                        let h = history(&[
                            (0, Some(0.2), true),
                            (1, None, false),
                            (2, Some(0.19), false),
                        ]);
                        let mut prompts = vec![b.system().unwrap()];
                        prompts.push(
                            b.user(&UserContext {
                                previous: None,
                                incumbent: Attempt {
                                    source: seed,
                                    evaluation: &good,
                                },
                                incumbent_is_seed: true,
                                incumbent_is_best: true,
                                incumbent_score: None,
                                history: &h[..1],
                                elites: &[],
                                inspirations: &[],
                                hints: &[],
                                incumbent_profile: None,
                                previous_profile: None,
                                analysis: None,
                                previous_rejected: false,
                                search: None,
                            })
                            .unwrap(),
                        );
                        for prev in &evals {
                            prompts.push(
                                b.user(&UserContext {
                                    previous: Some(Attempt {
                                        source: "// previous\n",
                                        evaluation: prev,
                                    }),
                                    incumbent: Attempt {
                                        source: seed,
                                        evaluation: &good,
                                    },
                                    incumbent_is_seed: false,
                                    incumbent_is_best: true,
                                    incumbent_score: None,
                                    history: &h,
                                    elites: &[],
                                    inspirations: &[],
                                    hints: &[],
                                    incumbent_profile: None,
                                    previous_profile: None,
                                    analysis: None,
                                    previous_rejected: false,
                                    search: None,
                                })
                                .unwrap(),
                            );
                        }
                        for p in &prompts {
                            assert!(
                                !contains_token(p, &held_out),
                                "{} {dialect} {set}: held-out `{held_out}` in:\n{p}",
                                task.name()
                            );
                            rendered += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(rendered >= 2 * 2 * 2 * 2 * 2 * 5, "{rendered}");
}

#[test]
fn held_out_results_are_refused() {
    let task = kevo_tasks::by_name("saxpy").unwrap();
    let dev = h100();
    let plan = task.sizes(SizeSet::Full);
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let ctx = |e| UserContext {
        previous: None,
        incumbent: Attempt {
            source: seed,
            evaluation: e,
        },
        incumbent_is_seed: true,
        incumbent_is_best: true,
        incumbent_score: None,
        history: &[],
        elites: &[],
        inspirations: &[],
        hints: &[],
        incumbent_profile: None,
        previous_profile: None,
        analysis: None,
        previous_rejected: false,
        search: None,
    };
    // A held-out size among the results.
    let mut e = correct(task, &dev, SizeSet::Full, [0.2, 0.3, 0.4]);
    e.sizes
        .push(size_result(task, &dev, &plan.held_out, Some(0.5)));
    let err = b.user(&ctx(&e)).unwrap_err();
    assert!(
        matches!(&err, PromptError::HeldOut { label, .. } if *label == plan.held_out.label),
        "{err}"
    );
    // A held-out size named by the outcome.
    let mut e = wrong_at_second(task, &dev, SizeSet::Full);
    e.sizes.truncate(1);
    e.outcome = Outcome::RuntimeError {
        size: Some(plan.held_out.label.clone()),
        fault: None,
        message: "m".into(),
    };
    assert!(matches!(b.user(&ctx(&e)), Err(PromptError::HeldOut { .. })));
    // A held-out label inside a message is caught by the text guard.
    let mut e = wrong_at_second(task, &dev, SizeSet::Full);
    e.outcome = Outcome::RuntimeError {
        size: None,
        fault: None,
        message: format!("failed while preparing {}", plan.held_out.label),
    };
    e.sizes.truncate(1);
    assert!(matches!(b.user(&ctx(&e)), Err(PromptError::HeldOut { .. })));
    // A validation size is as hidden: among the results, or in a message.
    let validation = &plan.validation[0];
    let mut e = correct(task, &dev, SizeSet::Full, [0.2, 0.3, 0.4]);
    e.sizes.push(size_result(task, &dev, validation, Some(0.5)));
    let err = b.user(&ctx(&e)).unwrap_err();
    assert!(
        matches!(&err, PromptError::Validation { label, .. } if *label == validation.label),
        "{err}"
    );
    let mut e = wrong_at_second(task, &dev, SizeSet::Full);
    e.outcome = Outcome::RuntimeError {
        size: None,
        fault: None,
        message: format!("failed at {}", validation.label),
    };
    e.sizes.truncate(1);
    assert!(matches!(
        b.user(&ctx(&e)),
        Err(PromptError::Validation { .. })
    ));
    // A size of the other size set is not in distribution either.
    let smoke = kevo_tasks::by_name("saxpy").unwrap().sizes(SizeSet::Smoke);
    let mut e = correct(task, &dev, SizeSet::Full, [0.2, 0.3, 0.4]);
    e.sizes[0].label = smoke.in_distribution[0].label.clone();
    let err = b.user(&ctx(&e)).unwrap_err();
    assert!(matches!(err, PromptError::UnknownSize { .. }), "{err}");
}

#[test]
fn missing_dialect_assets_are_reported() {
    let task = kevo_tasks::by_name("saxpy").unwrap();
    let err = PromptBuilder::new(task, Dialect::Metal, SizeSet::Full, h100())
        .err()
        .unwrap();
    assert!(err.to_string().contains("Metal"), "{err}");
}

/// Elites, inspirations and hints a search strategy adds, snapshotted;
/// under a tight budget inspirations go first, then elites, and the
/// parent and history always stay.
#[test]
fn user_with_elites_inspirations_hints_and_a_budget() {
    let task: &Task = demo();
    let dev = h100();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let parent = seed.replace("0.5f * u_in[i]", "__ldg(u_in + i) * 0.5f");
    let elite_src = seed.replace("0.5f * u_in[i]", "u_in[i] * 0.5f /* elite */");
    let inspiration_src = seed.replace("0.5f * u_in[i]", "u_in[i] / 2.0f /* inspiration */");
    let parent_eval = correct(task, &dev, SizeSet::Full, [0.3, 0.5, 0.6]);
    let elite_eval = correct(task, &dev, SizeSet::Full, [0.2, 0.4, 0.5]);
    let inspiration_eval = correct(task, &dev, SizeSet::Full, [0.1, 0.2, 0.3]);
    let h = history(&[(0, Some(0.12), true), (1, Some(0.45), true)]);
    let elites = [Attempt {
        source: &elite_src,
        evaluation: &elite_eval,
    }];
    let inspirations = [Attempt {
        source: &inspiration_src,
        evaluation: &inspiration_eval,
    }];
    let hints = ["consider tiling through __shared__ memory (no kernel of the search uses shared/local-memory tiling together with this one's other traits yet).".to_string()];
    let ctx = UserContext {
        previous: None,
        incumbent: Attempt {
            source: &parent,
            evaluation: &parent_eval,
        },
        incumbent_is_seed: false,
        incumbent_is_best: true,
        incumbent_score: None,
        history: &h,
        elites: &elites,
        inspirations: &inspirations,
        hints: &hints,
        incumbent_profile: None,
        previous_profile: None,
        analysis: None,
        previous_rejected: false,
        search: None,
    };
    let builder = |budget: usize| {
        PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone())
            .unwrap()
            .with_context_budget(budget)
    };
    let full = builder(1_000_000).user(&ctx).unwrap();
    insta::assert_snapshot!(full);
    // A parent the strategy chose that is not the best is called so.
    let not_best = builder(1_000_000)
        .user(&UserContext {
            incumbent_is_best: false,
            incumbent_score: None,
            ..ctx
        })
        .unwrap();
    assert!(
        not_best.contains("## Parent chosen by the search (not the best so far)")
            && not_best.contains("Parent result:")
            && not_best.contains("faster than the parent across all problem sizes")
            && !not_best.contains("incumbent"),
        "{not_best}"
    );
    assert!(full.contains("/* elite */") && full.contains("/* inspiration */"));
    // A budget between the prompt without the inspiration and the whole.
    let without = |s: &str| s.len() / 4;
    let tight = builder(without(&full) - 20).user(&ctx).unwrap();
    assert!(tight.contains("/* elite */") && !tight.contains("/* inspiration */"));
    let tiny = builder(10).user(&ctx).unwrap();
    assert!(!tiny.contains("/* elite */") && !tiny.contains("/* inspiration */"));
    assert!(tiny.contains("__ldg(u_in + i)") && tiny.contains("## Hints from the search"));
}

/// The first prompt of a run: the seed is the incumbent, nothing else shown.
fn seed_context<'a>(
    seed: &'a str,
    eval: &'a Evaluation,
    history: &'a [HistoryEntry],
    profile: Option<&'a str>,
) -> UserContext<'a> {
    UserContext {
        previous: None,
        incumbent: Attempt {
            source: seed,
            evaluation: eval,
        },
        incumbent_is_seed: true,
        incumbent_is_best: true,
        incumbent_score: None,
        history,
        elites: &[],
        inspirations: &[],
        hints: &[],
        incumbent_profile: profile,
        previous_profile: None,
        analysis: None,
        previous_rejected: false,
        search: None,
    }
}

#[test]
fn an_incumbent_profile_is_shown_with_its_result_and_guarded() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let history = history(&[(0, eval.outcome.score(), true)]);
    let ctx = |profile| seed_context(seed, &eval, &history, profile);
    let largest = &task.sizes(SizeSet::Full).in_distribution[2].label;
    let profile = format!(
        "Nsight Compute profile at size {largest}: memory-bound.\ndemo_step (1 launch, 12.0 us): DRAM 81% of peak"
    );
    let text = b.user(&ctx(Some(&profile))).unwrap();
    let result = text.find("Measured baseline (seed)").unwrap();
    let shown = text.find(&profile).expect("the profile is in the prompt");
    assert!(shown > result, "{text}");
    assert!(text[shown..].find("```").unwrap() < text[shown..].find("## ").unwrap_or(usize::MAX));
    assert!(!b.user(&ctx(None)).unwrap().contains("Nsight Compute"));
    // A profile that names the held-out size never reaches the model.
    let held = task.sizes(SizeSet::Full).held_out.label;
    let leaking = format!("Nsight Compute profile at size {held}: memory-bound.");
    let err = b.user(&ctx(Some(&leaking))).unwrap_err().to_string();
    assert!(err.contains(&held), "{err}");
}

#[test]
fn a_reference_kernel_is_shown_in_its_dialect_and_guarded() {
    let task: &Task = demo();
    let dev = h100();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let history = history(&[(0, eval.outcome.score(), true)]);
    let ctx = seed_context(seed, &eval, &history, None);
    let opencl = task.seed(Dialect::OpenCl).unwrap();
    let with = |source: &str| {
        PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone())
            .unwrap()
            .with_reference(Some(kevo_proposer::ReferenceKernel {
                dialect: Dialect::OpenCl,
                origin: "winner.cl".into(),
                source: source.into(),
            }))
    };
    let text = with(opencl).user(&ctx).unwrap();
    assert!(
        text.contains("## Reference implementation (OpenCL C, from winner.cl)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("```opencl\n{}", opencl.trim_end())),
        "{text}"
    );
    let held = task.sizes(SizeSet::Full).held_out.label;
    let leaking = format!("// tuned for {held}\n{opencl}");
    assert!(with(&leaking).user(&ctx).is_err());
}

#[test]
fn analyst_prompt_for_a_profiled_incumbent() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let largest = &task.sizes(SizeSet::Full).in_distribution[2].label;
    let profile = format!(
        "Nsight Compute profile at size {largest}: memory-bound.\ndemo_step (1 launch, 12.0 us): DRAM 81% of peak, L2 40% of peak, achieved occupancy 88%"
    );
    let request = b
        .analyst_request(&kevo_proposer::AnalystContext {
            source: seed,
            evaluation: &eval,
            profile: Some(&profile),
            role: "seed",
        })
        .unwrap();
    assert_eq!(
        request.max_tokens,
        Some(kevo_proposer::prompt::analyst::ANALYST_MAX_TOKENS)
    );
    // Everything it is to weigh is in the prompt: the kernel, its
    // per-size results against the ceiling, the profile.
    for part in [seed.trim_end(), "% of DRAM", &profile, "score (gmean"] {
        assert!(request.user.contains(part), "{part} missing");
    }
    insta::assert_snapshot!(
        "analyst",
        format!(
            "=== system ===\n{}\n=== user ===\n{}",
            request.system, request.user
        )
    );
    // Without a profile neither prompt speaks of one.
    let bare = b
        .analyst_request(&kevo_proposer::AnalystContext {
            source: seed,
            evaluation: &eval,
            profile: None,
            role: "seed",
        })
        .unwrap();
    assert!(!bare.system.contains("Nsight") && !bare.user.contains("Nsight"));
}

#[test]
fn the_analyst_sees_no_held_out_size() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let held = task.sizes(SizeSet::Full).held_out.label;
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let leaking = format!("Nsight Compute profile at size {held}: memory-bound.");
    let ask = |evaluation: &Evaluation, profile: Option<&str>| {
        b.analyst_request(&kevo_proposer::AnalystContext {
            source: seed,
            evaluation,
            profile,
            role: "seed",
        })
    };
    assert!(matches!(
        ask(&eval, Some(&leaking)),
        Err(PromptError::HeldOut { .. })
    ));
    // An evaluation holding the held-out size is refused as well.
    let mut with_held = eval.clone();
    with_held.sizes[0].label = held.clone();
    assert!(matches!(
        ask(&with_held, None),
        Err(PromptError::HeldOut { .. })
    ));
    assert!(ask(&eval, None).is_ok());
}

#[test]
fn an_analysis_is_shown_before_the_instructions_unless_it_names_the_held_out_size() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let history = history(&[(0, eval.outcome.score(), true)]);
    let advice = "Load u_in as float4: DRAM is at 30% of peak at the smallest size; expect 60%.";
    let with = |analysis| UserContext {
        analysis,
        ..seed_context(seed, &eval, &history, None)
    };
    let text = b.user(&with(Some(advice))).unwrap();
    let section = text
        .find("## Performance analysis of the seed")
        .expect("the section is there");
    let shown = text.find(advice).unwrap();
    let task_at = text.find("## Your task").unwrap();
    assert!(section < shown && shown < task_at, "{text}");
    assert!(text[task_at..].contains("Weigh the performance analysis above"));
    let without = b.user(&with(None)).unwrap();
    assert!(!without.contains("Performance analysis") && !without.contains("Weigh the"));
    // The analyst's guess at a size it was never shown stays out.
    let held = task.sizes(SizeSet::Full).held_out.label;
    let guess = format!("Tile for {held} as well.");
    let text = b.user(&with(Some(&guess))).unwrap();
    assert!(!text.contains(&guess) && !text.contains("Performance analysis"));
}

#[test]
fn a_previous_attempts_profile_is_shown_with_its_result_and_guarded() {
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let seed = task.seed(Dialect::Cuda).unwrap();
    let eval = correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]);
    let attempt_eval = correct(task, &dev, SizeSet::Full, [0.2, 0.6, 0.8]);
    let attempt = "/* attempt */\n".to_string() + seed;
    let history = history(&[
        (0, eval.outcome.score(), true),
        (1, attempt_eval.outcome.score(), false),
    ]);
    let largest = &task.sizes(SizeSet::Full).in_distribution[2].label;
    let profile = format!("Nsight Compute profile at size {largest}: latency-bound.");
    let ctx = |profile| UserContext {
        previous: Some(Attempt {
            source: &attempt,
            evaluation: &attempt_eval,
        }),
        previous_profile: profile,
        ..seed_context(seed, &eval, &history, None)
    };
    let text = b.user(&ctx(Some(&profile))).unwrap();
    let result = text.find("Result of previous attempt").unwrap();
    let shown = text.find(&profile).expect("the profile is in the prompt");
    let incumbent = text.find("## Current best").unwrap_or(usize::MAX);
    assert!(result < shown && shown < incumbent, "{text}");
    let held = task.sizes(SizeSet::Full).held_out.label;
    let leaking = format!("Nsight Compute profile at size {held}: latency-bound.");
    assert!(matches!(
        b.user(&ctx(Some(&leaking))),
        Err(PromptError::HeldOut { .. })
    ));
}

/// The meta-prompter's prompt: the marked sections of the variant it
/// edits, the archive, recent attempts with a failure's feedback, and its
/// rejected edits; a held-out size in any of it is refused.
#[test]
fn meta_prompter_prompt_shows_sections_attempts_and_rejections_and_no_held_out_size() {
    use kevo_proposer::prompt::meta::{MetaAttempt, MetaContext, PromptArchive};
    let task: &Task = demo();
    let dev = h100();
    let b = PromptBuilder::new(task, Dialect::Cuda, SizeSet::Full, dev.clone()).unwrap();
    let start = b.default_guidance().unwrap();
    let mut archive = PromptArchive::new(&start, 3);
    archive
        .add_edited(
            0,
            4,
            "Diagnosis.\n<<<<<<< SEARCH\n<!-- kevo:end pitfalls -->\n=======\nx\n>>>>>>> REPLACE\n",
        )
        .unwrap();
    let failure = b.meta_feedback(&compile_error(task, &dev)).unwrap();
    assert!(
        failure.as_deref().is_some_and(|f| f.contains("COMPILE")),
        "{failure:?}"
    );
    assert_eq!(
        b.meta_feedback(&correct(task, &dev, SizeSet::Full, [0.3, 0.7, 0.85]))
            .unwrap(),
        None,
        "a correct attempt's packet is not repeated"
    );
    let recent = vec![
        MetaAttempt {
            line: "iter  3: compile FAIL, correct False, score N/A".into(),
            variant: Some(0),
            feedback: failure,
        },
        MetaAttempt {
            line: "iter  4: compile OK, correct True, score 0.4100 (new best)".into(),
            variant: Some(0),
            feedback: None,
        },
    ];
    let ctx = MetaContext {
        archive: &archive,
        parent: 0,
        recent: &recent,
        seed_score: 0.2,
        best_score: 0.41,
    };
    let request = b.meta_request(&ctx).unwrap();
    assert_eq!(
        request.max_tokens,
        Some(kevo_proposer::prompt::meta::META_MAX_TOKENS)
    );
    for part in [
        "<!-- kevo:evolve philosophy -->",
        "<!-- kevo:end analysis -->",
        "variant 0: 0 proposals",
        "iter  3: compile FAIL",
        "COMPILE",
        "outside the evolvable sections",
    ] {
        assert!(
            request.user.contains(part),
            "{part} missing:\n{}",
            request.user
        );
    }
    insta::assert_snapshot!(
        "meta_prompter",
        format!(
            "=== system ===\n{}\n=== user ===\n{}",
            request.system, request.user
        )
    );
    let held = task.sizes(SizeSet::Full).held_out.label;
    let leaking = vec![MetaAttempt {
        line: format!("iter  5: tried a tile tuned for {held}"),
        variant: Some(0),
        feedback: None,
    }];
    assert!(matches!(
        b.meta_request(&MetaContext {
            recent: &leaking,
            ..ctx
        }),
        Err(PromptError::HeldOut { .. })
    ));
}

/// A suspicious evaluation: every size correct, the last one faster than
/// the hardware allows.
fn suspicious(task: &Task, dev: &DeviceBrief, set: SizeSet) -> Evaluation {
    let plan = task.sizes(set);
    let mut sizes: Vec<SizeResult> = plan
        .in_distribution
        .iter()
        .zip([0.5, 0.6, 3.1])
        .map(|(s, f)| size_result(task, dev, s, Some(f)))
        .collect();
    let last = sizes.last_mut().unwrap();
    let reason = "310% of the DRAM bandwidth ceiling with a 2 MiB working set that no cache holds";
    last.suspicious = Some(reason.into());
    let size = last.label.clone();
    evaluation(
        task,
        dev,
        sizes,
        Outcome::Suspicious {
            size,
            reason: reason.into(),
            score: 1.13,
        },
    )
}

/// What every strategy's prompt shows after a kept attempt with a summary,
/// a candidate re-measured within noise and a suspicious one (the latest):
/// the suspicious attempt as the previous one, with its kernel, its size
/// lines and why it was refused; the within-noise decision in words; each
/// attempt's summary; and, for the strategies that keep more than one
/// kernel, how they keep them, without "push beyond the parent" while a
/// better kernel is listed.
#[test]
fn each_strategy_explains_its_decisions_and_shows_the_latest_attempt() {
    use kevo_proposer::prompt::search::hint_text;
    use kevo_strategy::{
        Archive, Axis, CellElite, Descriptors, Elite, Hint, HintReason, Selection,
    };
    let task: &Task = demo();
    let dev = pocl();
    let b = PromptBuilder::new(task, Dialect::OpenCl, SizeSet::Smoke, dev.clone()).unwrap();
    let seed = task.seed(Dialect::OpenCl).unwrap();
    let seed_eval = correct(task, &dev, SizeSet::Smoke, [0.1, 0.12, 0.15]);
    let best_src = seed.replace("0.5f * u_in[i]", "0.5f * u_in[i] /* float4 */");
    let best_eval = correct(task, &dev, SizeSet::Smoke, [0.4, 0.5, 0.6]);
    let latest_src = seed.replace("0.5f * u_in[i]", "0.5f /* skips the work */");
    let latest_eval = suspicious(task, &dev, SizeSet::Smoke);
    let within_noise = "score 0.5120 beats the incumbent's 0.4932; re-measured over 5 interleaved rounds: score ratio 1.010x (95% lower bound 0.980x) (within noise, not promoted); medians 0.4990 against 0.4930, the scores kept from now on";
    let h = vec![
        evaluated_entry(0, 1, &seed_eval.outcome, true),
        HistoryEntry {
            note: attempt_note(
                "**Optimisation**\nSummary: load four elements per work-item with vload4\n```opencl\nk\n```",
                "k",
            ),
            new_best: Some(true),
            ..evaluated_entry(1, 2, &best_eval.outcome, true)
        },
        HistoryEntry {
            note: attempt_note("Summary: unroll the loop by 4\n```opencl\nk\n```", "k"),
            reason: Some(within_noise.into()),
            ..evaluated_entry(2, 3, &Outcome::Correct { score: 0.512 }, false)
        },
        HistoryEntry {
            note: attempt_note("Summary: skip the halving\n```opencl\nk\n```", "k"),
            ..evaluated_entry(3, 4, &latest_eval.outcome, false)
        },
    ];
    let elites = [Attempt {
        source: &best_src,
        evaluation: &best_eval,
    }];
    let selection = |parent: i64, how: &str| Selection {
        parent,
        island: Some(0),
        cell: None,
        elites: vec![2],
        inspirations: vec![],
        hints: vec![],
        previous: Some(4),
        how: how.into(),
    };
    let grid = Archive::Grid(vec![
        CellElite {
            cell: Descriptors::new(0, 0, 0),
            elite: Elite { id: 1, score: 0.12 },
            island: 0,
        },
        CellElite {
            cell: Descriptors::new(1, 0, 0),
            elite: Elite { id: 2, score: 0.49 },
            island: 0,
        },
    ]);
    let islands = Archive::Islands(vec![
        vec![Elite { id: 2, score: 0.49 }],
        vec![Elite { id: 1, score: 0.12 }],
    ]);
    // The hints a MAP-Elites parent in the seed's cell gets on this CPU,
    // through the words the session uses: one per empty neighbour, and
    // one for a move that made children slower.
    let hints: Vec<String> = [
        (Axis::Memory, 1, HintReason::Unexplored),
        (Axis::Memory, 2, HintReason::Unexplored),
        (Axis::Algorithm, 1, HintReason::Unexplored),
        (Axis::Coordination, 1, HintReason::Unexplored),
        (Axis::Coordination, 2, HintReason::Worse { change: -0.4 }),
    ]
    .into_iter()
    .filter_map(|(axis, level, reason)| {
        let hint = Hint {
            axis,
            level,
            reason,
        };
        hint_text(&hint, Dialect::OpenCl, Some(DeviceKind::Cpu))
    })
    .collect();
    let map_elites = kevo_proposer::SearchBrief::of(&grid, &selection(1, "uniform"));
    let islands = kevo_proposer::SearchBrief::of(&islands, &selection(1, "island member"));
    for (name, search, parent_is_best) in [
        ("one_plus_one", None, true),
        ("map_elites", map_elites.as_ref(), false),
        ("islands", islands.as_ref(), false),
    ] {
        let (parent, parent_eval) = match parent_is_best {
            true => (best_src.as_str(), &best_eval),
            false => (seed, &seed_eval),
        };
        let text = b
            .user(&UserContext {
                previous: Some(Attempt {
                    source: &latest_src,
                    evaluation: &latest_eval,
                }),
                incumbent: Attempt {
                    source: parent,
                    evaluation: parent_eval,
                },
                incumbent_is_seed: !parent_is_best,
                incumbent_is_best: parent_is_best,
                incumbent_score: parent_is_best.then_some(0.4930),
                history: &h,
                elites: if parent_is_best { &[] } else { &elites },
                inspirations: &[],
                hints: if name == "map_elites" { &hints } else { &[] },
                incumbent_profile: None,
                previous_profile: None,
                analysis: None,
                previous_rejected: false,
                search,
            })
            .unwrap();
        let previous = text
            .split("## Your previous attempt")
            .nth(1)
            .unwrap_or_else(|| panic!("{name}: no previous attempt:\n{text}"));
        for needle in [
            "/* skips the work */",
            "fail_reason: suspicious at size 256K: 310% of the DRAM bandwidth ceiling",
        ] {
            assert!(previous.contains(needle), "{name}: {needle:?}:\n{text}");
        }
        for needle in [
            "iter  1: compile OK, correct True, score 0.4932 (new best); tried: load four elements per work-item with vload4",
            &format!(
                "iter  2: compile OK, correct True, score 0.5120; tried: unroll the loop by 4; result: {within_noise}"
            ),
            "iter  3: suspicious, score N/A; tried: skip the halving; result: suspicious at size 256K: 310% of the DRAM bandwidth ceiling",
        ] {
            assert!(text.contains(needle), "{name}: {needle:?}:\n{text}");
        }
        assert!(!text.contains("tried: Optimisation"), "{name}:\n{text}");
        if search.is_some() {
            for needle in [
                "## How the search keeps kernels",
                "(the parent)",
                "the best kernel so far scores 0.4900",
            ] {
                assert!(text.contains(needle), "{name}: {needle:?}:\n{text}");
            }
            assert!(!text.contains("pushes beyond"), "{name}:\n{text}");
        }
        if name == "map_elites" {
            // No hint contradicts the rules: the launch is one work-item
            // per output, and the CPU section advises against local tiles
            // and sub-groups; a slower move is never an improvement.
            let shown = text.split("## Hints from the search").nth(1).unwrap();
            let shown = shown.split("## History").next().unwrap();
            assert_eq!(shown.matches("\n- ").count(), 3, "{shown}");
            for banned in [
                "several outputs",
                "several elements",
                "tiling through",
                "sub_group",
                "barrier(",
                "improved when",
            ] {
                assert!(!shown.contains(banned), "{banned:?} in {shown}");
            }
            assert!(shown.contains("did worse"), "{shown}");
        }
        insta::assert_snapshot!(format!("each_strategy_{name}"), text);
    }
}

//! Task folders end to end on PoCL: `--task ./folder` evaluates through
//! the confined worker with each kind of reference (a kernel run on the
//! device, a command run by the coordinator once per inputs, golden .npy
//! files), and a folder that is not a task is a clear error.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks")
}

fn kevo(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .env("KEVO_CACHE_DIR", cache)
        .output()
        .unwrap()
}

/// `kevo eval --json` of `kernel` (the task's seed when None) at the smoke
/// sizes on PoCL.
fn eval_json(cache: &Path, task: &str, kernel: Option<&Path>) -> (Option<i32>, serde_json::Value) {
    let mut args = vec![
        "eval",
        "--task",
        task,
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--json",
    ];
    let kernel = kernel.map(|k| k.display().to_string());
    if let Some(k) = &kernel {
        args.extend(["--kernel", k.as_str()]);
    }
    let out = kevo(cache, &args);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// A copy of the saxpy example whose `[reference]` is `reference`.
fn saxpy_with_reference(dir: &Path, name: &str, reference: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    for entry in std::fs::read_dir(examples().join("saxpy")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), root.join(entry.file_name())).unwrap();
    }
    let toml = std::fs::read_to_string(root.join("task.toml")).unwrap();
    let at = toml.find("[reference]").unwrap();
    let toml = toml[..at].replace("name = \"saxpy-folder\"", &format!("name = \"{name}\""))
        + "[reference]\n"
        + reference
        + "\n";
    std::fs::write(root.join("task.toml"), toml).unwrap();
    root
}

fn wrong_saxpy(dir: &Path) -> PathBuf {
    // Forgets `+ y`: wrong everywhere.
    let path = dir.join("wrong.cl");
    std::fs::write(
        &path,
        "__kernel void saxpy(__global const float* x, __global float* y, float a, uint n) {\n\
         uint i = get_global_id(0);\n if (i < n) y[i] = a * x[i];\n}\n",
    )
    .unwrap();
    path
}

fn npy_files(dir: &Path) -> Vec<PathBuf> {
    common::files_holding(dir, "NUMPY")
}

#[test]
fn the_saxpy_folder_gives_the_built_in_verdicts_and_work() {
    if !common::opencl_available() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let folder = examples().join("saxpy");
    let (code, f) = eval_json(cache.path(), folder.to_str().unwrap(), None);
    assert_eq!(code, Some(0), "{f}");
    let (code, b) = eval_json(cache.path(), "saxpy", None);
    assert_eq!(code, Some(0), "{b}");
    assert_eq!(f["task"], "saxpy-folder");
    assert_eq!(f["outcome"]["status"], "correct", "{f}");
    let sizes = |v: &serde_json::Value| -> Vec<(String, bool, f64)> {
        v["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["label"].as_str().unwrap().to_string(),
                    s["correct"].as_bool().unwrap(),
                    s["work"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(sizes(&f), sizes(&b));
    // A wrong kernel is wrong against the reference kernel too.
    let (code, w) = eval_json(
        cache.path(),
        folder.to_str().unwrap(),
        Some(&wrong_saxpy(cache.path())),
    );
    assert_eq!(code, Some(1), "{w}");
    assert_eq!(w["outcome"]["status"], "wrong_result", "{w}");
    assert!(
        w["outcome"]["metric"]
            .as_str()
            .unwrap()
            .starts_with("y: fraction within"),
        "{w}"
    );
}

#[test]
fn a_command_reference_runs_on_the_coordinator_once_per_inputs() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let root = saxpy_with_reference(
        dir.path(),
        "saxpy-command",
        "command = [\"python3\", \"reference.py\"]",
    );
    let task = root.to_str().unwrap();
    let (code, v) = eval_json(&cache, task, None);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["outcome"]["status"], "correct", "{v}");
    // Three sizes, each at the timed seed and the one verification seed
    // this evaluation uses (not the whole pool): computed here, cached,
    // and sent to the worker (which runs no program).
    let answers = npy_files(&cache.join("task-references"));
    assert_eq!(answers.len(), 6, "{answers:?}");
    let (code, w) = eval_json(&cache, task, Some(&wrong_saxpy(dir.path())));
    assert_eq!(
        (code, &w["outcome"]["status"]),
        (Some(1), &"wrong_result".into()),
        "{w}"
    );

    // A program that fails: the evaluation fails naming it and what it
    // printed, and nothing is scored.
    std::fs::write(
        root.join("reference.py"),
        "import sys\nprint('cannot find my data', file=sys.stderr)\nsys.exit(3)\n",
    )
    .unwrap();
    let (code, v) = eval_json(&cache, task, None);
    assert_eq!(code, Some(1), "{v}");
    let message = v["outcome"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("reference.py") && message.contains("cannot find my data"),
        "{v}"
    );
    assert!(v["outcome"]["score"].is_null(), "{v}");
}

#[test]
fn golden_outputs_check_fixed_inputs_and_random_inputs_are_refused() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let root = saxpy_with_reference(dir.path(), "saxpy-golden", "golden = \"golden\"");
    let toml = std::fs::read_to_string(root.join("task.toml")).unwrap();
    // Random inputs cannot have golden outputs.
    let e = kevo(
        &cache,
        &["eval", "--task", root.to_str().unwrap(), "--sizes", "smoke"],
    );
    let stderr = String::from_utf8_lossy(&e.stderr);
    assert_ne!(e.status.code(), Some(0));
    assert!(
        stderr.contains("task.toml: reference.golden") || stderr.contains("buffers[0].init"),
        "{stderr}"
    );
    // x = 0, 1, 2, ...; y = 1: y' = 2.5 i + 1.
    let fixed = toml
        .replacen("init = { normal = [0.0, 1.0] }", "init = \"iota\"", 1)
        .replacen(
            "init = { normal = [0.0, 1.0] }",
            "init = { constant = 1.0 }",
            1,
        );
    std::fs::write(root.join("task.toml"), &fixed).unwrap();
    let labels = [
        ("64K", 65536usize),
        ("256K", 262144),
        ("1M", 1048576),
        ("128K", 131072),
        // The validation size: a golden reference covers every size.
        ("100003", 100003),
    ];
    let element = |n: usize, bad: Option<usize>| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = 2.5f32 * i as f32 + 1.0 + if Some(i) == bad { 1.0 } else { 0.0 };
                v.to_le_bytes()
            })
            .collect()
    };
    let f32_element = kevo_tasks::folder::ElementType {
        scalar: kevo_tasks::folder::Scalar::F32,
        lanes: 1,
    };
    for (label, n) in labels {
        let d = root.join("golden/smoke").join(label);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("y.npy"),
            kevo_tasks::folder::npy::write(&element(n, None), f32_element),
        )
        .unwrap();
    }
    let (code, v) = eval_json(&cache, root.to_str().unwrap(), None);
    assert_eq!(code, Some(0), "{v}");
    // One wrong element in a golden file: the seed is now "wrong", which
    // shows the golden file is what it is checked against.
    std::fs::write(
        root.join("golden/smoke/256K/y.npy"),
        kevo_tasks::folder::npy::write(&element(262144, Some(7)), f32_element),
    )
    .unwrap();
    let (code, v) = eval_json(&cache, root.to_str().unwrap(), None);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["outcome"]["size"], "256K", "{v}");
}

#[test]
fn a_path_that_is_no_task_folder_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = kevo(
        dir.path(),
        &["eval", "--task", "./no-such-folder", "--sizes", "smoke"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-folder") && stderr.contains("not a directory"),
        "{stderr}"
    );
    let root = saxpy_with_reference(dir.path(), "bad", "kernel = { opencl = \"reference.cl\" }");
    let toml = std::fs::read_to_string(root.join("task.toml")).unwrap();
    std::fs::write(
        root.join("task.toml"),
        toml.replace("length = \"N\"", "length = \"N / 3\""),
    )
    .unwrap();
    let out = kevo(
        dir.path(),
        &["eval", "--task", root.to_str().unwrap(), "--sizes", "smoke"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad/task.toml: buffers[0].length: at size `64K` it is 21845.33"),
        "{stderr}"
    );
    // A folder that takes a built-in task's name is refused.
    std::fs::write(
        root.join("task.toml"),
        toml.replace("name = \"bad\"", "name = \"saxpy\"").replace(
            "golden = \"golden\"",
            "kernel = { opencl = \"reference.cl\" }",
        ),
    )
    .unwrap();
    let out = kevo(
        dir.path(),
        &["eval", "--task", root.to_str().unwrap(), "--sizes", "smoke"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("built-in task has this name"), "{stderr}");
}

#[test]
fn task_new_scaffolds_a_folder_that_task_check_passes_and_a_weak_check_fails() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let parent = dir.path().to_str().unwrap();
    let out = kevo(&cache, &["task", "new", "my-scale", "--dir", parent]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = dir.path().join("my-scale");
    let check = |root: &Path| -> (Option<i32>, serde_json::Value) {
        let out = kevo(
            &cache,
            &[
                "task",
                "check",
                root.to_str().unwrap(),
                "--backend",
                "opencl",
                "--sizes",
                "smoke",
                "--json",
            ],
        );
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let (code, v) = check(&root);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["task"], "my-scale");
    let whats: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    for want in [
        "definition",
        "reference at the smoke sizes",
        "a kernel that writes nothing (smoke)",
        "a kernel that writes zeros (smoke)",
        "a kernel that writes a constant (smoke)",
        "a kernel that copies the input `x` (smoke)",
        "a kernel that copies the input `y` (smoke)",
        "seed at the smoke sizes (OpenCL C)",
        "reference kernel at the smoke sizes (OpenCL C)",
    ] {
        assert!(whats.contains(&want), "{want} in {whats:?}");
    }
    // The held-out size is among the seed's sizes.
    let sizes = v["evaluations"]["seed smoke"]["sizes"].as_array().unwrap();
    assert_eq!(sizes.last().unwrap()["label"], "128K");

    // A deliberately weak check: any output within 20 of the answer passes,
    // and so do kernels that skip the work.
    let toml = std::fs::read_to_string(root.join("task.toml")).unwrap();
    std::fs::write(
        root.join("task.toml"),
        toml.replace("atol = 4e-6", "atol = 20.0"),
    )
    .unwrap();
    let (code, v) = check(&root);
    assert_eq!(code, Some(1), "{v:#}");
    let zeros = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["what"] == "a kernel that writes zeros (smoke)")
        .unwrap();
    assert_eq!(zeros["ok"], false, "{zeros}");
    assert!(
        zeros["detail"]
            .as_str()
            .unwrap()
            .contains("PASSES the check"),
        "{zeros}"
    );
    // The seed still passes the looser check.
    let seed = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["what"] == "seed at the smoke sizes (OpenCL C)")
        .unwrap();
    assert_eq!(seed["ok"], true, "{seed}");

    // A folder that is no task: exit 2 with the file and key.
    std::fs::write(
        root.join("task.toml"),
        toml.replace("role = \"input\"", "role = \"in\""),
    )
    .unwrap();
    let (code, v) = check(&root);
    assert_eq!(code, Some(2), "{v}");
    assert!(v["error"].as_str().unwrap().contains("task.toml"), "{v}");

    // Names and folders task new refuses.
    for (name, want) in [
        ("my-scale", "already exists"),
        ("saxpy", "built-in task"),
        ("9lives", "expected a letter"),
        ("../escape", "expected a letter"),
    ] {
        let out = kevo(&cache, &["task", "new", name, "--dir", parent]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(want),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn the_example_folders_evaluate_tune_and_evolve() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    for name in ["heat2d", "nbody"] {
        let folder = examples().join(name);
        let (code, v) = eval_json(&cache, folder.to_str().unwrap(), None);
        assert_eq!(code, Some(0), "{v}");
        assert_eq!(v["task"], format!("{name}-folder"));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let saxpy = examples().join("saxpy");
    let ws = dir.path().join("ws");
    let tunable = repo.join("crates/tasks/assets/saxpy/tunable.cl");
    let out = kevo(
        &cache,
        &[
            "tune",
            "--task",
            saxpy.to_str().unwrap(),
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
            "--kernel",
            tunable.to_str().unwrap(),
            "--budget",
            "3",
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["task"], "saxpy-folder", "{report}");
    let replay = repo.join("examples/replay/saxpy-opencl.jsonl");
    let start = repo.join("examples/replay/opencl/start_slow.cl");
    let llm = format!("replay:{}", replay.display());
    let mut args = vec!["evolve", "--task", saxpy.to_str().unwrap()];
    args.extend(common::OPENCL_SMOKE);
    args.extend([
        "--llm",
        &llm,
        "--iterations",
        "4",
        "--seed-kernel",
        start.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
    ]);
    let out = kevo(&cache, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The replayed fast kernel beats the slow start on the folder's task.
    assert!(
        stdout.contains("(saxpy-folder): 4 iterations done"),
        "{stdout}"
    );
    assert!(stdout.contains("from iteration 4, score"), "{stdout}");

    // heat2d and nbody: tuned from the built-in's tunable variant, and an
    // evolution whose (replayed) model answers with the folder's reference
    // kernel, correct on the folder's task.
    for name in ["heat2d", "nbody"] {
        let folder = examples().join(name);
        let tunable = repo.join(format!("crates/tasks/assets/{name}/tunable.cl"));
        let task = folder.to_str().unwrap();
        let common = common::OPENCL_SMOKE;
        let mut args = vec!["tune", "--task", task];
        args.extend(common);
        args.extend([
            "--kernel",
            tunable.to_str().unwrap(),
            "--budget",
            "2",
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ]);
        let out = kevo(&cache, &args);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["task"], format!("{name}-folder"), "{report}");
        let replay = dir.path().join(format!("{name}.jsonl"));
        let made = Command::new("python3")
            .arg(repo.join("scripts/make-replay"))
            .arg(&replay)
            .arg(folder.join("reference.cl"))
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let llm = format!("replay:{}", replay.display());
        let mut args = vec!["evolve", "--task", task];
        args.extend(common);
        args.extend([
            "--llm",
            &llm,
            "--iterations",
            "1",
            "--workspace",
            ws.to_str().unwrap(),
        ]);
        let out = kevo(&cache, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("({name}-folder): 1 iterations done")),
            "{stdout}"
        );
    }
}

#[test]
fn a_folder_run_resumes_from_anywhere_and_refuses_an_edited_folder() {
    if !common::opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let root = saxpy_with_reference(
        dir.path(),
        "resumable",
        "kernel = { opencl = \"reference.cl\", cuda = \"reference.cu\" }",
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ws = dir.path().join("ws");
    let replay = repo.join("examples/replay/saxpy-opencl.jsonl");
    // Started from the folder's parent with a relative path.
    let mut evolve = Command::new(env!("CARGO_BIN_EXE_kevo"));
    evolve
        .current_dir(dir.path())
        .args(["evolve", "--task", "./resumable"])
        .args(common::OPENCL_SMOKE)
        .args([
            "--llm",
            &format!("replay:{}", replay.display()),
            "--iterations",
            "4",
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ])
        .env("KEVO_CACHE_DIR", &cache);
    let run = common::kill_after_iteration(&mut evolve, 1);
    let resume = || {
        Command::new(env!("CARGO_BIN_EXE_kevo"))
            .args([
                "evolve",
                "--resume",
                &run,
                "--workspace",
                ws.to_str().unwrap(),
            ])
            .env("KEVO_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    let brief = std::fs::read_to_string(root.join("brief.md")).unwrap();
    std::fs::write(root.join("brief.md"), format!("{brief}\nedited\n")).unwrap();
    let out = resume();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the problem changed since the run began"),
        "{stderr}"
    );
    std::fs::write(root.join("brief.md"), brief).unwrap();
    let out = resume();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(resumable): 4 iterations done"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

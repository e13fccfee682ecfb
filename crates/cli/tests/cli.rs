//! The `kevo` binary end to end on PoCL: outputs, exit codes and one-line
//! errors for bad input.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// One ceiling cache for the whole test binary, filled once, so the tests
/// do not each run the micro-benchmarks.
fn cache_dir() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
            .arg("devices")
            .env("KEVO_CACHE_DIR", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, path)
    })
    .1
}

fn opencl_available() -> bool {
    let ok = kevo_available();
    if !ok && std::env::var_os("CI").is_some() {
        panic!("OpenCL must be available in CI");
    }
    ok
}

fn kevo_available() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .arg("devices")
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .any(|d| d["backend"] == "opencl" && d["available"] == true)
}

fn kevo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .env("KEVO_CACHE_DIR", cache_dir())
        .output()
        .unwrap()
}

fn fixture(name: &str) -> String {
    format!(
        "{}/../eval/tests/kernels/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn tasks_lists_every_task_with_its_sizes() {
    let out = kevo(&["tasks"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(stdout.contains("saxpy") && stdout.contains("1M, 16M, 64M") && stdout.contains("4M"));
    assert!(stdout.contains("heat2d") && stdout.contains("768x768_75"));
    let json: serde_json::Value =
        serde_json::from_slice(&kevo(&["tasks", "--json"]).stdout).unwrap();
    assert_eq!(json[0]["name"], "saxpy");
    assert_eq!(json[0]["smoke"]["held_out"]["label"], "128K");
}

#[test]
fn seeds_evaluate_correct_at_smoke_sizes() {
    if !opencl_available() {
        return;
    }
    for task in ["saxpy", "heat2d"] {
        let out = kevo(&[
            "eval",
            "--task",
            task,
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
        ]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("result: correct, score"), "{stdout}");
        assert!(
            stdout.contains("wall") && stdout.contains("compile"),
            "{stdout}"
        );
    }
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"]["status"], "correct");
    assert!(v["outcome"]["score"].as_f64().unwrap() > 0.0);
    assert_eq!(v["sizes"].as_array().unwrap().len(), 3);
    let out = kevo(&[
        "eval",
        "--task",
        "heat2d",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--held-out",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sizes"][0]["label"], "96x96_15");
    assert_eq!(v["sizes"].as_array().unwrap().len(), 1);
}

#[test]
fn a_wrong_kernel_exits_1_with_size_metric_value_and_tolerance() {
    if !opencl_available() {
        return;
    }
    let k = fixture("heat2d_skips_boundary.cl");
    let out = kevo(&[
        "eval",
        "--task",
        "heat2d",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--kernel",
        &k,
    ]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("wrong result at size 64x64_20: max_abs=NaN (tolerance 2.000e-6)"),
        "{stdout}"
    );
}

#[test]
fn a_syntax_error_exits_1_with_the_compiler_line() {
    if !opencl_available() {
        return;
    }
    let k = fixture("saxpy_syntax_error.cl");
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--kernel",
        &k,
    ]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("compile error: line 4"), "{stdout}");
    assert!(stdout.contains("yy"), "{stdout}");
}

/// Each kind of bad input gets one line on stderr and no panic.
#[test]
fn bad_input_gets_a_one_line_error() {
    let missing = fixture("does_not_exist.cl");
    let cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (
            vec!["eval", "--task", "nope", "--sizes", "smoke"],
            "unknown task `nope`",
            2,
        ),
        (
            vec![
                "eval",
                "--task",
                "saxpy",
                "--backend",
                "opencl",
                "--sizes",
                "smoke",
                "--kernel",
                &missing,
            ],
            "cannot read kernel file",
            2,
        ),
        (
            vec![
                "eval",
                "--task",
                "saxpy",
                "--backend",
                "opencl",
                "--device",
                "no-such-gpu",
                "--sizes",
                "smoke",
            ],
            "no OpenCL device matches",
            2,
        ),
        (
            vec!["eval", "--task", "saxpy", "--sizes", "huge"],
            "unknown size set `huge`",
            2,
        ),
        (
            vec![
                "eval",
                "--task",
                "saxpy",
                "--sizes",
                "smoke",
                "--ceilings",
                "3350",
            ],
            "--ceilings must be two positive numbers",
            2,
        ),
        (
            vec![
                "eval",
                "--task",
                "saxpy",
                "--sizes",
                "smoke",
                "--ceilings",
                "3350,-1",
            ],
            "--ceilings must be two positive numbers",
            2,
        ),
    ];
    let opencl = opencl_available();
    for (args, needle, code) in cases {
        if !opencl && args.contains(&"--device") {
            continue;
        }
        let out = kevo(&args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or("");
        assert!(
            first.starts_with("error: ") && first.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        // Beyond the message only clap's pointer to --help may follow.
        assert!(
            stderr
                .trim()
                .lines()
                .skip(1)
                .all(|l| l.trim().is_empty() || l.contains("--help")),
            "{args:?}: {stderr}"
        );
    }
    if !opencl {
        return;
    }
    // Candidate-level failures are outcomes (exit 1), also in one line.
    for (file, needle) in [
        (
            "saxpy_wrong_name.cl",
            "does not define the entry point `saxpy`",
        ),
        (
            "saxpy_missing_argument.cl",
            "takes 3 arguments, the launch passes 4",
        ),
    ] {
        let k = fixture(file);
        let out = kevo(&[
            "eval",
            "--task",
            "saxpy",
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
            "--kernel",
            &k,
        ]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{file}: {stdout}{stderr}");
        assert!(stdout.contains(needle), "{file}: {stdout}");
        assert!(!stderr.contains("panicked"));
    }
}

#[test]
fn a_candidate_that_is_not_text_is_rejected_with_exit_1() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Invalid UTF-8 on line 2.
    let binary = dir.path().join("binary.cl");
    std::fs::write(&binary, b"// saxpy\n__kernel void saxpy(\xff\xfe) {}\n").unwrap();
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--sizes",
        "smoke",
        "--kernel",
        binary.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("line 2") && stdout.contains("not valid UTF-8"),
        "{stdout}"
    );
    // A NUL byte: NVRTC would stop reading there while kevo read on.
    let nul = dir.path().join("nul.cl");
    let seed = kevo_tasks::by_name("saxpy")
        .unwrap()
        .seed(kevo_backend::Dialect::OpenCl)
        .unwrap();
    std::fs::write(&nul, format!("{seed}\n// \0 kevo: block 1024\n")).unwrap();
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--sizes",
        "smoke",
        "--kernel",
        nul.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("NUL"), "{stdout}");
}

/// `--ceilings` replaces the device's roofline: the seed, against ceilings a
/// million times below the device, is suspicious (exit 1), and the table
/// says why.
#[test]
fn declared_ceilings_are_scored_against_and_can_make_a_kernel_suspicious() {
    if !opencl_available() {
        return;
    }
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--ceilings",
        "0.001,0.01",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("suspicious"), "{stdout}");
    assert!(stdout.contains("faster than the hardware"), "{stdout}");
    assert!(stdout.contains("declared"), "{stdout}");
}

/// `kevo eval | head -1`: the reader goes away after the first line and
/// the table is written into a closed pipe. kevo ends quietly with 141
/// (128 + SIGPIPE, what a shell reports for tools that die of it) instead
/// of a panic and its backtrace.
#[test]
fn output_cut_short_by_a_closed_pipe_ends_quietly() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("stderr.txt");
    let out = Command::new("bash")
        .arg("-c")
        // The reader is gone before the evaluation prints its first line
        // (diagnostics go to stderr, so the first stdout line comes at the
        // end, all at once: `head -1` could read it all and race the exit).
        .arg(r#""$0" eval --task saxpy --backend opencl --sizes smoke 2>"$1" | head -c 0; echo "status ${PIPESTATUS[0]}""#)
        .arg(env!("CARGO_BIN_EXE_kevo"))
        .arg(&err)
        .env("KEVO_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stdout.trim_end().ends_with("status 141"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn profile_without_cuda_says_so_and_keeps_the_evaluation() {
    if !opencl_available() {
        return;
    }
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--profile",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("result: correct"), "{stdout}");
    assert!(
        stdout.contains("no profile: --profile needs the CUDA backend"),
        "{stdout}"
    );
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--profile",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"]["status"], "correct");
    assert!(
        v["profile_error"]
            .as_str()
            .unwrap()
            .contains("needs the CUDA backend"),
        "{v}"
    );
    assert!(v.get("profile").is_none(), "{v}");
    // A size the set lacks is the user's error.
    let out = kevo(&[
        "eval",
        "--task",
        "saxpy",
        "--backend",
        "opencl",
        "--sizes",
        "smoke",
        "--profile",
        "--profile-size",
        "64M",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--profile-size 64M: not a size of saxpy"),
        "{stderr}"
    );
}

/// `kevo devices` says whether the Triton dialect can compile here: the
/// interpreter and Triton's version, or why not and how to get it.
#[test]
fn devices_says_whether_triton_is_available_and_how_to_get_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["devices", "--json"])
        .env("KEVO_CACHE_DIR", cache_dir())
        .env("KEVO_TRITON_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let triton = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == "triton")
        .expect("a triton row")
        .clone();
    assert_eq!(triton["available"], false);
    let reason = triton["reason"].as_str().unwrap();
    assert!(reason.contains("/nonexistent/python3"), "{reason}");
    assert!(reason.contains("pip install triton"), "{reason}");
    // The flag wins over the environment.
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["devices", "--json", "--triton-python", "/elsewhere/python3"])
        .env("KEVO_CACHE_DIR", cache_dir())
        .env("KEVO_TRITON_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let triton = &rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == "triton")
        .expect("a triton row")["python"];
    assert_eq!(triton, "/elsewhere/python3");
    let out = kevo(&["devices"]);
    let (stdout, _) = text(&out);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("triton"))
        .expect("a triton line");
    // CI installs Triton (scripts/setup --triton); elsewhere either answer
    // is right, but it must be one of the two.
    if std::env::var_os("CI").is_some() {
        assert!(line.contains("Triton 3.6.0"), "{line}");
    } else {
        assert!(
            line.contains("Triton ") || line.contains("unavailable"),
            "{line}"
        );
    }
}

/// `--dialect triton` without a CUDA device, or without Triton, fails
/// before anything is evaluated, saying which is missing and how to get
/// it.
#[test]
fn the_triton_dialect_says_what_is_missing() {
    let cuda_here = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["devices", "--json"])
        .env("KEVO_CACHE_DIR", cache_dir())
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .is_some_and(|rows| {
            rows.as_array()
                .unwrap()
                .iter()
                .any(|r| r["backend"] == "cuda" && r["available"] == true)
        });
    // With a CUDA device and Triton installed, the default would run.
    let cases: &[Option<&str>] = if cuda_here {
        &[Some("/nonexistent/python3")]
    } else {
        &[None, Some("/nonexistent/python3")]
    };
    for &python in cases {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kevo"));
        command
            .args([
                "eval",
                "--task",
                "saxpy",
                "--dialect",
                "triton",
                "--sizes",
                "smoke",
            ])
            .env("KEVO_CACHE_DIR", cache_dir());
        if let Some(p) = python {
            command.args(["--triton-python", p]);
        }
        let out = command.output().unwrap();
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{stdout}{stderr}");
        if !cuda_here {
            assert!(
                stderr.contains("Triton kernels run on a CUDA device"),
                "{stderr}"
            );
        } else {
            assert!(
                stderr.contains("/nonexistent/python3") && stderr.contains("pip install triton"),
                "{stderr}"
            );
        }
    }
}

/// `kevo devices` prints its own lines only (PoCL's compiler once wrote
/// "1 warning and 45 errors generated.", from the FP16 probe that PoCL
/// cannot build, above the first one), and `--remeasure` adds to the
/// device's envelope.
#[test]
fn devices_prints_only_its_own_output_and_remeasure_adds_to_the_envelope() {
    if !opencl_available() {
        return;
    }
    // A fresh cache: every probe compiles now.
    let dir = tempfile::tempdir().unwrap();
    let devices = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
            .arg("devices")
            .args(args)
            .env("KEVO_CACHE_DIR", dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        text(&out)
    };
    let (stdout, stderr) = devices(&["--remeasure"]);
    assert_eq!(stderr, "", "kevo's own output only");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("opencl "), "{stdout}");
    assert!(!stdout.contains("generated."), "{stdout}");
    assert!(
        stdout.contains("envelope: the best of 1 measurement ("),
        "{stdout}"
    );
    let (again, stderr) = devices(&["--remeasure"]);
    assert_eq!(stderr, "");
    assert!(
        again.contains("envelope: the best of 2 measurements ("),
        "{again}"
    );
    assert!(again.contains("a ceiling only rises"), "{again}");
}

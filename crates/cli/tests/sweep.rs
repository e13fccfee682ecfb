//! `kevo sweep` on PoCL: a 2x2x2 grid (tasks x models x strategies) killed
//! in the middle of a cell, run again: finished cells are skipped, the
//! killed cell's run is resumed (not started twice), and the table has
//! every cell.

use crate::common;

use common::opencl_available;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `cmd:` proposer that answers every prompt with `kernel`'s text.
fn agent(dir: &Path, name: &str, kernel: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncat >/dev/null\nprintf '```c\\n'\ncat '{}'\nprintf '\\n// answered by {name}\\n```\\n'\n",
            kernel.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("cmd:{}", path.display())
}

fn sweep(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kevo"));
    cmd.args(["sweep", "grid.toml", "--workspace", "ws"])
        .current_dir(dir)
        .env("KEVO_CACHE_DIR", dir.join("cache"));
    cmd
}

#[test]
fn a_killed_sweep_resumes_skips_finished_cells_and_prints_the_table() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/assets");
    let a = agent(dir.path(), "a.sh", &assets.join("saxpy/seed.cl"));
    let b = agent(dir.path(), "b.sh", &assets.join("heat2d/seed.cl"));
    std::fs::write(
        dir.path().join("grid.toml"),
        format!(
            r#"
[base]
sizes = "smoke"
[base.device]
backend = "opencl"
[base.budget]
iterations = 1
[base.promotion]
rule = "strict"
[base.llm]
retries = 0

[axes]
task = ["saxpy", "heat2d"]
"llm.models" = ["{a}", "{b}"]
"strategy.name" = ["one-plus-one", "islands"]
"#
        ),
    )
    .unwrap();

    // The plan lists eight cells, none started.
    let plan = sweep(dir.path()).arg("--plan").output().unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout).to_string();
    assert_eq!(plan.lines().count(), 8, "{plan}");
    assert_eq!(plan.matches("not started").count(), 8, "{plan}");

    // Killed once the fourth cell has started its run.
    let mut child = sweep(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut first_lines = Vec::new();
    let state = dir.path().join("ws/sweeps/grid.json");
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no fourth cell: {first_lines:#?}"));
        first_lines.push(line.clone());
        if line.contains("cell 4/8") && line.ends_with("starting") {
            // Wait until its run exists (the state names it), then kill.
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until
                && std::fs::read_to_string(&state)
                    .unwrap_or_default()
                    .matches("\"run\"")
                    .count()
                    < 4
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            break;
        }
    }
    // SAFETY: signalling our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    let finished_before = first_lines
        .iter()
        .filter(|l| l.contains("in-distribution"))
        .count();
    assert_eq!(finished_before, 3, "{first_lines:#?}");

    // Run again: three skipped, the fourth resumed, the rest started.
    let out = sweep(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        stderr.matches("finished earlier; skipped").count(),
        3,
        "{stderr}"
    );
    assert!(
        stderr.contains("cell 4/8") && stderr.contains("resuming run"),
        "{stderr}"
    );
    assert_eq!(stderr.matches(": starting").count(), 4, "{stderr}");
    assert!(out.status.success(), "{stderr}\n{stdout}");
    // The table: a row per cell, each finished once.
    assert!(stdout.contains("held-out Φ"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("task=")).collect();
    assert_eq!(rows.len(), 8, "{stdout}");
    assert!(rows.iter().all(|r| r.contains(" 1/1 ")), "{stdout}");
    // The saxpy cells with the saxpy kernel found it correct; the heat2d
    // kernel is wrong for saxpy.
    let report = sweep(dir.path())
        .args(["--report", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 8);
    let correct = |task: &str, agent: &str| -> Vec<f64> {
        groups
            .iter()
            .filter(|g| {
                let name = g["group"].as_str().unwrap();
                name.contains(&format!("task={task} ")) && name.contains(agent)
            })
            .map(|g| g["correct_rate"]["median"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(correct("saxpy", "a.sh"), [1.0, 1.0], "{report:#}");
    assert_eq!(correct("saxpy", "b.sh"), [0.0, 0.0], "{report:#}");
    assert!(
        groups
            .iter()
            .all(|g| g["speedup"]["median"].as_f64().is_some()),
        "{report:#}"
    );

    // One run per cell: nothing was started twice.
    let runs = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["runs", "--workspace", "ws", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 8);

    // A third time: nothing runs, the same table.
    let again = sweep(dir.path()).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&again.stderr)
            .matches("skipped")
            .count(),
        8
    );
    assert_eq!(String::from_utf8_lossy(&again.stdout), stdout);
}

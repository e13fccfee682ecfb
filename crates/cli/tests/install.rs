//! An installed kevo works from any directory: task assets and prompt
//! templates are compiled in, the evaluation worker is the binary itself,
//! and the workspace is `.kevo` under the directory it runs in.
//!
//! The binary under test is the one `cargo test` built, copied alone into a
//! prefix far from the repository: `cargo install --path crates/cli` puts
//! the same program, built from the same sources, in `bin/`. Running
//! `cargo install` here instead
//! built every dependency a second time in a target directory of its own,
//! about ten minutes of a two-core CI machine.

use crate::common;

use common::opencl_available;
use std::process::Command;

#[test]
fn an_installed_kevo_evaluates_from_another_directory() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("prefix/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kevo = bin.join("kevo");
    std::fs::copy(env!("CARGO_BIN_EXE_kevo"), &kevo).unwrap();

    // Far from the repository: an empty directory elsewhere.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = Command::new(&kevo)
        .args([
            "eval",
            "--task",
            "saxpy",
            "--sizes",
            "smoke",
            "--backend",
            "opencl",
        ])
        .current_dir(&elsewhere)
        .env("KEVO_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("correct"), "{stdout}");
    let version = Command::new(&kevo).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).contains("commit"),
        "{version:?}"
    );
    let completions = Command::new(&kevo)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&completions.stdout).contains("sweep"));
}

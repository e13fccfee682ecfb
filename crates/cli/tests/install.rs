//! `cargo install --path crates/cli --root DIR` gives a kevo that works
//! from any directory: task assets and prompt templates are compiled in,
//! the evaluation worker is the binary itself, and the workspace is
//! `.kevo` under the directory it runs in.

mod common;

use common::opencl_available;
use std::path::Path;
use std::process::Command;

#[test]
fn an_installed_kevo_evaluates_from_another_directory() {
    if !opencl_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The workspace's lock file, the debug profile, and a build directory
    // of its own (the tests' own may be locked while they run).
    let target = root.join("target/install-test");
    let out = Command::new(cargo)
        .args(["install", "--locked", "--debug", "--path"])
        .arg(root.join("crates/cli"))
        .arg("--root")
        .arg(&prefix)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kevo = prefix.join("bin/kevo");
    assert!(kevo.is_file(), "no {}", kevo.display());

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

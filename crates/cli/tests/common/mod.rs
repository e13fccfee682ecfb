//! Helpers shared by the CLI's integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `kevo devices` finds an OpenCL device; CI must have one (PoCL).
pub fn opencl_available() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(["devices", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let ok = v.as_array().is_some_and(|a| {
        a.iter()
            .any(|d| d["backend"] == "opencl" && d["available"] == true)
    });
    if !ok && std::env::var_os("CI").is_some() {
        panic!("OpenCL must be available in CI");
    }
    ok
}

/// Every file under `dir`, recursively, that holds `needle` as bytes.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}

//! Puts the git commit kevo was built from into `KEVO_COMMIT` ("unknown"
//! outside a git checkout, e.g. a crates.io source), for provenance.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=KEVO_COMMIT={commit}");
    // Rebuilt when HEAD moves: a new commit rewrites the branch's ref (or
    // packed-refs), a checkout rewrites HEAD. Only paths that exist are
    // watched (a missing one would rerun this script on every build).
    let mut watched = vec!["HEAD".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    watched.push("packed-refs".into());
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && std::path::Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

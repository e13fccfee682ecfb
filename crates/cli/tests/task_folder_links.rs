//! A task folder's files must resolve inside it: a `brief.md` that is a
//! symbolic link to a file outside (a key, a private note) is refused by
//! name, with where it points, before anything of it reaches a prompt or
//! the store; a link that stays inside the folder is followed.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};

const CANARY: &str = "PRIVATE-CANARY-7f3a";

fn kevo(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .env("KEVO_CACHE_DIR", cache)
        .output()
        .unwrap()
}

fn check(cache: &Path, root: &Path) -> (Option<i32>, serde_json::Value) {
    let out = kevo(
        cache,
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
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(CANARY)
            && !String::from_utf8_lossy(&out.stderr).contains(CANARY)
    );
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

#[test]
fn a_brief_linked_outside_the_folder_is_refused_and_one_linked_inside_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let parent = dir.path().join("tasks");
    std::fs::create_dir(&parent).unwrap();
    let out = kevo(
        &cache,
        &["task", "new", "my-scale", "--dir", parent.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = parent.join("my-scale");
    let secret = dir.path().join("notes.txt");
    std::fs::write(&secret, format!("{CANARY}\n")).unwrap();
    let brief = root.join("brief.md");
    let text = std::fs::read_to_string(&brief).unwrap();

    // Outside: refused before any device is opened, naming the link and
    // its target.
    std::fs::remove_file(&brief).unwrap();
    symlink(&secret, &brief).unwrap();
    let (code, v) = check(&cache, &root);
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["key"], "brief.md", "{v}");
    let error = v["error"].as_str().unwrap();
    let target = std::fs::canonicalize(&secret).unwrap();
    assert!(
        error.contains(&format!(
            "brief.md: is a symbolic link to {}, outside the task folder",
            target.display()
        )),
        "{error}"
    );
    // `kevo eval --task` (and so evolve) loads the folder the same way.
    let out = kevo(
        &cache,
        &[
            "eval",
            "--task",
            root.to_str().unwrap(),
            "--backend",
            "opencl",
            "--sizes",
            "smoke",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("outside the task folder"), "{stderr}");
    assert!(!stderr.contains(CANARY) && !String::from_utf8_lossy(&out.stdout).contains(CANARY));

    // Inside: followed, and the scaffold still checks.
    if !common::opencl_available() {
        return;
    }
    std::fs::remove_file(&brief).unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/brief.md"), text).unwrap();
    symlink("docs/brief.md", &brief).unwrap();
    let (code, v) = check(&cache, &root);
    assert_eq!(code, Some(0), "{v:#}");
}

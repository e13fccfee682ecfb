//! Run config files on the command line: `--config FILE` under flags,
//! `kevo config show`, `kevo show RUN --config` and `--config-from RUN`; a
//! bad file is refused naming its line and key, with nothing stored.

use crate::common;

use common::opencl_available;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kevo(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kevo"))
        .args(args)
        .current_dir(dir)
        .env("KEVO_CACHE_DIR", dir.join("cache"))
        .env_remove("KEVO_LLM_CONFIG")
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn replay_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/replay/saxpy-opencl.jsonl")
}

/// The value of `key = ...` in `section` of TOML text.
fn value(text: &str, section: &str, key: &str) -> Option<toml::Value> {
    let table: toml::Table = toml::from_str(text).unwrap();
    let t = if section.is_empty() {
        &table
    } else {
        table.get(section)?.as_table()?
    };
    t.get(key).cloned()
}

#[test]
fn config_show_layers_defaults_then_the_file_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("exp.toml"),
        "task = \"heat2d\"\nsizes = \"smoke\"\n[budget]\niterations = 4\n[llm]\nmodels = [\"cmd:./a.sh\"]\nconcurrency = 2\n",
    )
    .unwrap();
    let shown = ok(kevo(
        dir.path(),
        &[
            "config",
            "show",
            "--config",
            "exp.toml",
            "--iterations",
            "9",
            "--strategy",
            "islands",
        ],
    ));
    // Flag over file, file over default, default where neither says.
    assert_eq!(value(&shown, "budget", "iterations"), Some(9.into()));
    assert_eq!(value(&shown, "llm", "concurrency"), Some(2.into()));
    assert_eq!(value(&shown, "", "sizes"), Some("smoke".into()));
    assert_eq!(
        value(&shown, "llm", "candidates_per_iteration"),
        Some(1.into())
    );
    assert_eq!(value(&shown, "strategy", "population"), Some(8.into()));
    // The printed settings are a config file that gives the same settings.
    std::fs::write(dir.path().join("again.toml"), &shown).unwrap();
    let again = ok(kevo(
        dir.path(),
        &["config", "show", "--config", "again.toml"],
    ));
    assert_eq!(again, shown);
}

#[test]
fn a_bad_config_file_is_refused_with_its_line_and_key_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    for (text, wanted) in [
        (
            "task = \"saxpy\"\n[llm]\nmodels = [\"cmd:true\"]\nconcurency = 2\n",
            "bad.toml:4: key `llm.concurency`: unknown field `concurency`",
        ),
        (
            "task = \"saxpy\"\n[budget]\niterations = \"ten\"\n",
            "bad.toml:3: key `budget.iterations`: invalid type: string \"ten\"",
        ),
        (
            "task = \"saxpy\"\n[strategy]\nname = \"map-elites\"\npopulation = 4\n",
            "bad.toml:4: key `strategy.population`: applies to islands only",
        ),
    ] {
        std::fs::write(dir.path().join("bad.toml"), text).unwrap();
        let out = kevo(
            dir.path(),
            &["evolve", "--config", "bad.toml", "--workspace", "ws"],
        );
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(wanted), "{text:?}: {stderr}");
        assert!(
            !dir.path().join("ws/runs").exists(),
            "{text:?}: a run was stored"
        );
    }
    // A bad flag over a good file names the flag.
    std::fs::write(dir.path().join("good.toml"), "task = \"saxpy\"\n").unwrap();
    let out = kevo(
        dir.path(),
        &[
            "evolve",
            "--config",
            "good.toml",
            "--llm",
            "cmd:true",
            "--concurrency",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--concurrency: must be at least 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_run_from_a_config_file_stores_its_settings_and_config_from_repeats_them() {
    if !opencl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("exp")).unwrap();
    std::fs::copy(replay_file(), dir.path().join("exp/answers.jsonl")).unwrap();
    // A relative path in the file is relative to the file.
    std::fs::write(
        dir.path().join("exp/run.toml"),
        r#"task = "saxpy"
sizes = "smoke"

[device]
backend = "opencl"

[llm]
models = ["replay:answers.jsonl"]
retries = 0

[budget]
iterations = 4

[prompt]
history = 5
stagnation_window = 2

[promotion]
rule = "strict"
"#,
    )
    .unwrap();
    let run_of = |out: &str| -> String {
        out.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "created")
            .and_then(|v| v["run"].as_str().map(String::from))
            .expect("a created event")
    };
    let first = ok(kevo(
        dir.path(),
        &[
            "evolve",
            "--config",
            "exp/run.toml",
            "--iterations",
            "2",
            "--workspace",
            "ws",
            "--json",
        ],
    ));
    let run = run_of(&first);
    let stored = ok(kevo(
        dir.path(),
        &["show", &run, "--config", "--workspace", "ws"],
    ));
    assert_eq!(
        value(&stored, "budget", "iterations"),
        Some(2.into()),
        "{stored}"
    );
    assert_eq!(value(&stored, "prompt", "history"), Some(5.into()));
    assert_eq!(
        value(&stored, "prompt", "stagnation_window"),
        Some(2.into())
    );
    assert_eq!(value(&stored, "promotion", "rule"), Some("strict".into()));
    assert_eq!(
        value(&stored, "promotion", "final_remeasure"),
        Some(0.into())
    );
    let models = value(&stored, "llm", "models").unwrap();
    let model = models.as_array().unwrap()[0].as_str().unwrap();
    assert!(
        model.starts_with("replay:") && model.ends_with("exp/answers.jsonl"),
        "{model}"
    );
    // Two iterations ran.
    let show = ok(kevo(
        dir.path(),
        &["show", &run, "--json", "--workspace", "ws"],
    ));
    let v: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(v["history"].as_array().unwrap().len(), 3, "{show}");

    // The same settings again from the stored run, one changed by a flag.
    let second = ok(kevo(
        dir.path(),
        &[
            "evolve",
            "--config-from",
            &run,
            "--iterations",
            "1",
            "--workspace",
            "ws",
            "--json",
        ],
    ));
    let run2 = run_of(&second);
    assert_ne!(run2, run);
    let stored2 = ok(kevo(
        dir.path(),
        &["show", &run2, "--config", "--workspace", "ws"],
    ));
    assert_eq!(
        stored2
            .replace("iterations = 1", "iterations = 2")
            .replace(&run2, &run),
        stored.replace(&run2, &run)
    );
}

#[test]
fn the_shipped_config_and_sweep_examples_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let config = root.join("examples/configs/heat2d-map-elites.toml");
    let shown = ok(kevo(
        dir.path(),
        &["config", "show", "--config", config.to_str().unwrap()],
    ));
    assert_eq!(value(&shown, "strategy", "name"), Some("map-elites".into()));
    assert_eq!(value(&shown, "llm", "concurrency"), Some(4.into()));
    let sweep = root.join("examples/sweeps/strategies-vs-one-plus-one.toml");
    let plan = ok(kevo(
        dir.path(),
        &[
            "sweep",
            sweep.to_str().unwrap(),
            "--plan",
            "--workspace",
            "ws",
        ],
    ));
    // 3 tasks x 3 strategies x 3 repeats.
    assert_eq!(plan.lines().count(), 27, "{plan}");
    assert!(
        plan.contains("task=lbm strategy=islands(islands:4,population:6) #3"),
        "{plan}"
    );
}

use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const GRID: &str = r#"
repeats = 2
[base]
sizes = "smoke"
[base.llm]
models = ["cmd:./a.sh"]
[base.budget]
iterations = 3
[axes]
task = ["saxpy", "heat2d"]
strategy = [{ name = "one-plus-one" }, { name = "islands", islands = 2 }]
"#;

#[test]
fn a_grid_expands_to_every_combination_and_repeat_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let plan = SweepPlan::load(&write(dir.path(), "cmp.toml", GRID)).unwrap();
    assert_eq!(plan.name, "cmp");
    assert_eq!(plan.cells.len(), 8);
    let keys: Vec<&str> = plan.cells.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "task=saxpy strategy=one-plus-one #1",
            "task=saxpy strategy=one-plus-one #2",
            "task=saxpy strategy=islands(islands:2) #1",
            "task=saxpy strategy=islands(islands:2) #2",
            "task=heat2d strategy=one-plus-one #1",
            "task=heat2d strategy=one-plus-one #2",
            "task=heat2d strategy=islands(islands:2) #1",
            "task=heat2d strategy=islands(islands:2) #2",
        ]
    );
    let c = &plan.cells[3];
    assert_eq!(c.options.task, "saxpy");
    assert_eq!(c.options.iterations, 3);
    assert_eq!(c.options.sizes, kevo_tasks::SizeSet::Smoke);
    let kevo_strategy::StrategyConfig::Islands(i) = &c.options.strategy else {
        panic!("{:?}", c.options.strategy)
    };
    assert_eq!(i.islands, 2);
    // Repeats differ in their seeds only.
    let (a, b) = (&plan.cells[2].options, &plan.cells[3].options);
    assert_eq!(b.rng_seed, a.rng_seed + 1);
    let mut b2 = b.clone();
    b2.rng_seed = a.rng_seed;
    if let kevo_strategy::StrategyConfig::Islands(i) = &mut b2.strategy {
        i.rng_seed -= 1;
    }
    assert_eq!(&b2, a);
}

#[test]
fn bad_sweep_files_say_where() {
    let cases: &[(&str, &str)] = &[
        (
            "[axes]\ntask = \"saxpy\"",
            "s.toml:2: axis `task`: give its values as a list",
        ),
        ("[axes]\ntask = []", "s.toml:2: axis `task` has no values"),
        (
            "repeats = 0\n[axes]",
            "s.toml:1: key `repeats`: must be at least 1",
        ),
        (
            "repeat = 2\n[axes]",
            "s.toml:1: key `repeat`: unknown field `repeat`",
        ),
        (
            "[base]\ntask = \"saxpy\"\n[base.llm]\nconcurrency = 0\n[axes]\n\"llm.models\" = [\"cmd:x\"]",
            "s.toml:4: key `llm.concurrency`: must be at least 1",
        ),
        (
            "[base.llm]\nmodels = [\"cmd:x\"]\n[axes]\ntask = [\"saxpy\", \"nope\"]",
            "axis `task` = \"nope\": key `task`",
        ),
        ("[axes]\ntask = [\"saxpy\"]", "cell task=saxpy: no model"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (text, wanted) in cases {
        let e = SweepPlan::load(&write(dir.path(), "s.toml", text))
            .expect_err(text)
            .to_string();
        assert!(e.contains(wanted), "{text:?}: {e}");
    }
}

#[test]
fn the_state_keeps_runs_and_refuses_a_cell_whose_settings_changed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = SweepPlan::load(&write(dir.path(), "cmp.toml", GRID)).unwrap();
    let path = SweepState::path(dir.path(), &plan.name);
    let mut state = SweepState::load(&path).unwrap();
    assert!(state.cells.is_empty());
    let cell = &plan.cells[0];
    state.cells.insert(
        cell.key.clone(),
        CellState {
            run: Some("r1".into()),
            options: serde_json::to_value(&cell.options).unwrap(),
            error: None,
        },
    );
    state.save(&path).unwrap();
    let state = SweepState::load(&path).unwrap();
    assert_eq!(state.run_of(cell).unwrap().as_deref(), Some("r1"));
    assert_eq!(state.run_of(&plan.cells[1]).unwrap(), None);
    let edited = SweepPlan::load(&write(
        dir.path(),
        "cmp.toml",
        &GRID.replace("iterations = 3", "iterations = 4"),
    ))
    .unwrap();
    let e = state.run_of(&edited.cells[0]).unwrap_err().to_string();
    assert!(e.contains("settings changed since its run r1"), "{e}");
}

#[test]
fn rows_give_median_and_range_over_finished_repeats() {
    let cell = |group: &str, status: &str, speedup: f64| CellResult {
        key: format!("{group} {speedup}"),
        group: group.into(),
        status: status.into(),
        speedup: Some(speedup),
        ..Default::default()
    };
    let rows = group_rows(&[
        cell("a", "finished", 2.0),
        cell("b", "finished", 1.0),
        cell("a", "finished", 4.0),
        cell("a", "finished", 3.0),
        cell("a", "interrupted", 100.0),
    ]);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].group, "a");
    assert_eq!((rows[0].finished, rows[0].cells), (3, 4));
    let s = rows[0].speedup.unwrap();
    assert_eq!((s.median, s.min, s.max), (3.0, 2.0, 4.0));
    assert_eq!(s.describe(2), "3.00 (2.00-4.00)");
    assert_eq!(rows[1].speedup.unwrap().describe(2), "1.00");
    assert!(rows[0].held_out_phi.is_none());
}

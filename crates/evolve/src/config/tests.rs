use std::path::{Path, PathBuf};

use kevo_proposer::EditMode;
use kevo_runtimes::BackendKind;
use kevo_strategy::{Promotion, StrategyConfig};
use kevo_tasks::SizeSet;

use super::*;
use crate::options::{EvolveOptions, PromptOptions};

fn file(text: &str) -> Result<ConfigLayer, ConfigError> {
    ConfigLayer::from_text(Path::new("/exp/run.toml"), text.to_string())
}

fn flags(config: RunConfig, named: &[(&str, &str)]) -> ConfigLayer {
    let named = named
        .iter()
        .map(|(k, f)| (k.to_string(), f.to_string()))
        .collect();
    ConfigLayer::from_flags(toml::Table::try_from(&config).unwrap(), named).expect("valid flags")
}

fn effective(layers: &[ConfigLayer]) -> EvolveOptions {
    merge(layers)
        .expect("merged")
        .to_options()
        .expect("options")
}

const FILE: &str = r#"
task = "heat2d"
sizes = "smoke"
seed_kernel = "seeds/start.cl"

[device]
backend = "opencl"
ceilings = { bandwidth_gbs = 100.0, fp32_gflops = 2000.0 }

[timing]
flush_l2 = true
max_timed_runs = 20

[limits]
compile_memory_gib = 2.0

[sandbox]
allow_read = ["/opt/cuda", "drivers"]

[llm]
models = ["cmd:./a.sh", "cmd:./b.sh=0.5"]
analyst = "cmd:./advise.sh"
concurrency = 3
edit_mode = "diff"

[budget]
iterations = 7
max_wall_s = 60.0

[prompt]
history = 4
stagnation_gap = 0.1

[promotion]
rule = "strict"

[tune]
best_of = 4
strategy = "local"

[strategy]
name = "map-elites"
islands = 2
hints = 1
"#;

#[test]
fn defaults_then_file_then_flags_for_every_kind_of_key() {
    // Defaults alone (a task is the one thing without a default).
    let only_task = RunConfig {
        task: Some("saxpy".into()),
        ..Default::default()
    };
    let d = effective(&[flags(only_task, &[])]);
    let reference = EvolveOptions::new("saxpy", &[], 10);
    assert_eq!(d.iterations, 10);
    assert_eq!(d.sizes, SizeSet::Full);
    assert_eq!(d.backend, BackendKind::Auto);
    assert!(d.timing.cuda_graph && !d.timing.flush_l2);
    assert_eq!(d.timing.max_timed_runs, Some(DEFAULT_MAX_TIMED_RUNS));
    assert_eq!(d.limits, reference.limits);
    assert_eq!(d.concurrency, 1);
    assert_eq!(d.edit_mode, EditMode::FullSource);
    assert_eq!(d.promotion, Promotion::default());
    assert_eq!(d.final_remeasure, crate::DEFAULT_FINAL_REMEASURE);
    assert_eq!(d.strategy, StrategyConfig::OnePlusOne);
    assert_eq!(d.prompt, PromptOptions::default());
    assert_eq!(d.tune.best_of, crate::DEFAULT_TUNE_BEST_OF);
    assert_eq!(d.tune.strategy, kevo_tune::StrategyKind::Tpe);
    assert_eq!(d.max_wall_s, None);

    // The file over the defaults: strings, enums, bools, integers, floats,
    // arrays, inline tables, paths (relative to the file) and the strategy.
    let f = file(FILE).expect("valid file");
    let o = effective(std::slice::from_ref(&f));
    assert_eq!(o.task, "heat2d");
    assert_eq!(o.sizes, SizeSet::Smoke);
    assert_eq!(o.backend, BackendKind::Opencl);
    assert_eq!(o.declared_ceilings.map(|c| c.fp32_gflops), Some(2000.0));
    assert!(o.timing.flush_l2 && o.timing.cuda_graph);
    assert_eq!(o.timing.max_timed_runs, Some(20));
    assert_eq!(o.limits.compile_memory_bytes, 2 << 30);
    assert_eq!(
        o.sandbox.readable,
        [PathBuf::from("/opt/cuda"), PathBuf::from("/exp/drivers")]
    );
    assert_eq!(o.llm, ["cmd:./a.sh", "cmd:./b.sh=0.5"]);
    assert_eq!(o.analyst.as_deref(), Some("cmd:./advise.sh"));
    assert_eq!(o.concurrency, 3);
    assert_eq!(o.edit_mode, EditMode::SearchReplace);
    assert_eq!(o.iterations, 7);
    assert_eq!(o.max_wall_s, Some(60.0));
    assert_eq!(o.prompt.history_len, 4);
    assert_eq!(o.prompt.stagnation.gap, 0.1);
    assert_eq!(
        o.prompt.stagnation.window, 3,
        "a key left out keeps its default"
    );
    assert_eq!(o.promotion, Promotion::Strict);
    assert_eq!(o.final_remeasure, 0, "strict promotion's default");
    assert_eq!(o.tune.best_of, 4);
    assert_eq!(o.tune.strategy, kevo_tune::StrategyKind::Local);
    let StrategyConfig::MapElites(me) = &o.strategy else {
        panic!("{:?}", o.strategy)
    };
    assert_eq!((me.islands, me.hints, me.elites_shown), (2, 1, 3));
    let merged = merge(std::slice::from_ref(&f)).unwrap();
    assert_eq!(
        merged.seed_kernel,
        Some(PathBuf::from("/exp/seeds/start.cl"))
    );

    // Flags over the file, key by key: what they do not set stays the file's.
    let over = RunConfig {
        sizes: Some(SizeSet::Full),
        device: DeviceSection {
            fast_math: Some(false),
            ..Default::default()
        },
        timing: TimingSection {
            max_timed_runs: Some(30),
            ..Default::default()
        },
        llm: LlmSection {
            models: Some(vec!["cmd:./c.sh".into()]),
            ..Default::default()
        },
        budget: BudgetSection {
            max_wall_s: Some(5.0),
            ..Default::default()
        },
        strategy: Some(StrategyConfig::MapElites(kevo_strategy::MapElitesConfig {
            islands: 5,
            ..Default::default()
        })),
        ..Default::default()
    };
    // Only the keys given on the command line go into the flag layer.
    let mut table = toml::Table::try_from(&over).unwrap();
    let strategy = table["strategy"].as_table_mut().unwrap();
    strategy.retain(|k, _| k == "name" || k == "islands");
    let flag_layer = ConfigLayer {
        table,
        origin: Origin::Flags { flags: vec![] },
    };
    let o = effective(&[f.clone(), flag_layer]);
    assert_eq!(o.sizes, SizeSet::Full);
    assert!(!o.fast_math);
    assert!(o.timing.flush_l2, "the file's, no flag given");
    assert_eq!(o.timing.max_timed_runs, Some(30));
    assert_eq!(o.llm, ["cmd:./c.sh"], "an array is replaced, not appended");
    assert_eq!(o.max_wall_s, Some(5.0));
    assert_eq!(o.iterations, 7);
    let StrategyConfig::MapElites(me) = &o.strategy else {
        panic!()
    };
    assert_eq!(
        (me.islands, me.hints),
        (5, 1),
        "same strategy: merged key by key"
    );

    // A flag naming another strategy replaces the file's strategy table.
    let islands = RunConfig {
        strategy: Some(StrategyConfig::Islands(Default::default())),
        ..Default::default()
    };
    let mut table = toml::Table::try_from(&islands).unwrap();
    table["strategy"]
        .as_table_mut()
        .unwrap()
        .retain(|k, _| k == "name");
    let o = effective(&[
        f,
        ConfigLayer {
            table,
            origin: Origin::Flags { flags: vec![] },
        },
    ]);
    assert_eq!(o.strategy, StrategyConfig::Islands(Default::default()));
}

#[test]
fn malformed_configs_name_the_file_line_and_key() {
    let cases: &[(&str, &[&str])] = &[
        ("task = ", &["run.toml:1", "string values must be quoted"]),
        ("tsk = \"saxpy\"", &["run.toml:1", "unknown field `tsk`"]),
        (
            "[tune]\nstrategy = \"bayes\"",
            &[
                "run.toml:2",
                "key `tune.strategy`",
                "unknown variant `bayes`",
            ],
        ),
        ("task = \"nope\"", &["run.toml:1", "key `task`", "nope"]),
        (
            "[llm]\nconcurrency = \"four\"",
            &["run.toml:2", "key `llm.concurrency`", "invalid type"],
        ),
        (
            "[llm]\nconcurrency = 0",
            &["run.toml:2", "key `llm.concurrency`", "at least 1"],
        ),
        (
            "[llm]\nmodels = []",
            &["run.toml:2", "key `llm.models`", "names no model"],
        ),
        (
            "[llm]\nmodels = [\"cmd:\"]",
            &["run.toml:2", "key `llm.models`"],
        ),
        (
            "[device]\nsanitize_winner = [\"leakcheck\"]",
            &["run.toml:2", "key `device.sanitize_winner`", "leakcheck"],
        ),
        (
            "[llm]\nanalyst = \"external\"",
            &["run.toml:2", "key `llm.analyst`", "called by kevo"],
        ),
        (
            "[llm]\nanalyst = \"batch:openai:gpt-5\"",
            &["run.toml:2", "key `llm.analyst`", "within hours"],
        ),
        (
            "[llm]\nanalyst = \"openai:gpt-5,openai:gpt-5-mini\"",
            &["run.toml:2", "key `llm.analyst`", "names 2 models"],
        ),
        ("[timing]\n\ncuda_graf = true", &["run.toml:3", "cuda_graf"]),
        (
            "[timing]\nmax_timed_runs = 3",
            &["run.toml:2", "key `timing.max_timed_runs`", "at least 10"],
        ),
        ("sizes = \"huge\"", &["run.toml:1", "key `sizes`", "huge"]),
        (
            "[limits]\ncompile_timeout_s = -1.0",
            &["run.toml:2", "key `limits.compile_timeout_s`", "positive"],
        ),
        (
            "[device]\nceilings = { bandwidth_gbs = 100.0 }",
            &["run.toml:2", "fp32_gflops"],
        ),
        (
            "[promotion]\nrule = \"strict\"\nrounds = 4",
            &["run.toml", "key `promotion`", "noise-aware"],
        ),
        (
            "[prompt]\nstagnation_gap = 1.5",
            &["run.toml:2", "key `prompt.stagnation_gap`", "fraction"],
        ),
        (
            "[strategy]\nislands = 2",
            &["run.toml:2", "key `strategy.islands`", "no name"],
        ),
        (
            "[strategy]\nname = \"islands\"\nhints = 2",
            &["run.toml:3", "key `strategy.hints`", "map-elites only"],
        ),
        (
            "[strategy]\nname = \"annealing\"",
            &["run.toml:2", "key `strategy.name`", "not a strategy"],
        ),
        (
            "[strategy]\nname = \"islands\"\nexploit = 2.0",
            &["run.toml:3", "key `strategy.exploit`", "probability"],
        ),
        (
            "[sandbox]\nskip = [\"walls\"]",
            &["run.toml:2", "key `sandbox.skip", "walls"],
        ),
        (
            "[llm]\nmodels = [\"external\"]\nrecord = \"r.jsonl\"",
            &["run.toml:3", "key `llm.record`", "live model calls"],
        ),
        (
            "[budget]\niterations = -3",
            &["run.toml:2", "budget.iterations"],
        ),
    ];
    for (text, wanted) in cases {
        // Checked alone, then merged (a strategy without a name is an
        // error only once no layer names one).
        let e = file(text)
            .and_then(|layer| merge(&[layer]))
            .expect_err(text)
            .to_string();
        for w in *wanted {
            assert!(e.contains(w), "{text:?}: {e:?} lacks {w:?}");
        }
    }
}

#[test]
fn a_bad_flag_is_named_and_a_merged_conflict_blames_the_layer_that_made_it() {
    let bad = RunConfig {
        llm: LlmSection {
            concurrency: Some(0),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = ConfigLayer::from_flags(
        toml::Table::try_from(&bad).unwrap(),
        vec![("llm.concurrency".into(), "--concurrency".into())],
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "--concurrency: must be at least 1");

    // The file names map-elites with hints; the command line's flags set
    // islands' exploit without switching: the file's strategy name decides,
    // and the flag is blamed.
    let f = file("[strategy]\nname = \"map-elites\"\nhints = 2").unwrap();
    let mut table = toml::Table::new();
    let mut strategy = toml::Table::new();
    strategy.insert("exploit".into(), toml::Value::Float(0.5));
    table.insert("strategy".into(), toml::Value::Table(strategy));
    let flag = ConfigLayer {
        table,
        origin: Origin::Flags {
            flags: vec![("strategy.exploit".into(), "--exploit".into())],
        },
    };
    let e = merge(&[f, flag]).unwrap_err().to_string();
    assert!(e.starts_with("--exploit: "), "{e}");
    assert!(e.contains("islands only"), "{e}");
}

#[test]
fn the_written_settings_read_back_to_the_same_options() {
    let f = file(FILE).unwrap();
    let options = effective(&[f]);
    let text = RunConfig::from_options(&options).to_toml();
    assert!(text.starts_with("# not set: "), "{text}");
    let back = file(&text).expect(&text);
    let mut again = effective(&[back]);
    // The seed kernel is stored as source, not as a path.
    again.start_source = options.start_source.clone();
    // The settings as given differ (the file gives every key); what they
    // mean does not.
    again.settings = options.settings.clone();
    assert_eq!(again, options, "{text}");
}

#[test]
fn a_stored_run_is_a_layer_without_its_recording() {
    let mut options = EvolveOptions::new("saxpy", &["cmd:./a.sh".into()], 3);
    options.record = Some("/tmp/r.jsonl".into());
    options.concurrency = 2;
    let layer = ConfigLayer::from_run("abc", &options).unwrap();
    let o = effective(&[layer]);
    assert_eq!(o.record, None);
    assert_eq!(o.concurrency, 2);
    assert_eq!(o.iterations, 3);
}

#[test]
fn the_analysts_replay_file_is_relative_to_the_config_file() {
    let f = file("task = \"saxpy\"\n[llm]\nmodels = [\"replay:gen.jsonl\"]\nanalyst = \"replay:advice.jsonl#keyed\"").unwrap();
    let o = effective(&[f]);
    assert_eq!(o.llm, ["replay:/exp/gen.jsonl"]);
    assert_eq!(o.analyst.as_deref(), Some("replay:/exp/advice.jsonl#keyed"));
    // Recorded beside the proposer's recording.
    let mut o = o;
    o.record = Some("/exp/calls.jsonl".into());
    assert_eq!(
        o.analyst_record(),
        Some(std::path::PathBuf::from("/exp/calls.analyst.jsonl"))
    );
    o.analyst = None;
    assert_eq!(o.analyst_record(), None);
}

/// A key the options' own fields do not carry (here a namespace given
/// without a server, which the options drop) is still shown: the settings
/// as given are stored with the options, so a new setting needs no line of
/// conversion to appear in `kevo config show` and `--config-from`.
#[test]
fn keys_the_options_do_not_carry_are_shown_from_the_stored_settings() {
    let layer = file("task = \"saxpy\"\n[device]\nnats_namespace = \"lab\"\n").unwrap();
    let options = effective(&[layer]);
    assert!(options.nats.is_none());
    let shown = RunConfig::from_options(&options);
    assert_eq!(shown.device.nats_namespace.as_deref(), Some("lab"));
    // Stored and read back, as a run's options are.
    let stored: EvolveOptions =
        serde_json::from_str(&serde_json::to_string(&options).unwrap()).unwrap();
    assert_eq!(RunConfig::from_options(&stored), shown);
    // A run stored before the settings were kept shows what its fields say.
    let mut old = options.clone();
    old.settings = RunConfig::default();
    assert_eq!(RunConfig::from_options(&old).device.nats_namespace, None);
}

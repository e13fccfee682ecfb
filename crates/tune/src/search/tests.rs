use std::collections::HashSet;

use super::*;
use crate::tuner::{Budget, Step, Stop, run};

/// A template of `dims` parameters with `k` values each, `A + B <= limit`
/// when a limit is given.
fn synthetic(dims: usize, k: usize, limit: Option<usize>) -> TuningSpace {
    let names = ["A", "B", "C", "D", "E"];
    let mut src = String::new();
    for name in &names[..dims] {
        src.push_str(&format!("// kevo: tune {name}"));
        for v in 0..k {
            src.push_str(&format!(" {v}"));
        }
        src.push_str(&format!("\nuse {name}\n"));
    }
    if let Some(limit) = limit {
        src.push_str(&format!("// kevo: require A + B <= {limit}\n"));
    }
    TuningSpace::parse(&src).unwrap().unwrap()
}

/// A smooth objective with one optimum at `peak`, plus an interaction
/// between the first two parameters; configurations with A = 0 fail (as a
/// block too small to launch would).
fn objective(space: &TuningSpace, c: &Configuration, peak: &[i64]) -> Option<f64> {
    let v = space.values(c);
    if v[0] == 0 {
        return None;
    }
    let distance: f64 = v
        .iter()
        .zip(peak)
        .map(|(&x, &p)| ((x - p) as f64 / 2.0).powi(2))
        .sum();
    let coupling = 0.05 * ((v[0] - v[1]).abs() as f64);
    Some((-distance).exp() / (1.0 + coupling))
}

/// Evaluations `kind` needs to evaluate the optimum (the budget plus one
/// when it never does).
fn evaluations_to_optimum(
    kind: StrategyKind,
    seed: u64,
    space: &TuningSpace,
    peak: &[i64],
) -> usize {
    let optimum = space
        .valid()
        .iter()
        .max_by(|a, b| {
            let s = |c| objective(space, c, peak).unwrap_or(-1.0);
            s(a).total_cmp(&s(b))
        })
        .unwrap()
        .clone();
    let mut search = kind.build(seed);
    let budget = space.valid().len();
    let mut found = None;
    run(
        space,
        search.as_mut(),
        Budget::evaluations(budget),
        |c, i| {
            if *c == optimum {
                found = Some(i + 1);
                return Step::Break;
            }
            Step::Scored(objective(space, c, peak), ())
        },
    );
    found.unwrap_or(budget + 1)
}

#[test]
fn every_strategy_proposes_each_valid_configuration_at_most_once() {
    let space = synthetic(3, 5, Some(6));
    for kind in StrategyKind::ALL {
        let mut search = kind.build(7);
        let (trials, stop) = run(&space, search.as_mut(), Budget::default(), |c, _| {
            Step::Scored(objective(&space, c, &[2, 3, 1]), ())
        });
        assert_eq!(stop, Stop::Exhausted, "{kind}");
        assert_eq!(trials.len(), space.valid().len(), "{kind}");
        let distinct: HashSet<&Configuration> = trials.iter().map(|t| &t.configuration).collect();
        assert_eq!(
            distinct.len(),
            trials.len(),
            "{kind} repeated a configuration"
        );
        assert!(
            trials.iter().all(|t| space.is_valid(&t.configuration)),
            "{kind}"
        );
    }
}

#[test]
fn budgets_stop_the_loop() {
    let space = synthetic(2, 6, None);
    let mut search = StrategyKind::Random.build(1);
    let (trials, stop) = run(&space, search.as_mut(), Budget::evaluations(5), |_, _| {
        Step::Scored(Some(1.0), ())
    });
    assert_eq!((trials.len(), stop), (5, Stop::Evaluations));
    let mut search = StrategyKind::Random.build(1);
    let budget = Budget {
        evaluations: None,
        seconds: Some(0.0),
    };
    let (trials, stop) = run(&space, search.as_mut(), budget, |_, _| {
        Step::Scored(None, ())
    });
    assert_eq!((trials.len(), stop), (0, Stop::Seconds));
}

#[test]
fn exhaustive_follows_the_space_order_and_finds_the_optimum() {
    let space = synthetic(2, 4, None);
    let mut search = StrategyKind::Exhaustive.build(0);
    let (trials, _) = run(&space, search.as_mut(), Budget::default(), |c, _| {
        Step::Scored(objective(&space, c, &[2, 3]), ())
    });
    let order: Vec<&Configuration> = trials.iter().map(|t| &t.configuration).collect();
    assert_eq!(order, space.valid().iter().collect::<Vec<_>>());
    let best = crate::tuner::best(&trials).unwrap();
    assert_eq!(space.values(&trials[best].configuration), vec![2, 3]);
}

#[test]
fn same_seed_same_choices() {
    let space = synthetic(3, 6, Some(8));
    for kind in [StrategyKind::Random, StrategyKind::Local, StrategyKind::Tpe] {
        let order = |seed| {
            let mut search = kind.build(seed);
            let (trials, _) = run(&space, search.as_mut(), Budget::evaluations(30), |c, _| {
                Step::Scored(objective(&space, c, &[3, 2, 4]), ())
            });
            trials
                .into_iter()
                .map(|t| t.configuration)
                .collect::<Vec<_>>()
        };
        assert_eq!(order(11), order(11), "{kind}");
        assert_ne!(order(11), order(12), "{kind}: the seed changes nothing");
    }
}

#[test]
fn local_search_climbs_from_the_best_configuration() {
    let space = synthetic(2, 8, None);
    let mut search = StrategyKind::Local.build(3);
    // After the first (random) configuration, each next one is a neighbour
    // of the best seen so far until that best has no unseen neighbour.
    let mut seen: Vec<Observation> = Vec::new();
    for _ in 0..12 {
        let c = search.next(&space, &seen).unwrap();
        if let Some((best, _)) = ranked(&seen).first() {
            let unseen_neighbours = space
                .neighbours(best)
                .into_iter()
                .any(|n| !seen.iter().any(|o| o.configuration == n));
            if unseen_neighbours {
                assert!(
                    space.neighbours(best).contains(&c),
                    "{c} is not next to {best}"
                );
            }
        }
        let score = objective(&space, &c, &[5, 5]);
        seen.push(Observation {
            configuration: c,
            score,
        });
    }
}

/// The model-based strategy must earn its keep: over 16 fixed seeds it
/// reaches the optimum of a 4-parameter, 4096-configuration space in
/// fewer evaluations than random sampling, on average by a wide margin and
/// on nearly every seed (measured: random 2434 on average, TPE 44, local
/// search 23).
#[test]
fn tpe_reaches_the_optimum_in_fewer_evaluations_than_random() {
    let space = synthetic(4, 8, None);
    let peak = [6, 5, 2, 4];
    let per_seed = |kind| -> Vec<f64> {
        (0..16u64)
            .map(|s| evaluations_to_optimum(kind, s, &space, &peak) as f64)
            .collect()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let random = per_seed(StrategyKind::Random);
    let tpe = per_seed(StrategyKind::Tpe);
    let local = per_seed(StrategyKind::Local);
    eprintln!(
        "mean evaluations to the optimum: random {}, tpe {}, local {}",
        mean(&random),
        mean(&tpe),
        mean(&local)
    );
    assert!(mean(&random) > 1000.0, "random {random:?}");
    assert!(
        mean(&tpe) * 4.0 < mean(&random),
        "tpe {tpe:?} vs random {random:?}"
    );
    // Not a mean carried by one lucky run.
    let wins = tpe.iter().zip(&random).filter(|(t, r)| t < r).count();
    assert!(wins >= 14, "tpe beat random on {wins} of 16 seeds");
}

#[test]
fn strategies_survive_a_space_where_most_configurations_fail() {
    let space = synthetic(3, 6, Some(7));
    for kind in StrategyKind::ALL {
        let mut search = kind.build(5);
        let (trials, _) = run(&space, search.as_mut(), Budget::evaluations(60), |c, _| {
            let v = space.values(c);
            // Only A = 5 works.
            Step::Scored((v[0] == 5).then_some(1.0 + v[2] as f64), ())
        });
        assert_eq!(trials.len(), 60, "{kind}");
    }
}

#[test]
fn parzen_densities_are_normalised_and_peak_at_the_points() {
    let d = parzen(&[2, 2, 3], 8);
    assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    let peak = d
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0;
    assert_eq!(peak, 2);
    assert!(
        d.iter().all(|&x| x > 0.0),
        "the prior keeps every value possible"
    );
    let flat = parzen(&[], 4);
    assert!(flat.iter().all(|&x| (x - 0.25).abs() < 1e-12));
}

#[test]
fn strategy_names_round_trip() {
    for kind in StrategyKind::ALL {
        assert_eq!(kind.name().parse::<StrategyKind>().unwrap(), kind);
    }
    let e = "bayes".parse::<StrategyKind>().unwrap_err();
    assert!(e.contains("exhaustive, random, local, tpe"), "{e}");
}

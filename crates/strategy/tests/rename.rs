//! A session decides each batch before the store has given its candidates
//! ids, on provisional ones, and renames them once it has. These tests
//! hold every strategy to that: deciding on provisional ids and renaming
//! leaves the same decision and the same state as deciding on the stored
//! ids, iteration after iteration (duplicates within the batch and of
//! earlier candidates included).

use kevo_strategy::{
    Decision, Descriptors, IslandsConfig, MapElitesConfig, Scored, StepOutcome, StrategyConfig,
    StrictJudge,
};

/// The provisional id of the batch's `j`-th candidate.
fn provisional(j: usize) -> i64 {
    -(j as i64) - 1
}

/// One batch of four under stored ids starting at `first`: scores that
/// rise and fall with the iteration, cells that move, the third a
/// duplicate of the first, the fourth of an earlier stored candidate.
fn batch(k: u32, first: i64) -> Vec<Scored> {
    (0..4)
        .map(|j| {
            let wave = ((k as f64) * 1.7 + j as f64 * 2.3).sin();
            Scored {
                id: first + j as i64,
                score: (j != 1 || k.is_multiple_of(2)).then_some(1.0 + 0.1 * k as f64 + 0.3 * wave),
                outcome: StepOutcome::Correct,
                descriptors: Some(Descriptors::new(
                    (k as u8 + j as u8) % 4,
                    (j as u8 * 3) % 4,
                    (k as u8) % 4,
                )),
                duplicate_of: match j {
                    2 => Some(first),
                    3 if first > 2 => Some(first - 2),
                    _ => None,
                },
            }
        })
        .map(|mut c| {
            if c.score.is_none() {
                c.outcome = StepOutcome::WrongResult;
            }
            c
        })
        .collect()
}

/// `stored` under provisional ids: the batch's own candidates renamed,
/// earlier candidates left as they are.
fn provisional_batch(stored: &[Scored]) -> (Vec<Scored>, impl Fn(i64) -> i64 + use<>) {
    let ids: Vec<i64> = stored.iter().map(|c| c.id).collect();
    let forward = ids.clone();
    let to_provisional = move |id: i64| {
        forward
            .iter()
            .position(|s| *s == id)
            .map_or(id, provisional)
    };
    let renamed = stored.iter().map(|c| c.renamed(&to_provisional)).collect();
    let to_stored = move |id: i64| match id {
        p if p < 0 => ids[(-p - 1) as usize],
        id => id,
    };
    (renamed, to_stored)
}

fn same_after_renaming(config: StrategyConfig) {
    let seed = Scored {
        id: 1,
        score: Some(1.0),
        outcome: StepOutcome::Correct,
        descriptors: Some(Descriptors::new(0, 0, 0)),
        duplicate_of: None,
    };
    let mut on_stored = config.start(&seed).unwrap();
    let mut renamed = config.start(&seed).unwrap();
    let mut next = 2;
    let mut kept = 0;
    for k in 1..=12 {
        let selection = on_stored.select();
        assert_eq!(renamed.select(), selection, "iteration {k}");
        let stored = batch(k, next);
        next += stored.len() as i64;
        let expected: Decision = on_stored.decide(k, &selection, &stored, &mut StrictJudge);
        let (provisional, to_stored) = provisional_batch(&stored);
        let mut decision = renamed.decide(k, &selection, &provisional, &mut StrictJudge);
        decision.rename(&to_stored, &provisional);
        renamed.rename(&to_stored);
        assert_eq!(decision, expected, "iteration {k}");
        assert_eq!(renamed.state(), on_stored.state(), "iteration {k}");
        kept += expected.placements.iter().filter(|p| p.kept).count();
    }
    // The comparison means something only if candidates were kept and
    // placed under their provisional ids first.
    assert!(kept > 2, "{} kept only {kept}", config.stored_name());
}

#[test]
fn one_plus_one_decides_the_same_on_provisional_ids_renamed() {
    same_after_renaming(StrategyConfig::OnePlusOne);
}

#[test]
fn map_elites_decides_the_same_on_provisional_ids_renamed() {
    same_after_renaming(StrategyConfig::MapElites(MapElitesConfig {
        islands: 2,
        rng_seed: 3,
        ..Default::default()
    }));
}

#[test]
fn islands_decide_the_same_on_provisional_ids_renamed() {
    same_after_renaming(StrategyConfig::Islands(IslandsConfig {
        islands: 2,
        population: 3,
        migration_interval: 2,
        rng_seed: 5,
        ..Default::default()
    }));
}

#[test]
fn a_duplicate_reason_names_the_stored_candidate_after_renaming() {
    let stored = batch(1, 10);
    let (provisional, to_stored) = provisional_batch(&stored);
    let seed = Scored {
        id: 1,
        ..stored[0].clone()
    };
    let mut strategy = StrategyConfig::OnePlusOne.start(&seed).unwrap();
    let selection = strategy.select();
    let mut decision = strategy.decide(1, &selection, &provisional, &mut StrictJudge);
    assert!(decision.placements[2].reason.contains("candidate -1"));
    decision.rename(&to_stored, &provisional);
    assert_eq!(
        decision.placements[2].reason,
        "duplicate of candidate 10: not evaluated again, not kept"
    );
}

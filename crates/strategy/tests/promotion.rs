//! Promotion under a deterministic synthetic timer, for every strategy.
//!
//! Each candidate has a true speed. Its in-run score is one measurement
//! of it; the lucky candidate's in-run measurement came out 40% high,
//! while every re-measurement round draws the true speed times a fixed
//! jitter sequence (±3%). Under Metal-Sci's strict rule the lucky
//! candidate is promoted; under the noise-aware rule it is re-measured,
//! found within noise and not kept; a candidate twice as fast is
//! promoted under both.

use std::collections::HashMap;

use kevo_strategy::{
    Descriptors, Elite, IslandsConfig, Judge, MapElitesConfig, NoiseAwareJudge, Remeasured, Scored,
    StepOutcome, StrategyConfig, StrictJudge,
};

const SEED: i64 = 1;
const LUCKY: i64 = 2;
const FASTER: i64 = 3;

/// True speeds (scores) of the candidates.
fn truth() -> HashMap<i64, f64> {
    HashMap::from([(SEED, 0.5), (LUCKY, 0.5), (FASTER, 1.0)])
}

/// The synthetic timer's re-measurement: per round the true scores
/// times a jitter that differs per round and per candidate.
fn remeasure(challenger: Elite, holder: Elite, rounds: usize) -> Remeasured {
    const JITTER: [f64; 7] = [1.03, 0.98, 1.01, 0.97, 1.02, 0.99, 1.0];
    let t = truth();
    Remeasured {
        rounds: (0..rounds)
            .map(|r| {
                [
                    t[&challenger.id] * JITTER[r % 7],
                    t[&holder.id] * JITTER[(r + 3) % 7],
                ]
            })
            .collect(),
        failure: None,
    }
}

fn candidate(id: i64, in_run_score: f64) -> Scored {
    Scored {
        id,
        score: Some(in_run_score),
        outcome: StepOutcome::Correct,
        // Every candidate in the seed's cell: MAP-Elites must replace.
        descriptors: Some(Descriptors::default()),
        duplicate_of: None,
    }
}

fn configs() -> Vec<StrategyConfig> {
    vec![
        StrategyConfig::OnePlusOne,
        StrategyConfig::MapElites(MapElitesConfig::default()),
        // One member per island: a child must displace the seed.
        StrategyConfig::Islands(IslandsConfig {
            islands: 1,
            population: 1,
            ..IslandsConfig::default()
        }),
    ]
}

/// Runs the lucky candidate then the faster one through `config` under
/// `judge`; returns (lucky kept, faster kept, best after) and the
/// lucky candidate's reason.
fn search(config: &StrategyConfig, judge: &mut dyn Judge) -> (bool, bool, Elite, String) {
    let mut s = config.start(&candidate(SEED, 0.5)).unwrap();
    let sel = s.select();
    let lucky = s.decide(1, &sel, &[candidate(LUCKY, 0.7)], judge);
    let sel = s.select();
    let faster = s.decide(2, &sel, &[candidate(FASTER, 0.98)], judge);
    (
        lucky.kept(LUCKY),
        faster.kept(FASTER),
        s.best(),
        lucky.placements[0].reason.clone(),
    )
}

#[test]
fn strict_promotes_the_lucky_candidate_and_the_faster_one() {
    for config in configs() {
        let (lucky, faster, best, _) = search(&config, &mut StrictJudge);
        let name = config.stored_name();
        assert!(lucky, "{name}: strict keeps a 40% lucky measurement");
        assert!(faster, "{name}");
        assert_eq!(best.id, FASTER, "{name}");
        assert_eq!(best.score, 0.98, "{name}: strict keeps the in-run score");
    }
}

#[test]
fn noise_aware_records_the_lucky_candidate_within_noise_and_promotes_the_faster_one() {
    for config in configs() {
        let name = config.stored_name();
        let mut asked = Vec::new();
        let mut judge = NoiseAwareJudge::new(|c: Elite, h: Elite| {
            asked.push((c.id, h.id));
            remeasure(c, h, 5)
        });
        let (lucky, faster, best, reason) = search(&config, &mut judge);
        assert!(!lucky, "{name}: the lucky candidate is not kept");
        assert!(
            reason.contains("within noise, not promoted"),
            "{name}: {reason}"
        );
        assert!(faster, "{name}: a 2x faster kernel is still promoted");
        assert_eq!(best.id, FASTER, "{name}");
        assert!(
            (best.score - 1.0).abs() < 0.02,
            "{name}: the best keeps its re-measured median, not 0.98: {}",
            best.score
        );
        assert_eq!(
            asked[0],
            (LUCKY, SEED),
            "{name}: the lucky one was measured against the seed"
        );
        assert!(asked.contains(&(FASTER, SEED)), "{name}: {asked:?}");
    }
}

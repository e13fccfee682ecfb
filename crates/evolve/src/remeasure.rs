//! Re-measurement: candidates evaluated again together, interleaved, in
//! one session, to confirm a promotion (kevo_strategy::promotion) or to
//! pick a run's winner among its best few at the end (the in-run best is
//! the maximum of noisy measurements, so it is biased upward: the
//! winner's curse).

use kevo_eval::Evaluation;
use kevo_strategy::Remeasured;
use serde::{Deserialize, Serialize};

/// What re-measurement cost a run, apart from the candidates' own
/// evaluations: comparisons made, evaluations run, device and wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RemeasureSpend {
    pub remeasurements: u32,
    pub evaluations: u64,
    pub device_s: f64,
    pub wall_s: f64,
}

impl RemeasureSpend {
    pub fn add(&mut self, other: &RemeasureSpend) {
        self.remeasurements += other.remeasurements;
        self.evaluations += other.evaluations;
        self.device_s += other.device_s;
        self.wall_s += other.wall_s;
    }

    /// "2 re-measurements: 20 evaluations, 0.41 s on the device, 1.9 s
    /// wall"; None if nothing was re-measured.
    pub fn describe(&self) -> Option<String> {
        (self.remeasurements > 0).then(|| {
            format!(
                "{} re-measurement{}: {} evaluations, {:.2} s on the device, {:.1} s wall",
                self.remeasurements,
                if self.remeasurements == 1 { "" } else { "s" },
                self.evaluations,
                self.device_s,
                self.wall_s
            )
        })
    }
}

/// One size of one candidate in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeTime {
    pub label: String,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
}

/// One candidate's evaluation in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    /// None unless every size was correct and plausible.
    pub score: Option<f64>,
    /// The outcome in words when it was not correct: the candidate fails
    /// the re-measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Set only in re-measurements stored before suspicious became a
    /// failure: the round was then discarded for every candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implausible: Option<String>,
    pub sizes: Vec<SizeTime>,
}

impl RoundResult {
    /// A round's result. A size faster than the hardware allows (after
    /// the evaluator re-measured the ceiling it beat) fails the candidate,
    /// as a wrong result does: "suspicious" is a verdict on the kernel's
    /// honesty, so no round is ever dropped for speed alone (dropping 2 of
    /// 5 rounds reversed the order of a run's top two on PoCL).
    pub fn of(e: &Evaluation) -> RoundResult {
        let score = e.outcome.score();
        RoundResult {
            score,
            failure: score.is_none().then(|| e.outcome.summary()),
            implausible: None,
            sizes: e
                .sizes
                .iter()
                .map(|s| SizeTime {
                    label: s.label.clone(),
                    median_s: s.time.median_s,
                    min_s: s.time.min_s,
                    max_s: s.time.max_s,
                })
                .collect(),
        }
    }
}

/// The rounds of a re-measurement: per round, one result per candidate
/// in the candidates' order (None once a candidate has failed: it is not
/// run again).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interleaved {
    pub rounds: Vec<Vec<Option<RoundResult>>>,
    pub spend: RemeasureSpend,
}

impl Interleaved {
    /// The order in which `n` candidates run in round `r`: rotated by one
    /// each round (AB, BA, AB, ... for two), so that no candidate always
    /// runs first and a steady drift of the device's speed spreads over
    /// all alike.
    pub fn order(n: usize, round: usize) -> Vec<usize> {
        (0..n).map(|i| (i + round) % n.max(1)).collect()
    }

    /// Candidate `i`'s first failure: "round 2: wrong result at 64x64";
    /// or, if every round of it was implausibly fast, that.
    pub fn failure(&self, i: usize) -> Option<String> {
        let failed = self.rounds.iter().enumerate().find_map(|(r, row)| {
            let f = row.get(i)?.as_ref()?.failure.as_ref()?;
            Some(format!("round {}: {f}", r + 1))
        });
        failed.or_else(|| {
            let timed = self.rounds.iter().filter_map(|row| row.get(i)?.as_ref());
            let mut implausible = timed.clone().filter_map(|r| r.implausible.as_ref());
            let first = implausible.next()?;
            (timed.count() == 1 + implausible.count())
                .then(|| format!("every round faster than the hardware allows ({first})"))
        })
    }

    /// Rounds discarded because a candidate's timing in them was
    /// implausible (1-based).
    pub fn discarded(&self) -> Vec<usize> {
        (0..self.rounds.len())
            .filter(|&r| self.implausible_round(r))
            .map(|r| r + 1)
            .collect()
    }

    fn implausible_round(&self, r: usize) -> bool {
        self.rounds[r]
            .iter()
            .flatten()
            .any(|x| x.implausible.is_some())
    }

    /// Candidate `i`'s scores, one per round that was not discarded.
    pub fn scores(&self, i: usize) -> Vec<f64> {
        (0..self.rounds.len())
            .filter(|&r| !self.implausible_round(r))
            .filter_map(|r| self.rounds[r].get(i)?.as_ref()?.score)
            .collect()
    }

    /// Candidate `i`'s median score, if it failed no round and has one.
    pub fn median(&self, i: usize) -> Option<f64> {
        let scores = self.scores(i);
        if self.failure(i).is_some() || scores.is_empty() {
            return None;
        }
        Some(kevo_strategy::promotion::median(scores))
    }

    /// A two-candidate re-measurement (challenger, holder) as the
    /// promotion rule takes it.
    pub fn pair(&self, ids: [i64; 2]) -> Remeasured {
        self.pair_named(ids.map(|id| format!("candidate {id}")))
    }

    /// [`Interleaved::pair`] with the two named as a failure names them
    /// ("this iteration's proposal" before it has a stored id).
    pub fn pair_named(&self, names: [String; 2]) -> Remeasured {
        let failure = (0..2).find_map(|i| self.failure(i).map(|f| format!("{}: {f}", names[i])));
        Remeasured {
            rounds: (0..self.rounds.len())
                .filter(|&r| !self.implausible_round(r))
                .filter_map(|r| {
                    let row = &self.rounds[r];
                    Some([row.first()?.as_ref()?.score?, row.get(1)?.as_ref()?.score?])
                })
                .collect(),
            failure,
        }
    }
}

/// Evaluates `sources` together over `rounds` interleaved rounds (the
/// order rotating each round); a candidate that fails a round is not run
/// again. `evaluate` runs one source with the full protocol.
pub fn interleave<E>(
    sources: &[&str],
    rounds: u32,
    evaluate: &mut dyn FnMut(&str) -> Result<Evaluation, E>,
) -> Result<Interleaved, E> {
    let started = std::time::Instant::now();
    let mut m = Interleaved::default();
    let mut failed = vec![false; sources.len()];
    for r in 0..rounds as usize {
        let mut row: Vec<Option<RoundResult>> = vec![None; sources.len()];
        for i in Interleaved::order(sources.len(), r) {
            if failed[i] {
                continue;
            }
            let e = evaluate(sources[i])?;
            m.spend.evaluations += 1;
            m.spend.device_s += e.wall.device_s;
            let result = RoundResult::of(&e);
            failed[i] = result.failure.is_some();
            row[i] = Some(result);
        }
        m.rounds.push(row);
    }
    m.spend.remeasurements = 1;
    m.spend.wall_s = started.elapsed().as_secs_f64();
    Ok(m)
}

/// A winner chosen among the best few on one set of interleaved rounds and
/// confirmed against the seed on another: what `kevo tune` reports, as a
/// search's final pick does.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmed {
    /// The rounds that chose, the seed last.
    pub pick: Interleaved,
    /// Index into the candidates of the chosen one; None when none beat the
    /// seed's median in the choosing rounds.
    pub chosen: Option<usize>,
    /// The chosen one against the seed on fresh rounds.
    pub confirm: Option<Interleaved>,
}

impl Confirmed {
    /// The confirmation's figures, where there was one.
    pub fn confirmation(&self) -> Option<Confirmation> {
        self.confirm.as_ref().map(Confirmation::of)
    }

    /// The chosen candidate, if it held on the fresh rounds.
    pub fn winner(&self) -> Option<usize> {
        self.chosen
            .filter(|_| self.confirmation().is_some_and(|c| c.holds()))
    }
}

/// Choose among `candidates` (best first) on `rounds` interleaved rounds
/// with `seed`, then confirm the choice against the seed on `rounds` fresh
/// rounds.
pub fn pick_and_confirm<E>(
    candidates: &[&str],
    seed: &str,
    rounds: u32,
    evaluate: &mut dyn FnMut(&str) -> Result<Evaluation, E>,
) -> Result<Confirmed, E> {
    let mut all: Vec<&str> = candidates.to_vec();
    all.push(seed);
    let pick = interleave(&all, rounds, evaluate)?;
    let seed_median = pick.median(candidates.len());
    let chosen = (0..candidates.len())
        .filter_map(|i| pick.median(i).map(|m| (i, m)))
        .filter(|&(_, m)| seed_median.is_none_or(|s| m > s))
        .fold(None::<(usize, f64)>, |best, c| match best {
            Some(b) if b.1 >= c.1 => Some(b),
            _ => Some(c),
        })
        .map(|(i, _)| i);
    let confirm = match chosen {
        Some(i) => Some(interleave(&[candidates[i], seed], rounds, evaluate)?),
        None => None,
    };
    Ok(Confirmed {
        pick,
        chosen,
        confirm,
    })
}

/// The distribution-free confidence interval of a median from `values`:
/// the k-th smallest and k-th largest, with the largest k whose coverage
/// (1 - 2 P[Binomial(n, 1/2) < k]) is at least `level`; k = 1 (min-max)
/// where even that falls short. Returns (low, high, coverage); 5 rounds
/// give min-max at 93.8%, 10 rounds the 2nd and 9th at 97.9%.
pub fn median_interval(values: &[f64], level: f64) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let coverage = |k: usize| {
        // P[X < k] for X ~ Binomial(n, 1/2).
        let mut below = 0.0;
        let mut c = 1.0f64;
        for i in 0..k {
            if i > 0 {
                c = c * (n - i + 1) as f64 / i as f64;
            }
            below += c;
        }
        1.0 - 2.0 * below / 2f64.powi(n as i32)
    };
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) >= level {
        k += 1;
    }
    Some((v[k - 1], v[n - k], coverage(k)))
}

/// The picked winner against the seed on fresh interleaved rounds: the
/// speedup a run reports, measured apart from the rounds that chose it
/// (a search whose proposer returned the seed's body every time reported
/// 1.07x when the pick's own medians were the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    pub rounds: u32,
    /// Per round, the winner's score over the seed's.
    pub ratios: Vec<f64>,
    /// The median ratio, with its confidence interval.
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's coverage (0.938 for 5 rounds).
    pub level: f64,
    /// Why the winner failed the confirmation (a round not correct).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Confirmation {
    /// From a two-candidate re-measurement (winner, seed).
    pub fn of(m: &Interleaved) -> Confirmation {
        let ratios: Vec<f64> = m
            .rounds
            .iter()
            .filter_map(|row| {
                let w = row.first()?.as_ref()?.score?;
                let s = row.get(1)?.as_ref()?.score?;
                (s > 0.0).then_some(w / s)
            })
            .collect();
        let failure = m
            .failure(0)
            .map(|f| format!("the winner: {f}"))
            .or_else(|| m.failure(1).map(|f| format!("the seed: {f}")));
        let (low, high, level) =
            median_interval(&ratios, 0.90).unwrap_or((f64::NAN, f64::NAN, 0.0));
        Confirmation {
            rounds: m.rounds.len() as u32,
            median: if ratios.is_empty() {
                f64::NAN
            } else {
                kevo_strategy::promotion::median(ratios.clone())
            },
            ratios,
            low,
            high,
            level,
            failure,
        }
    }

    /// Whether the winner held: correct in every fresh round and faster
    /// than the seed beyond the interval (its lower end above 1). A median
    /// above 1 alone is not enough: on a busy 2-core PoCL machine a null
    /// search's winner came out at 1.035x with an interval of 0.80-1.22.
    pub fn holds(&self) -> bool {
        self.failure.is_none() && self.ratios.len() >= 2 && self.low > 1.0
    }

    /// "1.42x (93.8% interval 1.38-1.47) over 5 fresh rounds".
    pub fn describe(&self) -> String {
        match &self.failure {
            Some(f) => format!("failed on fresh rounds ({f})"),
            None => format!(
                "{:.2}x ({:.1}% interval {:.2}-{:.2}) over {} fresh rounds",
                self.median,
                self.level * 100.0,
                self.low,
                self.high,
                self.rounds
            ),
        }
    }
}

/// The end-of-run pick: the best few and the seed re-measured together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalPick {
    pub rounds: u32,
    /// In in-run rank order, the seed last (unless it ranked).
    pub candidates: Vec<FinalEntry>,
    /// The best median of the re-measurement.
    pub winner: i64,
    /// The strategy's best, by its in-run score.
    pub in_run_best: i64,
    /// The confirmed speedup: the median ratio of [`FinalPick::confirmation`],
    /// exactly 1 when the winner is the seed (nothing is measured against
    /// itself). Runs stored before confirmation held the pick's own ratio.
    pub speedup: Option<f64>,
    /// The chosen winner against the seed on fresh rounds; None when the
    /// winner is the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
    /// The pick's choice before confirmation, where the confirmation
    /// reverted it to the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<i64>,
    /// Rounds left out because a timing in them was implausible.
    #[serde(default)]
    pub discarded_rounds: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalEntry {
    pub candidate: i64,
    pub iteration: u32,
    pub in_run_score: f64,
    /// Median over the rounds; None if it failed one.
    pub remeasured: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl FinalPick {
    /// Whether the re-measurement picked another winner than the in-run
    /// scores did.
    pub fn changed(&self) -> bool {
        self.winner != self.in_run_best
    }

    /// One line per candidate and the verdict, for summaries.
    pub fn describe(&self) -> String {
        let mut lines = vec![format!(
            "final re-measurement of the {} best and the seed over {} interleaved rounds:",
            self.candidates.len().saturating_sub(1).max(1),
            self.rounds
        )];
        for e in &self.candidates {
            let now = match (e.remeasured, &e.failure) {
                (Some(m), _) => format!("{m:.4}"),
                (None, Some(f)) => format!("failed ({f})"),
                (None, None) => "-".into(),
            };
            lines.push(format!(
                "  candidate {} (iteration {}): in-run {:.4}, re-measured {now}{}",
                e.candidate,
                e.iteration,
                e.in_run_score,
                if e.candidate == self.winner {
                    "  <- winner"
                } else {
                    ""
                }
            ));
        }
        if !self.discarded_rounds.is_empty() {
            lines.push(format!(
                "  rounds {:?} discarded: a candidate ran faster than the hardware allows in them",
                self.discarded_rounds
            ));
        }
        if self.changed() {
            lines.push(format!(
                "  the in-run best (candidate {}) was not the re-measured best",
                self.in_run_best
            ));
        }
        match (&self.confirmation, self.unconfirmed) {
            (Some(c), Some(chosen)) => lines.push(format!(
                "  candidate {chosen} against the seed: {}: not faster beyond the interval, the seed is kept (1.00x)",
                c.describe()
            )),
            (Some(c), None) => {
                lines.push(format!("  confirmed against the seed: {}", c.describe()))
            }
            (None, _) => lines.push("  the seed is the winner: 1.00x, nothing to confirm".into()),
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(score: Option<f64>) -> Option<RoundResult> {
        Some(RoundResult {
            score,
            failure: score.is_none().then(|| "wrong result at 64x64".to_string()),
            implausible: None,
            sizes: Vec::new(),
        })
    }

    fn too_fast() -> Option<RoundResult> {
        Some(RoundResult {
            score: None,
            failure: None,
            implausible: Some("suspicious at size 1M".into()),
            sizes: Vec::new(),
        })
    }

    /// Re-measurements stored before "suspicious" failed the candidate
    /// marked implausible rounds; they are still read as discarded.
    #[test]
    fn a_stored_implausibly_fast_round_is_discarded_for_both() {
        let m = Interleaved {
            rounds: vec![
                vec![result(Some(0.6)), result(Some(0.5))],
                vec![too_fast(), result(Some(0.9))],
                vec![result(Some(0.62)), result(Some(0.52))],
            ],
            spend: RemeasureSpend::default(),
        };
        assert_eq!(m.discarded(), vec![2]);
        assert_eq!(m.failure(0), None);
        assert_eq!(m.median(0), Some(0.61));
        assert_eq!(m.median(1), Some(0.51), "round 2's 0.9 is left out too");
        assert_eq!(m.pair([7, 3]).rounds, vec![[0.6, 0.5], [0.62, 0.52]]);
        let always = Interleaved {
            rounds: vec![vec![too_fast()], vec![too_fast()]],
            spend: RemeasureSpend::default(),
        };
        assert!(always.failure(0).unwrap().starts_with("every round faster"));
        assert_eq!(always.median(0), None);
    }

    #[test]
    fn rounds_rotate_the_order() {
        assert_eq!(Interleaved::order(2, 0), vec![0, 1]);
        assert_eq!(Interleaved::order(2, 1), vec![1, 0]);
        assert_eq!(Interleaved::order(3, 2), vec![2, 0, 1]);
    }

    #[test]
    fn a_failed_round_names_the_candidate_and_leaves_no_median() {
        let m = Interleaved {
            rounds: vec![
                vec![result(Some(0.6)), result(Some(0.5))],
                vec![result(None), result(Some(0.52))],
                vec![None, result(Some(0.48))],
            ],
            spend: RemeasureSpend::default(),
        };
        assert_eq!(m.median(0), None);
        assert_eq!(m.median(1), Some(0.5));
        assert_eq!(
            m.failure(0).as_deref(),
            Some("round 2: wrong result at 64x64")
        );
        let pair = m.pair([7, 3]);
        assert_eq!(pair.rounds, vec![[0.6, 0.5]]);
        assert_eq!(
            pair.failure.as_deref(),
            Some("candidate 7: round 2: wrong result at 64x64")
        );
    }

    #[test]
    fn the_median_interval_takes_order_statistics_by_coverage() {
        let five = [1.02, 0.98, 1.00, 1.05, 0.97];
        let (lo, hi, level) = median_interval(&five, 0.90).unwrap();
        assert_eq!((lo, hi), (0.97, 1.05), "min-max for 5");
        assert!((level - 0.9375).abs() < 1e-12, "{level}");
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let (lo, hi, level) = median_interval(&ten, 0.90).unwrap();
        assert_eq!((lo, hi), (2.0, 9.0));
        assert!((level - 0.978_515_625).abs() < 1e-9, "{level}");
        let (lo, hi, level) = median_interval(&[3.0, 1.0], 0.90).unwrap();
        assert_eq!((lo, hi, level), (1.0, 3.0, 0.5), "short of 90%: min-max");
        assert_eq!(median_interval(&[], 0.9), None);
    }

    #[test]
    fn a_confirmation_is_the_winners_ratio_on_fresh_rounds() {
        let m = Interleaved {
            rounds: vec![
                vec![result(Some(0.60)), result(Some(0.50))],
                vec![result(Some(0.66)), result(Some(0.50))],
                vec![result(Some(0.55)), result(Some(0.50))],
            ],
            spend: RemeasureSpend::default(),
        };
        let c = Confirmation::of(&m);
        assert_eq!(c.rounds, 3);
        assert!((c.median - 1.2).abs() < 1e-12);
        assert!((c.low - 1.1).abs() < 1e-12 && (c.high - 1.32).abs() < 1e-12);
        assert!(c.holds());
        assert!(
            c.describe()
                .starts_with("1.20x (75.0% interval 1.10-1.32) over 3 fresh rounds")
        );
        // A median above 1 whose interval reaches below it does not hold.
        let unsure = Interleaved {
            rounds: vec![
                vec![result(Some(0.55)), result(Some(0.50))],
                vec![result(Some(0.49)), result(Some(0.50))],
                vec![result(Some(0.52)), result(Some(0.50))],
            ],
            spend: RemeasureSpend::default(),
        };
        let c = Confirmation::of(&unsure);
        assert!(c.median > 1.0 && c.low < 1.0, "{c:?}");
        assert!(!c.holds());
        // Identical kernels: a median ratio at or below 1 does not hold.
        let null = Interleaved {
            rounds: vec![
                vec![result(Some(0.50)), result(Some(0.51))],
                vec![result(Some(0.51)), result(Some(0.50))],
                vec![result(Some(0.495)), result(Some(0.50))],
            ],
            spend: RemeasureSpend::default(),
        };
        assert!(!Confirmation::of(&null).holds());
        // A winner that fails a fresh round does not hold either.
        let failing = Interleaved {
            rounds: vec![
                vec![result(Some(0.9)), result(Some(0.5))],
                vec![result(None), result(Some(0.5))],
            ],
            spend: RemeasureSpend::default(),
        };
        let c = Confirmation::of(&failing);
        assert!(!c.holds());
        assert_eq!(
            c.failure.as_deref(),
            Some("the winner: round 2: wrong result at 64x64")
        );
    }
}

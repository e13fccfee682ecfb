//! When a challenger really beats the candidate it would replace.
//!
//! Every strategy asks a [`Judge`] before it replaces anything (the
//! (1+1) incumbent, a MAP-Elites cell's elite, an island's worst member)
//! and before a candidate becomes the run's best. Two rules:
//!
//! - [`Promotion::Strict`]: Metal-Sci's rule, a defined score strictly
//!   greater than the holder's. One lucky measurement wins: within one
//!   evaluation the timed runs of a size can spread 2-3x on a CPU OpenCL
//!   device, and the same kernel moved by 50% between evaluations.
//! - [`Promotion::NoiseAware`] (the default): a challenger whose score
//!   appears greater is re-measured together with the holder, interleaved
//!   in the same session, over `rounds` rounds (AB, BA, AB, ...: the order
//!   alternates so that a linear drift of the device's speed affects both
//!   alike). Each round evaluates both with the full protocol, checks
//!   included. The rule ([`PairedGain`]): per round the log of the score
//!   ratio, d = ln(challenger / holder); the challenger is promoted only if
//!   the one-sided 95% lower confidence bound of the mean of d (Student's
//!   t with rounds - 1 degrees of freedom) is above 0, that is, the gain
//!   is significant given the spread between rounds. The first, selecting
//!   measurement is left out: it was chosen because it looked good.
//!
//!   A confirmed challenger keeps the median of its re-measured scores and
//!   a holder the median of its own, so later challengers are compared
//!   with an honest figure rather than a lucky one.

use serde::{Deserialize, Serialize};

use crate::Elite;

/// The default number of interleaved rounds of a re-measurement: with 5
/// rounds the t factor is 2.13, so a gain of twice the between-round
/// spread over √5 is significant (a 10% faster kernel on the H100, where
/// evaluations of one kernel agree within about 1%, is confirmed).
pub const DEFAULT_ROUNDS: u32 = 5;

/// How a strategy decides that a challenger beats what it would replace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Promotion {
    /// Metal-Sci: a strictly greater score, measured once.
    Strict,
    /// Re-measured together with the holder over `rounds` interleaved
    /// rounds; promoted only if the gain is significant.
    NoiseAware { rounds: u32 },
}

impl Default for Promotion {
    fn default() -> Self {
        Promotion::NoiseAware {
            rounds: DEFAULT_ROUNDS,
        }
    }
}

impl Promotion {
    /// From the command line: "strict" or "noise-aware" with its rounds.
    pub fn named(name: &str, rounds: Option<u32>) -> Result<Promotion, crate::StrategyError> {
        let setting = |reason: String| crate::StrategyError::Setting {
            setting: "promotion".into(),
            reason,
        };
        match (name, rounds) {
            ("strict", None) => Ok(Promotion::Strict),
            ("strict", Some(_)) => Err(setting(
                "strict promotion measures once: --remeasure-rounds needs --promotion noise-aware"
                    .into(),
            )),
            ("noise-aware", r) => {
                let rounds = r.unwrap_or(DEFAULT_ROUNDS);
                if rounds < 2 {
                    return Err(setting(format!(
                        "noise-aware promotion needs at least 2 rounds to measure a spread, not {rounds}"
                    )));
                }
                Ok(Promotion::NoiseAware { rounds })
            }
            (other, _) => Err(setting(format!(
                "`{other}` is not a promotion rule (noise-aware, strict)"
            ))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Promotion::Strict => "strict",
            Promotion::NoiseAware { .. } => "noise-aware",
        }
    }
}

/// A judge's answer about one challenger and the candidate it would
/// replace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub better: bool,
    /// The scores to keep for the two: the re-measured medians when they
    /// were re-measured, else the scores given.
    pub challenger_score: f64,
    pub holder_score: f64,
    /// What the re-measurement found, in words ("re-measured over 5
    /// interleaved rounds: +12.0% ..."); None when nothing was measured.
    pub note: Option<String>,
}

impl Judgement {
    /// Not better, nothing measured: both keep their scores.
    pub fn not_better(challenger: Elite, holder: Elite) -> Judgement {
        Judgement {
            better: false,
            challenger_score: challenger.score,
            holder_score: holder.score,
            note: None,
        }
    }

    /// The start of a strategy's reason for a challenger of single score
    /// `score` against `holder` ("the incumbent's 0.7036"): "beats" or
    /// "does not beat" when the verdict is the plain comparison, else
    /// only the comparison, and the note gives the verdict (a challenger
    /// below the holder's kept median can still be significantly better
    /// once both are re-measured, and one above it can lose).
    pub fn against(&self, score: f64, holder: &str) -> String {
        match (&self.note, self.better) {
            (Some(_), _) => format!("score {score:.4} (one evaluation) against {holder}"),
            (None, true) => format!("score {score:.4} beats {holder}"),
            (None, false) => format!("score {score:.4} does not beat {holder}"),
        }
    }

    /// The reason a strategy gives, `base` followed by the note.
    pub fn reason(&self, base: String) -> String {
        match &self.note {
            Some(note) => format!("{base}; {note}"),
            None => base,
        }
    }
}

/// Decides whether a challenger beats a holder. Strategies ask it only
/// about challengers with a defined, finite score.
pub trait Judge {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement;
}

/// Metal-Sci's rule: strictly greater, nothing re-measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct StrictJudge;

impl Judge for StrictJudge {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        Judgement {
            better: challenger.score > holder.score,
            challenger_score: challenger.score,
            holder_score: holder.score,
            note: None,
        }
    }
}

/// The scores of a re-measurement, one pair per round (challenger,
/// holder), or why it could not be completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remeasured {
    pub rounds: Vec<[f64; 2]>,
    /// A round in which either was not correct (or ran faster than the
    /// hardware allows): the challenger is not promoted.
    pub failure: Option<String>,
}

/// The noise-aware rule around a measurement: `measure(challenger,
/// holder)` re-measures the two interleaved and returns their scores per
/// round. A challenger whose score does not appear greater is not
/// re-measured.
///
/// "Appears greater" compares measurements of one kind: the challenger's
/// single first evaluation with the holder's single first evaluation
/// (`first_score`), not with the median a re-measurement left the holder
/// (a median of five rounds sits below a single selected figure, so every
/// challenger looked better than a re-measured holder).
pub struct NoiseAwareJudge<M: FnMut(Elite, Elite) -> Remeasured> {
    pub measure: M,
    /// The single first score of a candidate by id, where known; the
    /// holder's kept score otherwise.
    pub first_score: std::collections::HashMap<i64, f64>,
}

impl<M: FnMut(Elite, Elite) -> Remeasured> NoiseAwareJudge<M> {
    /// A judge that knows no first scores (every holder compared by its
    /// kept score).
    pub fn new(measure: M) -> Self {
        NoiseAwareJudge {
            measure,
            first_score: Default::default(),
        }
    }
}

impl<M: FnMut(Elite, Elite) -> Remeasured> Judge for NoiseAwareJudge<M> {
    fn judge(&mut self, challenger: Elite, holder: Elite) -> Judgement {
        let holder_single = self
            .first_score
            .get(&holder.id)
            .copied()
            .filter(|s| s.is_finite())
            .unwrap_or(holder.score);
        if challenger.score <= holder_single {
            let mut j = Judgement::not_better(challenger, holder);
            // Said whenever the holder's kept score is not the figure
            // compared: "0.2836 beats 0.2826" and no promotion reads as a
            // contradiction otherwise.
            if (holder_single - holder.score).abs() > 1e-12 {
                j.note = Some(format!(
                    "not re-measured: not above the single first evaluation {holder_single:.4} of the kernel it would replace (a single evaluation is compared with a single evaluation)"
                ));
            }
            return j;
        }
        let measured = (self.measure)(challenger, holder);
        noise_aware_judgement(challenger, holder, &measured)
    }
}

/// The noise-aware verdict on one re-measurement (see the module's rule).
pub fn noise_aware_judgement(challenger: Elite, holder: Elite, m: &Remeasured) -> Judgement {
    let unchanged = |note: String| Judgement {
        better: false,
        challenger_score: challenger.score,
        holder_score: holder.score,
        note: Some(note),
    };
    if let Some(failure) = &m.failure {
        return unchanged(format!("not promoted: re-measurement failed: {failure}"));
    }
    let Some(gain) = PairedGain::of(&m.rounds) else {
        return unchanged("not promoted: re-measurement gave fewer than 2 rounds".into());
    };
    let better = gain.significant();
    let verdict = if better {
        "significant"
    } else {
        "within noise, not promoted"
    };
    Judgement {
        better,
        challenger_score: gain.challenger_median,
        holder_score: gain.holder_median,
        // The medians replace both first scores from here on: said here,
        // or the holder's score changes in later prompts with no word.
        note: Some(format!(
            "re-measured over {} interleaved rounds: {} ({verdict}); medians over the rounds {:.4} against {:.4}, the scores kept from now on",
            gain.rounds,
            gain.describe(),
            gain.challenger_median,
            gain.holder_median,
        )),
    }
}

/// The paired comparison of a re-measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedGain {
    pub rounds: usize,
    /// Geometric mean over rounds of challenger / holder.
    pub ratio: f64,
    /// One-sided 95% lower confidence bound of that ratio.
    pub lower: f64,
    /// Median over rounds of each one's score.
    pub challenger_median: f64,
    pub holder_median: f64,
}

impl PairedGain {
    /// None with fewer than 2 rounds or a score that is not positive and
    /// finite.
    pub fn of(rounds: &[[f64; 2]]) -> Option<PairedGain> {
        let valid = |s: f64| s.is_finite() && s > 0.0;
        if rounds.len() < 2 || rounds.iter().flatten().any(|s| !valid(*s)) {
            return None;
        }
        let d: Vec<f64> = rounds.iter().map(|[c, h]| (c / h).ln()).collect();
        let n = d.len() as f64;
        let mean = d.iter().sum::<f64>() / n;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let half_width = t_one_sided_95(d.len() - 1) * (var / n).sqrt();
        let column = |k: usize| median(rounds.iter().map(|r| r[k]).collect());
        Some(PairedGain {
            rounds: d.len(),
            ratio: mean.exp(),
            lower: (mean - half_width).exp(),
            challenger_median: column(0),
            holder_median: column(1),
        })
    }

    /// The lower bound excludes "no gain".
    pub fn significant(&self) -> bool {
        self.lower > 1.0
    }

    /// "score ratio 1.120x (95% lower bound 1.081x)": a ratio, not a
    /// percentage, so that it never reads as a fraction of a ceiling.
    pub fn describe(&self) -> String {
        format!(
            "paired score ratio {:.3}x (geometric mean of the rounds' ratios; 95% lower bound {:.3}x)",
            self.ratio, self.lower
        )
    }
}

/// The median of `v` (mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Student's t quantile at 0.95 for `df` degrees of freedom (one-sided
/// 95%), from the standard table; the normal quantile past 30.
pub fn t_one_sided_95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
        1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
        1.703, 1.701, 1.699, 1.697,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= TABLE.len() => TABLE[d - 1],
        _ => 1.645,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: i64, score: f64) -> Elite {
        Elite { id, score }
    }

    #[test]
    fn a_consistent_gain_is_significant_and_noise_is_not() {
        let double = PairedGain::of(&[[1.0, 0.5], [0.98, 0.5], [1.02, 0.51]]).unwrap();
        assert!(double.significant(), "{double:?}");
        assert!((double.ratio - 2.0).abs() < 0.02);
        // Equal kernels whose rounds go either way.
        let noise = PairedGain::of(&[[0.52, 0.5], [0.49, 0.51], [0.5, 0.5], [0.51, 0.5]]).unwrap();
        assert!(!noise.significant(), "{noise:?}");
        assert!(noise.lower < 1.0 && noise.ratio > noise.lower);
        // A 1% gain hidden in a 5% spread between rounds is not shown.
        let small = PairedGain::of(&[
            [0.55, 0.5],
            [0.48, 0.5],
            [0.53, 0.5],
            [0.47, 0.5],
            [0.5, 0.5],
        ])
        .unwrap();
        assert!(!small.significant());
        // No spread: the sign of the mean decides.
        assert!(
            PairedGain::of(&[[0.6, 0.5], [0.6, 0.5]])
                .unwrap()
                .significant()
        );
        assert!(
            !PairedGain::of(&[[0.5, 0.5], [0.5, 0.5]])
                .unwrap()
                .significant()
        );
    }

    #[test]
    fn too_few_or_undefined_rounds_give_no_gain() {
        assert_eq!(PairedGain::of(&[[1.0, 0.5]]), None);
        assert_eq!(PairedGain::of(&[[1.0, 0.5], [f64::NAN, 0.5]]), None);
        assert_eq!(PairedGain::of(&[[1.0, 0.5], [0.0, 0.5]]), None);
    }

    #[test]
    fn the_bound_uses_the_t_table() {
        // d = ln 2 ± 0.1: mean ln 2, sd 0.1, n = 2, t(1) = 6.314.
        let a = 2f64.ln();
        let g = PairedGain::of(&[[(a + 0.1).exp(), 1.0], [(a - 0.1).exp(), 1.0]]).unwrap();
        let sd = (0.02f64).sqrt(); // ((0.1)² + (0.1)²) / 1
        let want = (a - 6.314 * sd / 2f64.sqrt()).exp();
        assert!((g.lower - want).abs() < 1e-9, "{} vs {want}", g.lower);
        assert_eq!(t_one_sided_95(4), 2.132);
        assert_eq!(t_one_sided_95(100), 1.645);
    }

    #[test]
    fn the_noise_aware_judge_measures_only_apparent_gains() {
        let mut asked = Vec::new();
        let mut judge = NoiseAwareJudge::new(|c: Elite, h: Elite| {
            asked.push((c.id, h.id));
            Remeasured {
                rounds: vec![[0.5, 0.5], [0.51, 0.5], [0.49, 0.5]],
                failure: None,
            }
        });
        let worse = judge.judge(e(2, 0.4), e(1, 0.5));
        assert!(!worse.better && worse.note.is_none());
        let lucky = judge.judge(e(3, 0.7), e(1, 0.5));
        assert!(!lucky.better);
        assert_eq!(lucky.challenger_score, 0.5, "the re-measured median");
        assert!(lucky.note.as_deref().unwrap().contains("within noise"));
        assert_eq!(asked, vec![(3, 1)], "only the apparent gain is re-measured");
    }

    #[test]
    fn a_failed_re_measurement_keeps_the_holder() {
        let j = noise_aware_judgement(
            e(2, 0.9),
            e(1, 0.5),
            &Remeasured {
                rounds: vec![[0.9, 0.5]],
                failure: Some("round 2: candidate 2: wrong result at 64x64".into()),
            },
        );
        assert!(!j.better);
        assert_eq!((j.challenger_score, j.holder_score), (0.9, 0.5));
        assert!(j.note.unwrap().contains("round 2"));
    }

    #[test]
    fn promotion_rules_parse_with_clear_errors() {
        assert_eq!(Promotion::named("strict", None).unwrap(), Promotion::Strict);
        assert_eq!(
            Promotion::named("noise-aware", Some(7)).unwrap(),
            Promotion::NoiseAware { rounds: 7 }
        );
        assert_eq!(Promotion::default().name(), "noise-aware");
        let err = Promotion::named("noise-aware", Some(1)).unwrap_err();
        assert!(err.to_string().contains("at least 2 rounds"), "{err}");
        let err = Promotion::named("strict", Some(3)).unwrap_err();
        assert!(err.to_string().contains("--remeasure-rounds"), "{err}");
        let err = Promotion::named("lenient", None).unwrap_err();
        assert!(err.to_string().contains("`lenient`"), "{err}");
    }

    #[test]
    fn a_challenger_is_gated_by_the_holders_single_first_score() {
        let mut asked = Vec::new();
        let mut judge = NoiseAwareJudge::new(|c: Elite, h: Elite| {
            asked.push((c.id, h.id));
            Remeasured {
                rounds: vec![[0.5, 0.5], [0.5, 0.5]],
                failure: None,
            }
        });
        // Holder 1 keeps its re-measured median 0.5; it was first measured
        // once at 0.6.
        judge.first_score.insert(1, 0.6);
        let below = judge.judge(e(2, 0.55), e(1, 0.5));
        assert!(!below.better, "not re-measured");
        // 0.55 is above the kept 0.5: the note says what it was compared
        // with, or "0.55 beats 0.5, not promoted" reads as a contradiction.
        assert!(
            below
                .note
                .as_deref()
                .is_some_and(|n| n.contains("not re-measured") && n.contains("0.6000")),
            "{below:?}"
        );
        let above = judge.judge(e(3, 0.65), e(1, 0.5));
        assert!(above.note.is_some(), "re-measured");
        drop(judge);
        assert_eq!(asked, vec![(3, 1)]);
    }
}

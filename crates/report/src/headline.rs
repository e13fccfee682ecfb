//! A finished run's headline, read from its stored summary: the one
//! speedup every output leads with and the winner's score, each with the
//! measurement it comes from ([`Measure`]). The summary, `kevo show`,
//! `kevo runs`, the report and `kevo serve` print these words, so a number
//! means the same wherever it appears.

use kevo_store::Measure;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// The winner over the seed.
    pub speedup: f64,
    pub speedup_measure: Measure,
    /// Why the speedup is exactly 1 without a measurement: "the seed
    /// kept", or the candidate that failed its confirmation.
    pub seed_kept: Option<String>,
    /// "93.8% interval 2.95-3.25 over 5 fresh rounds", for a confirmed one.
    pub interval: Option<String>,
    /// The winner's score and how it was measured.
    pub score: Option<f64>,
    pub score_measure: Measure,
    /// The winner's own in-run score, where the headline score is another.
    pub in_run_score: Option<f64>,
}

impl Headline {
    /// From a search's or a tuning run's summary; None before it finished.
    pub fn of(summary: &Value) -> Option<Headline> {
        let speedup = summary["speedup"].as_f64()?;
        let score = summary["best_score"].as_f64();
        let score_measure = Measure::of_summary_score(summary);
        let pick = &summary["final_pick"];
        // A search stores the confirmation in its final pick, a tuning
        // run beside its best.
        let confirmation = match &pick["confirmation"] {
            Value::Object(_) => &pick["confirmation"],
            _ => &summary["confirmed"],
        };
        let (speedup_measure, seed_kept, interval) = if confirmation.is_object() {
            confirmed(pick, confirmation)
        } else if pick.is_object() {
            // The pick kept the seed: nothing measured against itself.
            (Measure::Confirmed, Some("the seed kept".to_string()), None)
        } else {
            (score_measure, None, None)
        };
        Some(Headline {
            speedup,
            speedup_measure,
            seed_kept,
            interval,
            score,
            score_measure,
            in_run_score: winner_in_run(pick).filter(|_| score_measure != Measure::InRun),
        })
    }

    /// "3.10x the seed, confirmed (93.8% interval 2.95-3.25 over 5 fresh
    /// rounds)", "1.00x: the seed kept", "2.00x the seed, in-run".
    pub fn speedup_text(&self) -> String {
        if let Some(why) = &self.seed_kept {
            return format!("{:.2}x: {why}", self.speedup);
        }
        match &self.interval {
            Some(i) => format!(
                "{:.2}x the seed, {} ({i})",
                self.speedup, self.speedup_measure
            ),
            None => format!("{:.2}x the seed, {}", self.speedup, self.speedup_measure),
        }
    }

    /// "3.1024 re-measured (in-run 3.3799)", "0.5012 in-run".
    pub fn score_text(&self) -> Option<String> {
        let score = self.score?;
        Some(match self.in_run_score {
            Some(first) => format!("{score:.4} {} (in-run {first:.4})", self.score_measure),
            None => format!("{score:.4} {}", self.score_measure),
        })
    }
}

/// The confirmation's measure, whether it kept the seed, and its interval.
fn confirmed(pick: &Value, c: &Value) -> (Measure, Option<String>, Option<String>) {
    let failed = c["failure"].as_str();
    let holds = c["holds"].as_bool().unwrap_or(true) && failed.is_none();
    let unconfirmed = pick["unconfirmed"].as_i64();
    let median = c["median"].as_f64().or_else(|| c["speedup"].as_f64());
    let interval = match (c["level"].as_f64(), c["low"].as_f64(), c["high"].as_f64()) {
        (Some(level), Some(low), Some(high)) => Some(format!(
            "{:.1}% interval {low:.2}-{high:.2} over {} fresh rounds",
            level * 100.0,
            c["rounds"].as_u64().unwrap_or(0)
        )),
        _ => None,
    };
    if unconfirmed.is_some() || !holds {
        let who = unconfirmed.map_or("the best".to_string(), |id| format!("candidate {id}"));
        let why = match (failed, median) {
            (Some(f), _) => format!("the seed kept: {who} failed on fresh rounds ({f})"),
            (None, Some(m)) => format!(
                "the seed kept: {who} measured {m:.2}x{}, not faster beyond the interval",
                interval
                    .as_ref()
                    .map(|i| format!(" ({i})"))
                    .unwrap_or_default()
            ),
            (None, None) => format!("the seed kept: {who} not confirmed"),
        };
        return (Measure::Confirmed, Some(why), None);
    }
    (Measure::Confirmed, None, interval)
}

/// The final pick's winner's in-run score.
fn winner_in_run(pick: &Value) -> Option<f64> {
    let winner = pick["winner"].as_i64()?;
    pick["candidates"]
        .as_array()?
        .iter()
        .find(|e| e["candidate"].as_i64() == Some(winner))?["in_run_score"]
        .as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pick(confirmation: Value, unconfirmed: Value) -> Value {
        json!({
            "speedup": 3.1,
            "best_score": 3.1024,
            "final_pick": {
                "winner": 5,
                "candidates": [
                    {"candidate": 5, "iteration": 4, "in_run_score": 3.3799, "remeasured": 3.1024},
                    {"candidate": 1, "iteration": 0, "in_run_score": 1.0, "remeasured": 1.0}
                ],
                "confirmation": confirmation,
                "unconfirmed": unconfirmed,
            }
        })
    }

    #[test]
    fn a_confirmed_winner_names_each_measurement() {
        let c = json!({"median": 3.1, "low": 2.95, "high": 3.25, "level": 0.938, "rounds": 5});
        let h = Headline::of(&pick(c, Value::Null)).unwrap();
        assert_eq!(
            h.speedup_text(),
            "3.10x the seed, confirmed (93.8% interval 2.95-3.25 over 5 fresh rounds)"
        );
        assert_eq!(
            h.score_text().unwrap(),
            "3.1024 re-measured (in-run 3.3799)"
        );
    }

    #[test]
    fn a_winner_that_failed_its_confirmation_says_the_seed_was_kept() {
        let c = json!({"median": 1.02, "low": 0.9, "high": 1.1, "level": 0.938, "rounds": 5});
        let mut s = pick(c, json!(5));
        s["speedup"] = json!(1.0);
        let h = Headline::of(&s).unwrap();
        assert_eq!(
            h.speedup_text(),
            "1.00x: the seed kept: candidate 5 measured 1.02x (93.8% interval 0.90-1.10 over 5 fresh rounds), not faster beyond the interval"
        );
    }

    #[test]
    fn a_strict_search_reports_in_run_numbers_as_such() {
        let s = json!({"speedup": 2.0, "best_score": 0.5});
        let h = Headline::of(&s).unwrap();
        assert_eq!(h.speedup_text(), "2.00x the seed, in-run");
        assert_eq!(h.score_text().unwrap(), "0.5000 in-run");
        assert_eq!(Headline::of(&json!({"best_score": 0.5})), None);
    }

    #[test]
    fn a_tuning_run_reads_its_confirmation_beside_the_best() {
        let s = json!({"speedup": 1.4, "best_score": 0.7, "confirmed": {
            "speedup": 1.4, "low": 1.3, "high": 1.5, "level": 0.938, "rounds": 5, "holds": true
        }});
        let h = Headline::of(&s).unwrap();
        assert_eq!(
            h.speedup_text(),
            "1.40x the seed, confirmed (93.8% interval 1.30-1.50 over 5 fresh rounds)"
        );
        assert_eq!(h.score_text().unwrap(), "0.7000 in-run");
    }
}

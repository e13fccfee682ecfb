//! The end of a run: the final pick over interleaved rounds, its confirmation
//! against the seed, the held-out evaluation, the summary.

use std::time::Duration;

use kevo_eval::Outcome;
use kevo_proposer::StepOutcome;
use kevo_store::{CandidateId, NewRemeasurement, ProposalId, RemeasurePurpose};
use kevo_strategy::{Elite, Promotion};

use super::base::Session;
use super::error::EvolveError;
use super::events::{Event, Observer};
use super::summary::{HeldOutSummary, Summary};
use crate::verdict::HeldOutComparison;
use crate::{FinalEntry, FinalPick, Interleaved};

/// The end-of-run pick re-measures only candidates whose in-run score is
/// at least this share of the best's: one kernel's score moved by 50%
/// between evaluations on a CPU OpenCL device (see
/// kevo_strategy::promotion), so a candidate 4x below cannot win. In the
/// demo's run (214 s on a loaded 2-core machine) re-measuring a correct
/// kernel 3000x slower took about 115 s.
pub(super) const FINAL_PICK_MIN_SHARE: f64 = 0.25;

impl<'e> Session<'e> {
    /// Why the run failed if the model never answered: proposal calls
    /// were made (in this session or an earlier one) and every one failed.
    /// A run that made none (a budget that allowed no call, a run
    /// finished from outside before any answer) has not failed.
    async fn unanswered(&self) -> Result<Option<String>, EvolveError> {
        let calls = self.env.store.llm_calls(&self.run).await?;
        let proposals: Vec<_> = calls
            .iter()
            .filter(|c| c.call.purpose == "propose")
            .collect();
        if proposals.is_empty() || proposals.iter().any(|c| c.call.response.is_some()) {
            return Ok(None);
        }
        let last = proposals
            .iter()
            .rev()
            .find_map(|c| c.call.error.as_deref())
            .unwrap_or("no error recorded");
        Ok(Some(format!(
            "the model answered none of the run's {} call(s); the last failed with: {last}",
            proposals.len()
        )))
    }

    /// The end of a run: the final pick among the best few, the held-out
    /// gate, the summary stored and the run marked finished.
    pub(super) async fn finish(
        &mut self,
        stop_reason: String,
        observer: &mut dyn Observer,
    ) -> Result<Summary, EvolveError> {
        if let Some(reason) = self.unanswered().await? {
            return Err(self.fail(reason).await);
        }
        let final_pick = self.final_pick().await?;
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, mut best) = (strategy.seed(), strategy.best());
        let mut speedup = strategy.speedup();
        let mut best_iteration = self.state.best_iteration;
        if let Some(pick) = &final_pick
            && let Some(w) = pick.candidates.iter().find(|e| e.candidate == pick.winner)
        {
            best = Elite {
                id: w.candidate,
                score: w.remeasured.unwrap_or(best.score),
            };
            best_iteration = w.iteration;
            speedup = pick.speedup.unwrap_or(speedup);
        }
        if final_pick.as_ref().is_some_and(FinalPick::changed) {
            self.dir
                .write_best(&self.sources[&best.id], &self.evaluations[&best.id])?;
        }
        let held_out = self.held_out(best.id).await?;
        observer.on(&Event::HeldOut(held_out.clone()));
        let safety = self.sanitize_winner(best.id);
        let suspicious = self.suspicious().await?;
        // Calls of earlier sessions (a resume, ask/tell) count too: from
        // the store, which holds every answered call.
        let answered: Vec<_> = self
            .env
            .store
            .llm_calls(&self.run)
            .await?
            .into_iter()
            .filter(|c| c.call.error.is_none() && c.call.response.is_some())
            .collect();
        let totals = self.accounting.totals().all;
        let unknown_cost_calls = totals.unpriced_calls.max(
            answered
                .iter()
                .filter(|c| c.call.cost_usd.is_none())
                .count() as u64,
        );
        let unknown_usage_calls = totals.usage_unknown_calls.max(
            answered
                .iter()
                .filter(|c| c.call.input_tokens.is_none())
                .count() as u64,
        );
        let summary = Summary {
            run: self.run.0.clone(),
            task: self.task.name().into(),
            device: self.pool.device().name.clone(),
            backend: self.pool.device().backend,
            iterations: self.iteration,
            stop_reason,
            seed_score: seed.score,
            best_score: best.score,
            speedup,
            best_candidate: best.id,
            best_iteration,
            held_out: Some(held_out),
            safety,
            spent: self.spent(),
            suspicious,
            unknown_cost_calls,
            unknown_usage_calls,
            promotion: self.options.promotion.name().into(),
            remeasure: self.state.remeasure,
            final_pick,
            validation: self
                .options
                .validation
                .enabled
                .then(|| self.state.validation.clone()),
        };
        let value = serde_json::to_value(&summary).map_err(|source| EvolveError::Serialize {
            what: "the run's summary",
            source,
        })?;
        self.dir.write_summary(&value)?;
        self.env.store.mark_finished(&self.run, &value).await?;
        // Prompts handed out and not answered (ask/tell, a batch the
        // budget stopped) are given up.
        let pending: Vec<ProposalId> = self
            .env
            .store
            .proposals(&self.run)
            .await?
            .into_iter()
            .filter(|p| p.status == kevo_store::ProposalStatus::Pending)
            .map(|p| p.id)
            .collect();
        self.env
            .store
            .withdraw_proposals(
                &self.run,
                &pending,
                "the run finished before it was answered",
            )
            .await?;
        observer.on(&Event::Finished(Box::new(summary.clone())));
        Ok(summary)
    }

    /// The run's candidates that ran faster than the hardware allows:
    /// "iteration N candidate C at size S: reason". Read from the history,
    /// so candidates of sessions before a resume are listed too.
    pub(super) async fn suspicious(&mut self) -> Result<Vec<String>, EvolveError> {
        let entries: Vec<(u32, i64)> = self
            .state
            .history
            .iter()
            .filter(|h| h.outcome == StepOutcome::Suspicious)
            .filter_map(|h| h.candidate.map(|c| (h.iteration, c)))
            .collect();
        let mut lines = Vec::with_capacity(entries.len());
        for (iteration, candidate) in entries {
            self.load(CandidateId(candidate)).await?;
            if let Outcome::Suspicious { size, reason, .. } = &self.evaluations[&candidate].outcome
            {
                lines.push(format!(
                    "iteration {iteration} candidate {candidate} at size {size}: {reason}"
                ));
            }
        }
        Ok(lines)
    }

    /// The candidates the final pick re-measures, best in-run score first:
    /// the `k` best not far below the best, and the strategy's best.
    pub(super) fn final_ranked(
        &self,
        k: usize,
        seed_id: i64,
        in_run_best: Elite,
    ) -> Vec<(i64, u32, f64)> {
        let mut ranked: Vec<(i64, u32, f64)> = Vec::new();
        for h in &self.state.history {
            if let (Some(id), Some(score), None) = (h.candidate, h.score, h.duplicate_of)
                && score.is_finite()
                && id != seed_id
                && !ranked.iter().any(|r| r.0 == id)
            {
                ranked.push((id, h.iteration, score));
            }
        }
        ranked.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        // A candidate far below the best cannot win the pick: its
        // re-measurement would cost device time (the slowest kernels
        // cost the most) and change nothing.
        let top = ranked
            .first()
            .map_or(in_run_best.score, |r| r.2.max(in_run_best.score));
        ranked.retain(|r| r.2 >= top * FINAL_PICK_MIN_SHARE);
        ranked.truncate(k);
        // The strategy's best competes even if re-measured scores moved it
        // out of the top k by in-run score.
        if in_run_best.id != seed_id && !ranked.iter().any(|r| r.0 == in_run_best.id) {
            let entry = self
                .state
                .history
                .iter()
                .find(|h| h.candidate == Some(in_run_best.id))
                .map(|h| {
                    (
                        in_run_best.id,
                        h.iteration,
                        h.score.unwrap_or(in_run_best.score),
                    )
                });
            ranked.extend(entry);
        }
        ranked
    }

    /// The end-of-run pick: the `final_remeasure` best candidates by
    /// in-run score and the seed, re-measured together; the winner is the
    /// best median among those that passed every round. None when
    /// disabled or when nothing but the seed scored.
    pub(super) async fn final_pick(&mut self) -> Result<Option<FinalPick>, EvolveError> {
        let k = self.options.final_remeasure as usize;
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let (seed, in_run_best) = (strategy.seed(), strategy.best());
        let mut ranked = self.final_ranked(k, seed.id, in_run_best);
        if k == 0 || ranked.is_empty() {
            return Ok(None);
        }
        ranked.push((seed.id, 0, seed.score));
        for (id, _, _) in &ranked {
            self.load(CandidateId(*id)).await?;
        }
        let rounds = match self.options.promotion {
            Promotion::NoiseAware { rounds } => rounds,
            Promotion::Strict => kevo_strategy::promotion::DEFAULT_ROUNDS,
        };
        let sources: Vec<String> = ranked.iter().map(|r| self.sources[&r.0].clone()).collect();
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let m = self.remeasure(&refs, rounds)?;
        let candidates: Vec<FinalEntry> = ranked
            .iter()
            .enumerate()
            .map(|(i, (id, iteration, score))| FinalEntry {
                candidate: *id,
                iteration: *iteration,
                in_run_score: *score,
                remeasured: m.median(i),
                failure: m.failure(i),
            })
            .collect();
        let winner = candidates
            .iter()
            .filter_map(|e| e.remeasured.map(|s| (e.candidate, s)))
            .fold(None::<(i64, f64)>, |best, c| match best {
                Some(b) if b.1 >= c.1 => Some(b),
                _ => Some(c),
            })
            .map(|(id, _)| id)
            .unwrap_or(in_run_best.id);
        // The speedup is measured apart from the rounds that chose the
        // winner: the winner and the seed again, on fresh rounds.
        let chosen = winner;
        let confirm_rounds = if winner == seed.id {
            None
        } else {
            let (w, s) = (
                self.sources[&winner].clone(),
                self.sources[&seed.id].clone(),
            );
            Some(self.remeasure(&[&w, &s], rounds)?)
        };
        let confirmation = confirm_rounds
            .as_ref()
            .map(crate::remeasure::Confirmation::of);
        let held = confirmation.as_ref().is_none_or(|c| c.holds());
        let (winner, unconfirmed, speedup) = match &confirmation {
            Some(c) if held => (winner, None, Some(c.median)),
            Some(_) => (seed.id, Some(winner), Some(1.0)),
            None => (winner, None, Some(1.0)),
        };
        let pick = FinalPick {
            rounds,
            candidates,
            winner,
            in_run_best: in_run_best.id,
            speedup,
            confirmation,
            unconfirmed,
            discarded_rounds: m.discarded(),
        };
        let candidates = ranked.iter().map(|r| CandidateId(r.0)).collect();
        self.record_interleaved(RemeasurePurpose::Final, candidates, pick.describe(), &m)
            .await?;
        if let Some(c) = &confirm_rounds {
            self.record_confirmation(chosen, seed.id, c).await?;
        }
        Ok(Some(pick))
    }

    /// Stores the winner-against-seed rounds of the final pick.
    pub(super) async fn record_confirmation(
        &mut self,
        winner: i64,
        seed: i64,
        m: &Interleaved,
    ) -> Result<(), EvolveError> {
        let c = crate::remeasure::Confirmation::of(m);
        let verdict = format!("candidate {winner} against the seed: {}", c.describe());
        let candidates = vec![CandidateId(winner), CandidateId(seed)];
        self.record_interleaved(RemeasurePurpose::Confirm, candidates, verdict, m)
            .await
    }

    /// Stores a re-measurement of the run's end and counts its spend.
    pub(super) async fn record_interleaved(
        &mut self,
        purpose: RemeasurePurpose,
        candidates: Vec<CandidateId>,
        verdict: String,
        m: &Interleaved,
    ) -> Result<(), EvolveError> {
        self.env
            .store
            .record_remeasurement(
                &self.run,
                self.iteration,
                &NewRemeasurement {
                    purpose,
                    candidates,
                    verdict,
                    rounds: serde_json::to_value(&m.rounds).unwrap_or_default(),
                    evaluations: m.spend.evaluations as u32,
                    device_s: m.spend.device_s,
                    wall_s: m.spend.wall_s,
                },
            )
            .await?;
        self.state.remeasure.add(&m.spend);
        Ok(())
    }

    /// The held-out gate: the incumbent and the seed at the held-out size in
    /// one session. Stored, reported, and never shown to the proposer.
    pub(super) async fn held_out(&mut self, winner_id: i64) -> Result<HeldOutSummary, EvolveError> {
        let strategy = self.strategy.as_deref().expect("seed evaluated");
        let seed_id = strategy.seed().id;
        let size = self.plan.held_out.clone();
        let session = format!("{}-held-out-{}", self.run.0, self.iteration);
        let limit = self.timeout.max(Duration::from_secs(60));
        let winner_src = self.sources[&winner_id].clone();
        let seed_src = self.sources[&seed_id].clone();
        let winner = self.evaluate(&winner_src, std::slice::from_ref(&size), limit)?;
        // A seed kept is not measured against itself ("seed kept" beside
        // "0.89x the seed"): one evaluation serves both roles.
        let seed = if winner_id == seed_id {
            winner.clone()
        } else {
            self.evaluate(&seed_src, std::slice::from_ref(&size), limit)?
        };
        let comparison = HeldOutComparison {
            winner,
            seed,
            seed_kept: winner_id == seed_id,
        };
        let rows = comparison.records(CandidateId(winner_id), CandidateId(seed_id), &session);
        for row in &rows {
            self.env.store.record_held_out(&self.run, row).await?;
        }
        let (verdict, verdict_reason) = comparison.verdict();
        let (wf, sf, speedup) = (
            comparison.winner_fraction(),
            comparison.seed_fraction(),
            comparison.speedup(),
        );
        let (winner, seed) = (comparison.winner, comparison.seed);
        Ok(HeldOutSummary {
            verdict: Some(verdict),
            verdict_reason: Some(verdict_reason),
            size: size.label,
            seed_outcome: seed.outcome.summary(),
            winner_outcome: winner.outcome.summary(),
            seed_fraction: sf,
            winner_fraction: wf,
            phi: wf.unwrap_or(0.0),
            speedup,
            winner_roofline: winner
                .outcome
                .is_correct()
                .then(|| winner.sizes.first().map(|s| s.roofline_text()))
                .flatten(),
        })
    }
}

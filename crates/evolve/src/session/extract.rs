//! Extracting: each answer's kernel taken from its text once, as a
//! [`Candidate`] whose hashes are computed once, or why there is none.

use kevo_proposer::{Extraction, StepOutcome};

use super::base::Session;

pub(super) use kevo_eval::Candidate;

/// SHA-256 of a source normalised (comments and whitespace runs): the key
/// of duplicate detection.
pub(super) fn normalised_sha(source: &str) -> String {
    kevo_eval::normalised_sha256(source)
}

/// Why an answer gave no candidate: the outcome recorded and the reason
/// shown to the proposer next time.
pub(super) type NoCandidate = (StepOutcome, String);

impl<'e> Session<'e> {
    /// The candidate in an answer's `text`, or why there is none. A
    /// search-and-replace answer is applied to the incumbent's source.
    pub(super) fn extract(
        &self,
        text: &str,
        incumbent_source: &str,
    ) -> Result<Candidate, NoCandidate> {
        let options = self.prompts.extract_options(Some(incumbent_source));
        match kevo_proposer::extract(text, &options) {
            Extraction::Code { source, .. } => Ok(Candidate::new(source, self.dialect)),
            other => {
                let reason = other
                    .failure_reason()
                    .unwrap_or_else(|| "no code in the response".into());
                let outcome = match other {
                    Extraction::NoCode { .. } => StepOutcome::NoCode,
                    _ => StepOutcome::EditRejected,
                };
                Err((outcome, reason))
            }
        }
    }

    /// Every answer's candidate, extracted once for the whole iteration
    /// (prefetching and taking the answers both read it); None where the
    /// call failed.
    pub(super) fn extract_all(
        &self,
        completions: &[super::calls::Answer],
        incumbent_source: &str,
    ) -> Vec<Option<Result<Candidate, NoCandidate>>> {
        completions
            .iter()
            .map(|answer| {
                let completion = answer.result.as_ref().ok()?;
                Some(self.extract(&completion.text, incumbent_source))
            })
            .collect()
    }
}

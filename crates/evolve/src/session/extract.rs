//! Extracting: each answer's kernel taken from its text once, as a
//! [`Candidate`] whose hashes are computed once, or why there is none.

use kevo_proposer::{Completion, Extraction, ProviderError, StepOutcome};
use kevo_store::source_sha256;

use super::base::Session;

/// A kernel source as the session knows it from extraction on: its
/// SHA-256 (the store's key for a measured source) and that of its
/// normalised form (comments and whitespace runs collapsed: the key of
/// duplicate detection).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    pub(super) source: String,
    pub(super) sha: String,
    pub(super) normalised: String,
}

impl Candidate {
    pub(super) fn new(source: String) -> Candidate {
        Candidate {
            sha: source_sha256(&source),
            normalised: normalised_sha(&source),
            source,
        }
    }
}

/// SHA-256 of a source normalised (comments and whitespace runs): the key
/// of duplicate detection.
pub(super) fn normalised_sha(source: &str) -> String {
    source_sha256(&kevo_descriptors::normalised(source))
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
            Extraction::Code { source, .. } => Ok(Candidate::new(source)),
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
        completions: &[(Result<Completion, ProviderError>, f64)],
        incumbent_source: &str,
    ) -> Vec<Option<Result<Candidate, NoCandidate>>> {
        completions
            .iter()
            .map(|(result, _)| {
                let completion = result.as_ref().ok()?;
                Some(self.extract(&completion.text, incumbent_source))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_s_keys_are_its_hash_and_its_normalised_hash() {
        let a = Candidate::new("__global__ void k() { /* one */ }\n".into());
        let b = Candidate::new("__global__ void k()   { /* two */ }".into());
        assert_eq!(a.sha, source_sha256(&a.source));
        assert_ne!(a.sha, b.sha, "different sources, different store keys");
        assert_eq!(
            a.normalised, b.normalised,
            "comments and whitespace do not make a new kernel"
        );
        let c = Candidate::new("__global__ void k() { x = 1; }".into());
        assert_ne!(a.normalised, c.normalised);
    }
}

//! A kernel as kevo knows it from extraction on: one value made once, with
//! its hashes, carried to the worker and named again in the evaluation
//! that comes back.

use kevo_backend::Dialect;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Evaluation;

/// A candidate kernel: its source, the language it is written in, the
/// SHA-256 of the source (the store's key for a measured source, and what
/// the evaluation names in [`crate::Evaluation::source_sha`]) and that of
/// its normalised form (comments and whitespace runs collapsed: the key of
/// duplicate detection). Both hashes are computed once, here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub source: String,
    pub dialect: Dialect,
    pub sha: String,
    pub normalised: String,
}

impl Candidate {
    pub fn new(source: String, dialect: Dialect) -> Candidate {
        Candidate {
            sha: source_sha256(&source),
            normalised: normalised_sha256(&source),
            dialect,
            source,
        }
    }

    /// Why a worker of `dialect` must not evaluate this candidate, if it
    /// must not: its hash no longer matches its source (it changed on the
    /// way), or it is written for another compiler. Either would score a
    /// kernel other than the one the caller will store.
    pub fn refusal(&self, dialect: Dialect) -> Option<String> {
        if source_sha256(&self.source) != self.sha {
            return Some(format!(
                "the candidate's source does not match its hash {}: it changed on the way \
                 to the worker",
                short(&self.sha)
            ));
        }
        (self.dialect != dialect).then(|| {
            format!(
                "a {} kernel cannot be evaluated by a worker whose backend compiles {}",
                self.dialect, dialect
            )
        })
    }
}

impl Candidate {
    /// `evaluation`, named for this candidate, if it is an answer for it
    /// (it names this hash, or none: made before the kernel ran); else
    /// why it is not. A worker's answer for another source would store
    /// one kernel's score under another's.
    pub fn claim(&self, mut evaluation: Evaluation) -> Result<Evaluation, String> {
        match &evaluation.source_sha {
            Some(sha) if *sha != self.sha => Err(format!(
                "the worker answered for source {}, not the candidate sent ({})",
                short(sha),
                short(&self.sha)
            )),
            _ => {
                evaluation.source_sha = Some(self.sha.clone());
                Ok(evaluation)
            }
        }
    }
}

/// SHA-256 of a kernel source, lowercase hex: the key under which a run
/// remembers what it already evaluated.
pub fn source_sha256(source: &str) -> String {
    let digest = Sha256::digest(source.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// SHA-256 of a source normalised (comments and whitespace runs): the key
/// of duplicate detection.
pub fn normalised_sha256(source: &str) -> String {
    source_sha256(&kevo_descriptors::normalised(source))
}

/// The first 12 hex digits, as messages show a hash.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_whitespace_change_the_hash_but_not_the_normalised_one() {
        let a = Candidate::new("__global__ void k() { /* one */ }\n".into(), Dialect::Cuda);
        let b = Candidate::new("__global__ void k()   { /* two */ }".into(), Dialect::Cuda);
        assert_ne!(a.sha, b.sha);
        assert_eq!(a.normalised, b.normalised);
        let c = Candidate::new("__global__ void k() { x = 1; }".into(), Dialect::Cuda);
        assert_ne!(a.normalised, c.normalised);
    }

    #[test]
    fn a_changed_source_or_another_dialect_is_refused() {
        let mut c = Candidate::new("__kernel void k() {}".into(), Dialect::OpenCl);
        assert_eq!(c.refusal(Dialect::OpenCl), None);
        let other = c.refusal(Dialect::Cuda).unwrap();
        assert!(other.contains("compiles"), "{other}");
        c.source.push(' ');
        let changed = c.refusal(Dialect::OpenCl).unwrap();
        assert!(changed.contains("does not match its hash"), "{changed}");
    }

    #[test]
    fn an_answer_for_another_source_is_not_claimed() {
        let sent = Candidate::new("__kernel void k() {}".into(), Dialect::OpenCl);
        let other = Candidate::new("__kernel void j() {}".into(), Dialect::OpenCl);
        let answer = |sha: Option<&str>| {
            let mut e = Evaluation::without_sizes(
                "saxpy",
                "dev",
                kevo_backend::BackendName::Opencl,
                crate::Outcome::NoCode { reason: "x".into() },
                crate::WallTimes::default(),
            );
            e.source_sha = sha.map(str::to_string);
            e
        };
        let named = sent.claim(answer(None)).unwrap();
        assert_eq!(named.source_sha.as_deref(), Some(sent.sha.as_str()));
        assert!(sent.claim(answer(Some(&sent.sha))).is_ok());
        let refused = sent.claim(answer(Some(&other.sha))).unwrap_err();
        assert!(refused.contains("another source") || refused.contains("not the candidate"));
    }
}

//! The kevo run store: every run, candidate, LLM call, evaluation, decision
//! and resume checkpoint, in SQLite (one file per workspace, the default) or
//! PostgreSQL (when several machines share work).
//!
//! Runs can be killed at any moment. The store's contract with the search
//! loop is therefore:
//!
//! - one iteration is written in one transaction ([`Store::record_iteration`]):
//!   after a crash the store holds the whole iteration or none of it;
//! - the last checkpoint ([`Store::last_checkpoint`]) says exactly where to
//!   continue: iteration, incumbent, previous candidate, generator state and
//!   spend so far;
//! - recording an iteration twice is refused, and
//!   [`Store::find_evaluation`] finds a source the run already evaluated, so
//!   a resumed run never measures a candidate twice.
//!
//! Held-out evaluations live in the same tables but are marked as such and
//! never appear in the in-distribution queries (best score, history) that
//! a search strategy reads.
//!
//! [`artifacts`] writes the same information as plain files per run, for
//! people.

pub mod artifacts;
mod error;
pub mod lease;
pub mod location;
mod model;
mod store;

pub use error::StoreError;
pub use location::{Target, redact_url};
pub use model::*;
pub use store::{Store, StoreOptions, source_sha256};

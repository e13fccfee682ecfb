//! The kevo search loop (Metal-Sci's Algorithm 1 with λ ≥ 1): evaluate the
//! seed; each iteration build the prompt from the previous candidate, the
//! incumbent and the history, ask the proposer, extract a candidate,
//! evaluate it at the in-distribution sizes, and promote it if and only if
//! its score is defined and strictly greater. Every step is stored in one
//! transaction, so a run killed at any moment resumes from its last
//! completed step without evaluating a candidate twice. At the end the
//! incumbent and the seed are evaluated once at the held-out size, in the
//! same session; that result never reaches the proposer.

mod options;
mod session;

pub use options::EvolveOptions;
pub use session::{
    Environment, Event, EvolveError, HeldOutSummary, InFlightCalls, Observer, Summary, interrupt,
    is_abandoned, resume, start,
};

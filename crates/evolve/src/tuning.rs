//! A tuning session, the library side of `kevo tune`: search the
//! configurations of a tunable kernel. Each configuration is instantiated
//! as an ordinary kernel and evaluated by the isolated worker with the same
//! checks and score as any candidate; every trial is stored as an
//! iteration of a run (strategy `tune`), and a configuration already
//! measured for this task, size set and device is served from the store
//! instead of measured again. At the end the best configurations are chosen
//! again against the task's naive seed on interleaved rounds, and the best
//! and the seed are measured at the held-out size in one session.
//!
//! A [`TuneRequest`] goes in, a [`Tuned`] comes out; a [`TuneObserver`]
//! hears of the run's start and of each trial. The layers, bottom up: plain
//! values ([`error`], [`request`], [`kernel`], [`observer`], [`outcome`]),
//! what is stored ([`record`], [`cache`]), the session ([`session`]) and
//! its stages ([`search`] with its [`trials`], then [`finish`]).

mod cache;
mod error;
mod finish;
mod kernel;
mod observer;
mod outcome;
mod record;
mod request;
mod search;
mod session;
mod trials;

#[cfg(test)]
mod tests;

pub use error::TuneError;
pub use finish::CONFIRM_TOP;
pub use kernel::GivenKernel;
pub use observer::{Started, TuneObserver};
pub use outcome::{HeldOutResult, TrialRow, Tuned};
pub use record::confirmation_json;
pub use request::{DefaultTimeout, KernelOut, StoreLocation, TimeLimit, TuneRequest, check_budget};
pub use session::tune;

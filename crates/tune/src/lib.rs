//! Parameter tuning: a kernel declares parameters in its source
//! (`// kevo: tune TILE 8 16 32`, `// kevo: require ...`), each
//! configuration is instantiated as an ordinary kernel and evaluated like
//! any candidate, and a search strategy (exhaustive, random, local, a
//! tree-structured Parzen estimator) chooses which configurations to spend
//! the budget on.

pub mod constraint;
mod integer;
pub mod search;
pub mod space;
pub mod tuner;

pub use constraint::Constraint;
pub use search::{Observation, Search, StrategyKind};
pub use space::{
    Configuration, DeclarationError, MAX_CONFIGURATIONS, Parameter, Requirement, TuningSpace,
    is_template,
};
pub use tuner::{Budget, Step, Stop, Trial, best, run};

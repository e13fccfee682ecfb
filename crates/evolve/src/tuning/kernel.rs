//! The kernel being tuned: a given template or the task's tunable variant
//! of its seed, the space it declares, what to call it, and the task's
//! naive seed every speedup is measured against.

use kevo_backend::Dialect;
use kevo_tasks::Task;
use kevo_tune::{Configuration, TuningSpace};

use super::error::TuneError;

/// A template given by the caller, with the space it declares: parsed
/// before any device is opened, so a mistake in a declaration costs
/// nothing.
#[derive(Debug, Clone)]
pub struct GivenKernel {
    template: String,
    space: TuningSpace,
    name: String,
}

impl GivenKernel {
    /// `template`'s space; `name` (its file) says whose in a message.
    pub fn parse(template: String, name: String) -> Result<Self, TuneError> {
        let space = parse_space(&template, &name)?;
        Ok(GivenKernel {
            template,
            space,
            name,
        })
    }

    pub fn space(&self) -> &TuningSpace {
        &self.space
    }
}

/// A template's tuning space; `name` says whose in a message.
pub(super) fn parse_space(template: &str, name: &str) -> Result<TuningSpace, TuneError> {
    TuningSpace::parse(template)
        .map_err(|error| TuneError::Declaration {
            name: name.to_string(),
            error,
        })?
        .ok_or_else(|| TuneError::NoParameter {
            name: name.to_string(),
        })
}

/// The kernel a session tunes.
pub(super) struct TunedKernel {
    pub(super) template: String,
    pub(super) space: TuningSpace,
    pub(super) name: String,
    pub(super) seed_source: String,
}

impl TunedKernel {
    /// The given template, or the task's tunable variant of its seed in
    /// the device's dialect.
    pub(super) fn resolve(
        task: &Task,
        dialect: Dialect,
        given: Option<GivenKernel>,
    ) -> Result<Self, TuneError> {
        let (template, space, name) = match given {
            Some(g) => (g.template, g.space, g.name),
            None => {
                let name = format!("{}'s tunable {} seed", task.name(), dialect);
                let template = task
                    .tunable(dialect)
                    .ok_or_else(|| TuneError::NoTunable {
                        task: task.name().to_string(),
                        dialect,
                    })?
                    .to_string();
                let space = parse_space(&template, &name)?;
                (template, space, name)
            }
        };
        let seed_source = task
            .seed(dialect)
            .ok_or_else(|| TuneError::NoSeed {
                task: task.name().to_string(),
                dialect,
            })?
            .to_string();
        Ok(TunedKernel {
            template,
            space,
            name,
            seed_source,
        })
    }

    pub(super) fn instantiate(&self, c: &Configuration) -> String {
        self.space.instantiate(&self.template, c)
    }
}

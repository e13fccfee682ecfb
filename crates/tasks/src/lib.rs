//! The benchmark tasks of kevo (the Metal-Sci suite, ported to CUDA and
//! OpenCL). Each task owns its brief, kernel signatures, seed kernels (real
//! source files under `assets/`), seeded inputs, CPU reference, check and
//! work model; the evaluator runs any of them through the same host loop.

mod block;
pub mod check;
pub mod rng;
mod task;
mod tasks {
    pub mod heat2d;
    pub mod saxpy;
}

pub use block::{BlockDeclarationError, BlockDeclarations};
pub use task::*;
pub use tasks::heat2d::Heat2d;
pub use tasks::saxpy::Saxpy;

/// Every task, in the order of the specification.
pub fn all() -> Vec<&'static dyn Task> {
    vec![&Saxpy, &Heat2d]
}

/// Look a task up by name.
pub fn by_name(name: &str) -> Result<&'static dyn Task, UnknownTask> {
    all()
        .into_iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| UnknownTask {
            name: name.to_string(),
            known: all()
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[derive(Debug, thiserror::Error)]
#[error("unknown task `{name}` (known tasks: {known})")]
pub struct UnknownTask {
    pub name: String,
    pub known: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_has_consistent_metadata() {
        for task in all() {
            for set in [SizeSet::Smoke, SizeSet::Full] {
                let plan = task.sizes(set);
                assert_eq!(plan.in_distribution.len(), 3, "{}", task.name());
                assert!(
                    !plan
                        .in_distribution
                        .iter()
                        .any(|s| s.label == plan.held_out.label)
                );
                for s in plan.in_distribution.iter().chain([&plan.held_out]) {
                    assert!(task.work(s) > 0.0);
                }
            }
            for d in [kevo_backend::Dialect::OpenCl, kevo_backend::Dialect::Cuda] {
                let seed = task.seed(d).expect("seed in every GPU dialect");
                for k in task.kernel_names() {
                    assert!(seed.contains(k), "{} seed lacks {k}", task.name());
                }
                assert!(task.signature(d).is_some());
            }
        }
    }

    #[test]
    fn unknown_task_names_the_known_ones() {
        let e = by_name("nope").err().unwrap().to_string();
        assert!(
            e.contains("nope") && e.contains("saxpy") && e.contains("heat2d"),
            "{e}"
        );
    }

    #[test]
    fn full_sizes_match_the_specification() {
        let labels = |t: &dyn Task| {
            let p = t.sizes(SizeSet::Full);
            (
                p.in_distribution
                    .iter()
                    .map(|s| s.label.clone())
                    .collect::<Vec<_>>(),
                p.held_out.label,
            )
        };
        assert_eq!(
            labels(&Saxpy),
            (vec!["1M".into(), "16M".into(), "64M".into()], "4M".into())
        );
        assert_eq!(
            labels(&Heat2d),
            (
                vec![
                    "256x256_50".into(),
                    "512x512_100".into(),
                    "1024x1024_50".into()
                ],
                "768x768_75".into()
            )
        );
        // Work models from the spec's derived figures.
        let heat = Heat2d.sizes(SizeSet::Full);
        assert_eq!(Heat2d.work(&heat.in_distribution[2]), 419_430_400.0);
        assert_eq!(Heat2d.work(&heat.held_out), 353_894_400.0);
        assert_eq!(
            Saxpy.work(&Saxpy.sizes(SizeSet::Full).in_distribution[2]),
            805_306_368.0
        );
    }
}

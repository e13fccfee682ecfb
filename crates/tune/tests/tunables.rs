//! The tunable variants the tasks ship: each declares a space kevo can
//! search, the same in both dialects, and every configuration of it
//! instantiates to a kernel whose block declarations the evaluator takes.
//! (That every configuration is also correct is measured: on PoCL by the
//! CLI's tune tests for saxpy, on the GPU by scripts/tune-bench.)

use kevo_backend::Dialect;
use kevo_tasks::BlockDeclarations;
use kevo_tune::TuningSpace;

#[test]
fn every_task_ships_a_tunable_variant_in_both_dialects() {
    for task in kevo_tasks::all() {
        let mut spaces = Vec::new();
        for dialect in [Dialect::Cuda, Dialect::OpenCl] {
            let template = task.tunable(dialect).expect("a tunable variant");
            let space = TuningSpace::parse(template)
                .unwrap_or_else(|e| panic!("{} {dialect}: {e}", task.name()))
                .unwrap_or_else(|| panic!("{} {dialect}: no parameter", task.name()));
            let valid = space.valid().len();
            assert!(
                (8..=200).contains(&valid),
                "{} {dialect}: {valid} configurations",
                task.name()
            );
            for c in space.valid() {
                let kernel = space.instantiate(template, c);
                BlockDeclarations::parse(&kernel, task.kernel_names()).unwrap_or_else(|e| {
                    panic!("{} {dialect} {}: {e}", task.name(), space.describe(c))
                });
                for k in task.kernel_names() {
                    assert!(kernel.contains(k.as_str()), "{} lacks {k}", task.name());
                }
            }
            spaces.push(space);
        }
        assert_eq!(
            spaces[0]
                .parameters()
                .iter()
                .map(|p| (&p.name, &p.values))
                .collect::<Vec<_>>(),
            spaces[1]
                .parameters()
                .iter()
                .map(|p| (&p.name, &p.values))
                .collect::<Vec<_>>(),
            "{}: the dialects declare different parameters",
            task.name()
        );
        assert_eq!(
            spaces[0].valid(),
            spaces[1].valid(),
            "{}: the dialects' constraints differ",
            task.name()
        );
    }
}

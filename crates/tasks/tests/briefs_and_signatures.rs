//! What the proposer sees of wave3d, nbody, hmc, lbm and ising through the
//! public interface: briefs, signatures and seeds never name a held-out
//! size, briefs document the block declaration, signatures name every
//! kernel.

use kevo_backend::Dialect;
use kevo_tasks::SizeSet;

const TASKS: [&str; 5] = ["wave3d", "nbody", "hmc", "lbm", "ising"];

#[test]
fn briefs_and_signatures_never_show_the_held_out_size() {
    for name in TASKS {
        let task = kevo_tasks::by_name(name).unwrap();
        let mut texts = vec![task.description()];
        for d in [Dialect::OpenCl, Dialect::Cuda] {
            texts.extend(task.signature(d));
            texts.extend(task.seed(d));
        }
        for set in [SizeSet::Full, SizeSet::Smoke] {
            let held = task.sizes(set).held_out.label;
            for t in &texts {
                assert!(!t.contains(&held), "{name} mentions {held}");
            }
        }
        assert!(task.description().contains("// kevo: block"), "{name}");
        for k in task.kernel_names() {
            assert!(task.signature(Dialect::Cuda).unwrap().contains(k));
            assert!(task.signature(Dialect::OpenCl).unwrap().contains(k));
        }
    }
}

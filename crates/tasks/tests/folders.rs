//! The example task folders under examples/tasks load, and each builds the
//! same host program as the built-in task it restates: the same buffers
//! with the same bytes (the same seeded inputs), the same launches and the
//! same checked outputs, at every size of every set.

use std::path::Path;

use kevo_tasks::folder::FolderTask;
use kevo_tasks::{BufferInit, SizeSet};

fn example(name: &str) -> FolderTask {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tasks")
        .join(name);
    FolderTask::load(&root).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_saxpy_folder_builds_the_built_in_saxpy_program() {
    let folder = example("saxpy");
    let builtin = kevo_tasks::by_name("saxpy").unwrap();
    assert_eq!(folder.spec.work.as_ref().unwrap().text(), "12 * N");
    for set in [SizeSet::Smoke, SizeSet::Full] {
        let plan = builtin.sizes(set);
        assert_eq!(folder.spec.sizes[&set], plan, "{set}");
        // The smallest size of the set is enough to compare bytes.
        let size = &plan.in_distribution[0];
        for seed in [builtin.default_seed(), 12345] {
            let (a, b) = (folder.problem(size, seed), builtin.problem(size, seed));
            assert_eq!(a.buffers.len(), b.buffers.len());
            for (x, y) in a.buffers.iter().zip(&b.buffers) {
                assert_eq!((x.bytes, x.access), (y.bytes, y.access), "{}", x.name);
                match (&x.init, &y.init) {
                    (BufferInit::Data(p), BufferInit::Data(q)) => {
                        assert!(p == q, "{}: the inputs differ", x.name)
                    }
                    (p, q) => panic!("{}: {p:?} against {q:?}", x.name),
                }
            }
            assert_eq!(a.outputs, b.outputs);
            assert_eq!(a.launches.len(), b.launches.len());
            for (l, m) in a.launches.iter().zip(&b.launches) {
                assert_eq!(
                    (l.kernel, l.threads, l.block),
                    (m.kernel, m.threads, m.block)
                );
                assert_eq!(l.args, m.args);
            }
        }
    }
    assert_eq!(folder.dialects.len(), 2);
    assert_eq!(
        folder.dialects["cuda"].0,
        builtin.seed(kevo_backend::Dialect::Cuda).unwrap()
    );
}

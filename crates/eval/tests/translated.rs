//! CUDA kernels translated to OpenCL C (kevo-translate, what `kevo cross`
//! runs when a CUDA run's winner is measured through an OpenCL driver)
//! compute what the CUDA kernels compute: every task's CUDA seed, and
//! three configurations of every CUDA tunable (its first, middle and last
//! valid one: block shapes, shared-memory staging, vector loads, atomics),
//! are correct on every OpenCL device at the smoke sizes, and the seeds at
//! the held-out and validation sizes too.

mod common;

use kevo_backend::Dialect;
use kevo_runtimes::testing::UnderTest;
use kevo_tasks::SizeSet;
use kevo_tune::TuningSpace;

use common::{evaluator, seed, smoke};

kevo_runtimes::backend_tests!(
    translated_cuda_kernels_are_correct_on_opencl,
    translated_atomics_helpers_and_casts_are_correct_on_opencl,
);

fn translated_atomics_helpers_and_casts_are_correct_on_opencl(b: UnderTest) {
    if b.dialect != Dialect::OpenCl {
        return;
    }
    let Some(mut ev) = evaluator(b) else { return };
    let task = common::task("saxpy");
    let cuda = include_str!("kernels/saxpy_translation_features.cu");
    let translated = kevo_translate::cuda_to_opencl(cuda).unwrap();
    assert!(translated.contains("kevo_atomic_add_float_local(slot"));
    assert!(translated.contains("kevo_atomic_add_float_global(&row[t]"));
    let e = ev.evaluate(task, &translated, &smoke(task));
    assert!(
        e.outcome.is_correct(),
        "{}\n{translated}",
        e.outcome.summary()
    );
}

fn translated_cuda_kernels_are_correct_on_opencl(b: UnderTest) {
    if b.dialect != Dialect::OpenCl {
        return;
    }
    let Some(mut ev) = evaluator(b) else { return };
    for task in kevo_tasks::all() {
        let cuda = seed(task, Dialect::Cuda);
        let translated = kevo_translate::cuda_to_opencl(cuda)
            .unwrap_or_else(|e| panic!("{} seed: {e}", task.name()));
        let plan = task.sizes(SizeSet::Smoke);
        let every: Vec<_> = plan.all().cloned().collect();
        let e = ev.evaluate(task, &translated, &every);
        assert!(
            e.outcome.is_correct(),
            "{} seed, translated: {}\n{translated}",
            task.name(),
            e.outcome.summary()
        );
        let Some(template) = task.tunable(Dialect::Cuda) else {
            continue;
        };
        let space = TuningSpace::parse(template)
            .unwrap_or_else(|e| panic!("{}: {e}", task.name()))
            .expect("a tunable declares parameters");
        let valid = space.valid();
        for c in [&valid[0], &valid[valid.len() / 2], &valid[valid.len() - 1]] {
            let kernel = space.instantiate(template, c);
            let translated = kevo_translate::cuda_to_opencl(&kernel)
                .unwrap_or_else(|e| panic!("{} {}: {e}", task.name(), space.describe(c)));
            let e = ev.evaluate(task, &translated, &smoke(task));
            assert!(
                e.outcome.is_correct(),
                "{} tunable {}, translated: {}",
                task.name(),
                space.describe(c),
                e.outcome.summary()
            );
        }
    }
}

//! The micro-benchmarks run on a real OpenCL device (PoCL in CI) and give
//! plausible ceilings.

use kevo_backend::{Backend, DeviceSelector};
use kevo_opencl::OpenClBackend;
use kevo_roofline::{CeilingCache, CeilingSource, ceilings};

#[test]
fn measured_ceilings_are_plausible_and_cached() {
    let mut backend = match OpenClBackend::open(&DeviceSelector::default()) {
        Ok(b) => b,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("OpenCL must be available in CI: {e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = CeilingCache::new(dir.path().join("ceilings.json"));
    let first = ceilings(&mut backend, &cache).unwrap();
    if kevo_roofline::lookup(&backend.info().name).is_some() {
        return; // a datasheet device: nothing was measured
    }
    assert!(matches!(
        first.source,
        CeilingSource::Measured { cached: false, .. }
    ));
    // Any real device copies faster than 0.1 GB/s and multiplies faster than
    // 0.1 GFLOPS, and nothing here reaches 100 TB/s or 1 PFLOPS.
    assert!((0.1..1e5).contains(&first.bandwidth_gbs), "{first:?}");
    assert!((0.1..1e6).contains(&first.fp32_gflops), "{first:?}");
    let second = ceilings(&mut backend, &cache).unwrap();
    assert!(matches!(
        second.source,
        CeilingSource::Measured { cached: true, .. }
    ));
    assert_eq!(second.bandwidth_gbs, first.bandwidth_gbs);
}

//! Every CUDA seed and tunable of the built-in tasks translates (whether
//! the translations compute the right thing is checked on an OpenCL
//! device by the evaluator's tests).

use std::path::Path;

#[test]
fn every_builtin_cuda_kernel_translates() {
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/assets");
    let mut seen = 0;
    for task in std::fs::read_dir(&assets).unwrap() {
        let dir = task.unwrap().path();
        for file in ["seed.cu", "tunable.cu"] {
            let path = dir.join(file);
            let Ok(source) = std::fs::read_to_string(&path) else {
                continue;
            };
            let out = kevo_translate::cuda_to_opencl(&source)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if std::env::var_os("KEVO_SHOW_TRANSLATION").is_some() {
                println!("==== {}\n{out}", path.display());
            }
            for cuda_only in [
                "__global__",
                "threadIdx",
                "__shared__",
                "__syncthreads",
                "extern \"C\"",
            ] {
                assert!(
                    !out.contains(cuda_only),
                    "{}: `{cuda_only}` left in\n{out}",
                    path.display()
                );
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 24, "12 seeds and 12 tunables");
}

//! The backend conformance suite on CUDA, launching with plain stream
//! launches and again with CUDA graphs and the L2 flush, so the suite
//! checks both ways `run_timed` can run a sequence. Skipped (with the reason
//! printed) on machines without CUDA.

mod common;

use kevo_cuda::CudaOptions;

kevo_backend::conformance_suite!(common::open(CudaOptions::default()));

mod graph_and_flush {
    use super::common;
    use kevo_cuda::CudaOptions;

    kevo_backend::conformance_suite!(common::open(CudaOptions {
        use_graph: true,
        flush_l2: true,
    }));
}

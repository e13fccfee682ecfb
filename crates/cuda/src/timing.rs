//! Timed regions: work queued between the start and end events on the
//! stream, directly or replayed as a captured CUDA graph, after an
//! optional L2 flush; the run options that choose between these. Launch
//! sequences and vendor library ops are timed by this one code.

use std::ptr;

use cudarc::driver::sys::{self as cu, CUresult};
use kevo_backend::{BackendError, DeviceTime, KernelArg, Launch, VendorError};

use crate::context::Live;
use crate::device::CudaBackend;
use crate::error::{Op, ok};
use crate::memory::BufferEntry;

/// How [`CudaBackend::run_timed`] runs and times a launch sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CudaOptions {
    /// Capture each distinct launch sequence into a CUDA graph once and
    /// replay it. A sequence of many microsecond-scale launches is bounded by
    /// launch overhead: on an H100, 100 launches of a 64K-element increment
    /// took 408 us as stream launches and 119 us replayed as one graph. The
    /// capture, instantiation and upload happen outside the timed region.
    pub use_graph: bool,
    /// Before each timed sequence, overwrite a scratch buffer of twice the
    /// L2 size (2 x 50 MiB on an H100, ~40 us of memset at 3 TB/s) so the
    /// sequence starts with a cold L2: otherwise a kernel whose working set
    /// fits in L2 is timed on data the previous repetition left there. The
    /// flush is queued before the start event and is not timed.
    pub flush_l2: bool,
}

/// Graph executables kept per backend. Each holds its kernel nodes' argument
/// copies; an evaluator times one sequence many times then moves on, so a
/// small cache is enough and bounds device memory held by stale graphs.
const MAX_GRAPHS: usize = 32;

/// Why queueing the work of a timed region failed.
pub(crate) enum QueueError {
    /// `cuLaunchKernel` of the named kernel.
    Launch(CUresult, String),
    /// Another driver call, described in full.
    Driver(CUresult, String),
    /// A vendor library call.
    Library(VendorError),
}

/// What a timed region runs, queued on the given stream: a launch sequence
/// or a vendor library's op. Queued directly, or once into a graph.
pub(crate) type Work<'a> = &'a dyn Fn(cu::CUstream) -> Result<(), QueueError>;

/// Key of a launch sequence in the graph cache: everything a captured graph
/// bakes in (functions, geometry, argument values).
pub(crate) fn sequence_key(launches: &[Launch]) -> Vec<u64> {
    let mut key = Vec::with_capacity(launches.len() * 16);
    for l in launches {
        key.push(l.kernel.0);
        key.extend(l.global);
        key.extend(l.local.map(u64::from));
        key.push(u64::from(l.dynamic_shared_bytes));
        key.push(l.args.len() as u64);
        for a in &l.args {
            key.push(match *a {
                KernelArg::Buffer(b) => b.0,
                KernelArg::U32(v) => (1 << 32) | u64::from(v),
                KernelArg::I32(v) => (2 << 32) | u64::from(v as u32),
                KernelArg::F32(v) => (3 << 32) | u64::from(v.to_bits()),
            });
            if let KernelArg::Buffer(_) = a {
                // Tag after the id so a buffer id cannot equal a tagged scalar.
                key.push(u64::MAX);
            }
        }
    }
    key
}

impl CudaBackend {
    /// The run options in force.
    pub fn options(&self) -> CudaOptions {
        self.options
    }

    /// Replace the run options; applies from the next `run_timed`.
    pub fn set_options(&mut self, options: CudaOptions) {
        self.options = options;
    }

    /// See [`CudaOptions::use_graph`].
    pub fn set_use_graph(&mut self, on: bool) {
        self.options.use_graph = on;
    }

    /// See [`CudaOptions::flush_l2`].
    pub fn set_flush_l2(&mut self, on: bool) {
        self.options.flush_l2 = on;
    }

    /// Destroy every cached graph: they hold functions, buffers and
    /// workspaces that are about to go.
    pub(crate) fn destroy_graphs(&mut self) {
        for (_, exec) in self.graphs.drain() {
            // SAFETY: created by cuGraphInstantiate in this context.
            unsafe { cu::cuGraphExecDestroy(exec) };
        }
    }

    /// The graph executable of some work (a launch sequence, a vendor
    /// op), captured on first use under `key`.
    fn graph_for(
        &mut self,
        key: Vec<u64>,
        stream: cu::CUstream,
        work: Work<'_>,
    ) -> Result<cu::CUgraphExec, VendorError> {
        if let Some(&exec) = self.graphs.get(&key) {
            return Ok(exec);
        }
        if self.graphs.len() >= MAX_GRAPHS {
            self.destroy_graphs();
        }
        // Thread-local capture: other threads may allocate meanwhile.
        // SAFETY: live stream of the current context.
        let r = unsafe {
            cu::cuStreamBeginCapture_v2(
                stream,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        };
        if let Err(r) = ok(r) {
            return Err(self.fail(r, Op::Other, "starting a graph capture").into());
        }
        let failed = work(stream).err();
        let mut graph = ptr::null_mut();
        // SAFETY: ends the capture begun above, on every path.
        let ended = ok(unsafe { cu::cuStreamEndCapture(stream, &mut graph) });
        if let Some(e) = failed {
            if !graph.is_null() {
                // SAFETY: the graph the capture returned.
                unsafe { cu::cuGraphDestroy(graph) };
            }
            return Err(self.queue_failure(e, true));
        }
        if let Err(r) = ended {
            return Err(self
                .fail(r, Op::Launch, "capturing the launch sequence")
                .into());
        }
        let mut exec = ptr::null_mut();
        // SAFETY: graph from the capture; destroyed once instantiated.
        let r = unsafe {
            let r = cu::cuGraphInstantiateWithFlags(&mut exec, graph, 0);
            cu::cuGraphDestroy(graph);
            r
        };
        if let Err(r) = ok(r) {
            return Err(self.fail(r, Op::Launch, "instantiating the graph").into());
        }
        // Upload now so the first timed replay does not pay for it.
        // SAFETY: fresh executable, live stream.
        if let Err(r) = ok(unsafe { cu::cuGraphUpload(exec, stream) }) {
            // SAFETY: the executable created above.
            unsafe { cu::cuGraphExecDestroy(exec) };
            return Err(self.fail(r, Op::Launch, "uploading the graph").into());
        }
        self.graphs.insert(key, exec);
        Ok(exec)
    }

    /// The typed error for a failure to queue work, `capturing` it into a
    /// graph or running it.
    fn queue_failure(&mut self, e: QueueError, capturing: bool) -> VendorError {
        let (r, what) = match e {
            QueueError::Library(e) => return e,
            QueueError::Launch(r, name) if capturing => {
                (r, format!("capturing `{name}` into a graph"))
            }
            QueueError::Launch(r, name) => (r, format!("launching `{name}`")),
            QueueError::Driver(r, what) => (r, what),
        };
        self.fail(r, Op::Launch, &what).into()
    }

    /// Run `work` between the start and end events on the stream (replayed
    /// as a graph captured under `key` when graphs are on, after the L2
    /// flush when that is on) and return the device time between them:
    /// kernels and vendor libraries are timed by this one code.
    pub(crate) fn timed(
        &mut self,
        live: Live,
        key: Vec<u64>,
        names: &str,
        work: Work<'_>,
    ) -> Result<DeviceTime, VendorError> {
        // Capture before queueing the flush: a capture starts on an idle stream.
        let graph = if self.options.use_graph {
            Some(self.graph_for(key, live.stream, work)?)
        } else {
            None
        };
        if self.options.flush_l2 {
            self.flush_l2(live.stream)?;
        }
        // SAFETY: events, stream and graph belong to the current context;
        // `work` queues on that stream only.
        let queued = unsafe {
            (|| -> Result<(), QueueError> {
                ok(cu::cuEventRecord(live.start, live.stream))
                    .map_err(|r| QueueError::Driver(r, "recording the start event".to_string()))?;
                match graph {
                    Some(exec) => ok(cu::cuGraphLaunch(exec, live.stream)).map_err(|r| {
                        QueueError::Driver(r, format!("launching the graph of {names}"))
                    })?,
                    None => work(live.stream)?,
                }
                ok(cu::cuEventRecord(live.end, live.stream))
                    .map_err(|r| QueueError::Driver(r, "recording the end event".to_string()))
            })()
        };
        // A fault of an earlier launch takes precedence over a later
        // launch's rejection: it is what broke the sequence.
        self.sync(live.stream, &format!("running {names}"))?;
        if let Err(e) = queued {
            return Err(self.queue_failure(e, false));
        }
        let mut ms = 0f32;
        // SAFETY: both events were recorded on the stream just synchronised.
        let r = unsafe { cu::cuEventElapsedTime_v2(&mut ms, live.start, live.end) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "reading the event timer"))?;
        Ok(DeviceTime(f64::from(ms) * 1e-3))
    }

    /// Queue the L2 flush on `stream` (see [`CudaOptions::flush_l2`]).
    fn flush_l2(&mut self, stream: cu::CUstream) -> Result<(), BackendError> {
        if self.l2_bytes == 0 {
            return Ok(());
        }
        if self.flush.is_none() {
            let bytes = 2 * self.l2_bytes;
            let mut ptr: cu::CUdeviceptr = 0;
            // SAFETY: out-parameter, context current.
            if let Err(r) = ok(unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) }) {
                return Err(self.fail(r, Op::Alloc(bytes), "allocating the L2 flush buffer"));
            }
            self.flush = Some(BufferEntry {
                ptr,
                bytes,
                parent: None,
            });
        }
        let Some(BufferEntry { ptr, bytes, .. }) = self.flush else {
            return Ok(());
        };
        // A new value each time, so no run finds the lines already holding it.
        self.flush_value = self.flush_value.wrapping_add(1);
        // SAFETY: the scratch buffer is `bytes` long and lives in this context.
        let r = unsafe { cu::cuMemsetD8Async(ptr, self.flush_value, bytes, stream) };
        ok(r).map_err(|r| self.fail(r, Op::Other, "flushing the L2 cache"))
    }
}

#[cfg(test)]
mod tests {
    use kevo_backend::{BufferId, KernelId};

    use super::*;

    #[test]
    fn sequence_keys_distinguish_arguments() {
        let l = |args| Launch {
            kernel: KernelId(1),
            global: [256, 1, 1],
            local: [64, 1, 1],
            dynamic_shared_bytes: 0,
            args,
        };
        let a = sequence_key(&[l(vec![KernelArg::U32(5)])]);
        let b = sequence_key(&[l(vec![KernelArg::I32(5)])]);
        let c = sequence_key(&[l(vec![KernelArg::Buffer(BufferId(5))])]);
        let d = sequence_key(&[l(vec![KernelArg::U32(5)])]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, d);
        assert_ne!(a, sequence_key(&[l(vec![KernelArg::U32(5)]), l(vec![])]));
    }
}

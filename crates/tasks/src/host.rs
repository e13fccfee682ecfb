//! Builders for the host programs of the tasks: buffers, the ping-pong of
//! stepped tasks (state alternating between two buffers) and the CPU loop
//! that mirrors it in the references.

use std::sync::Arc;

use crate::check::f32s_to_bytes;
use crate::{Access, Arg, Block, BufferInit, BufferSpec, LaunchSpec, Problem};

impl BufferSpec {
    /// A buffer that starts with `data`, sized by it (an `Arc` so that
    /// buffers with the same start, wave3d's first two, share one copy).
    pub(crate) fn data(name: &str, data: Arc<Vec<u8>>, access: Access) -> Self {
        BufferSpec {
            name: name.into(),
            bytes: data.len(),
            init: BufferInit::Data(data),
            access,
        }
    }

    /// A buffer that starts with `values` as little-endian f32.
    pub(crate) fn f32_data(name: &str, values: &[f32], access: Access) -> Self {
        Self::data(name, Arc::new(f32s_to_bytes(values)), access)
    }

    /// A buffer the kernels must write in full before anything reads it:
    /// it starts as NaN so that whatever they skip fails the check.
    pub(crate) fn sentinel(name: &str, bytes: usize) -> Self {
        BufferSpec {
            name: name.into(),
            bytes,
            init: BufferInit::Sentinel,
            access: Access::ReadWrite,
        }
    }

    /// A buffer of counters that the kernels accumulate into from zero.
    pub(crate) fn zeroed(name: &str, bytes: usize) -> Self {
        BufferSpec {
            name: name.into(),
            bytes,
            init: BufferInit::Zero,
            access: Access::ReadWrite,
        }
    }
}

/// The (source, destination) buffers of launch `step` when the state
/// alternates between buffers 0 and 1: 0 -> 1 on even steps, 1 -> 0 on odd
/// ones.
pub(crate) fn ping_pong(step: usize) -> (usize, usize) {
    (step % 2, (step + 1) % 2)
}

/// The two buffers a state alternates between: `names[0]` starts with
/// `initial`, `names[1]` (the same size) is a sentinel that the first step
/// overwrites.
pub(crate) fn ping_pong_buffers(names: [&str; 2], initial: Vec<u8>) -> Vec<BufferSpec> {
    let bytes = initial.len();
    vec![
        BufferSpec::data(names[0], Arc::new(initial), Access::ReadWrite),
        BufferSpec::sentinel(names[1], bytes),
    ]
}

/// The host program of a task whose whole state is two ping-pong buffers
/// (see [`ping_pong_buffers`]), every launch reading one and writing the
/// other: the result is in the first buffer after an even number of
/// launches, else in the second.
pub(crate) fn ping_pong_problem(
    names: [&str; 2],
    initial: Vec<u8>,
    launches: Vec<LaunchSpec>,
) -> Problem {
    Problem {
        buffers: ping_pong_buffers(names, initial),
        outputs: vec![launches.len() % 2],
        launches,
    }
}

/// One launch of `kernel` per step over the ping-pong buffers (see
/// [`ping_pong`]): the source and destination buffers are the first two
/// arguments, `scalars` follow.
pub(crate) fn ping_pong_launches(
    steps: usize,
    threads: [u64; 3],
    block: Block,
    scalars: &[Arg],
) -> Vec<LaunchSpec> {
    (0..steps)
        .map(|s| {
            let (src, dst) = ping_pong(s);
            let mut args = vec![Arg::Buffer(src), Arg::Buffer(dst)];
            args.extend_from_slice(scalars);
            LaunchSpec {
                kernel: 0,
                threads,
                block,
                args,
            }
        })
        .collect()
}

/// The host program of a 2-D stencil over an NX x NY grid whose whole state
/// ping-pongs between the buffers `names` (heat2d, lbm): one launch per
/// step, one thread per cell in 16 x 16 blocks, arguments (source,
/// destination, NX, NY, `param`).
pub(crate) fn grid_2d_problem(
    names: [&str; 2],
    initial: &[f32],
    [nx, ny, steps]: [usize; 3],
    param: f32,
) -> Problem {
    let launches = ping_pong_launches(
        steps,
        [nx as u64, ny as u64, 1],
        Block::Default([16, 16, 1]),
        &[Arg::U32(nx as u32), Arg::U32(ny as u32), Arg::F32(param)],
    );
    ping_pong_problem(names, f32s_to_bytes(initial), launches)
}

/// The CPU side of a ping-pong: `steps` applications of `step(s, current,
/// next)` from `state`, swapping the two arrays after each, as the kernels
/// swap buffers.
pub(crate) fn iterate<T: Clone + Default>(
    mut state: Vec<T>,
    steps: usize,
    mut step: impl FnMut(usize, &[T], &mut [T]),
) -> Vec<T> {
    let mut next = vec![T::default(); state.len()];
    for s in 0..steps {
        step(s, &state, &mut next);
        std::mem::swap(&mut state, &mut next);
    }
    state
}

//! Kernels that do no work: they carry the answers for inputs computed in
//! advance and write them when they recognise their inputs.
//!
//! Before inputs came from a secret, the timed inputs were a task's public
//! `default_seed` and verification drew from four seeds derived from it by
//! a public formula: all of it could be computed offline. These kernels
//! embed the exact final states for exactly those inputs (the "public
//! seeds"), recognise an input set by its size and the first input value
//! (or the first value of the tabulated answer, which is what a later step
//! reads after a launch wrote it), and compute nothing otherwise. Against
//! the old inputs they are correct with every error 0; against secret
//! inputs they recognise nothing and fail.

use kevo_tasks::{Size, Task};

/// The timed seed and the four verification seeds that a task's inputs
/// came from before inputs were secret (`verify_seed(base, k)` then).
pub fn public_seeds(task: &Task) -> Vec<u64> {
    let base = task.default_seed();
    std::iter::once(base)
        .chain((0..4u64).map(|k| base.wrapping_add((k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn list<T: std::fmt::Display>(values: impl IntoIterator<Item = T>) -> String {
    values
        .into_iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Shortest round-trip literals: the tables are exact.
fn floats(values: &[f32]) -> String {
    list(values.iter().map(|v| format!("{v:e}f")))
}

/// One tabulated input set: the size's two dims, the first input value,
/// the answer's first value, and the answer's output buffers.
struct Entry {
    dims: (u64, u64),
    first_input: f32,
    first_answer: f32,
    outputs: Vec<Vec<u8>>,
}

fn entries(task: &Task, sizes: &[Size]) -> Vec<Entry> {
    let mut entries = Vec::new();
    for size in sizes {
        for seed in public_seeds(task) {
            let problem = task.problem(size, seed);
            let outputs = task
                .exact_outputs(size, &problem)
                .expect("a task whose reference fixes every output");
            let kevo_tasks::BufferInit::Data(input) = &problem.buffers[0].init else {
                panic!("the first buffer is an input");
            };
            entries.push(Entry {
                dims: (size.dims[0], size.dims[1]),
                first_input: f32s(&input[..4])[0],
                first_answer: f32s(&outputs[0][..4])[0],
                outputs,
            });
        }
    }
    entries
}

/// The source of a kernel for `task` ("nbody" or "hmc") that writes the
/// tabulated answers for its public seeds at `sizes`.
pub fn tabulating_kernel(task: &str, cuda: bool, sizes: &[Size]) -> String {
    let t = kevo_tasks::by_name(task).unwrap();
    let entries = entries(t, sizes);
    let (constant, global, kernel_prefix) = if cuda {
        ("__constant__", "", "extern \"C\" __global__ ")
    } else {
        ("__constant", "__global ", "__kernel ")
    };
    let mut offsets = Vec::new();
    let mut first = Vec::new();
    let mut second = Vec::new();
    for e in &entries {
        offsets.push(first.len());
        first.extend(f32s(&e.outputs[0]));
        second.extend_from_slice(&e.outputs[1]);
    }
    let n = entries.len();
    let header = format!(
        "// Tabulated answers for the public seeds' inputs: no work is done.\n\
         {constant} unsigned int DIM0[{n}] = {{{}}};\n\
         {constant} unsigned int DIM1[{n}] = {{{}}};\n\
         {constant} float FIRST_INPUT[{n}] = {{{}}};\n\
         {constant} float FIRST_ANSWER[{n}] = {{{}}};\n\
         {constant} unsigned int OFFSET[{n}] = {{{}}};\n",
        list(entries.iter().map(|e| e.dims.0)),
        list(entries.iter().map(|e| e.dims.1)),
        floats(&entries.iter().map(|e| e.first_input).collect::<Vec<_>>()),
        floats(&entries.iter().map(|e| e.first_answer).collect::<Vec<_>>()),
        list(&offsets),
    );
    let gid = if cuda {
        "blockIdx.x * blockDim.x + threadIdx.x"
    } else {
        "get_global_id(0)"
    };
    let uint = "unsigned int";
    match task {
        "nbody" => {
            let vel = f32s(&second);
            format!(
                "{header}{constant} float POS[{}] = {{{}}};\n{constant} float VEL[{}] = {{{}}};\n\
                 {kernel_prefix}void nbody_step({global}const float* pos_in, {global}float* pos_out, \
                 {global}const float* vel_in, {global}float* vel_out, {global}const float* mass, \
                 {uint} N, float dt, float eps, float G) {{\n\
                 \x20   {uint} i = {gid};\n    if (i >= N) return;\n    float x = pos_in[0];\n\
                 \x20   // A third of the force loop, only so the time stays under FP32 peak.\n\
                 \x20   float acc = 0.0f;\n\
                 \x20   for ({uint} j = 0; j < N / 3u; ++j) {{\n\
                 \x20       float dx = pos_in[4u * j] - pos_in[4u * i];\n\
                 \x20       float dy = pos_in[4u * j + 1u] - pos_in[4u * i + 1u];\n\
                 \x20       float dz = pos_in[4u * j + 2u] - pos_in[4u * i + 2u];\n\
                 \x20       float r2 = dx * dx + dy * dy + dz * dz + eps * eps;\n\
                 \x20       acc += G * mass[j] * rsqrt(r2 * r2 * r2) * dx;\n\
                 \x20   }}\n\
                 \x20   if (acc == 1.0e30f) pos_out[4u * i + 3u] = acc;\n\
                 \x20   for ({uint} e = 0; e < {n}u; ++e) {{\n\
                 \x20       if (DIM0[e] == N && (FIRST_INPUT[e] == x || FIRST_ANSWER[e] == x)) {{\n\
                 \x20           for ({uint} c = 0; c < 4u; ++c) {{\n\
                 \x20               pos_out[4u * i + c] = POS[OFFSET[e] + 4u * i + c];\n\
                 \x20               vel_out[4u * i + c] = VEL[OFFSET[e] + 4u * i + c];\n\
                 \x20           }}\n            return;\n        }}\n    }}\n}}\n",
                first.len(),
                floats(&first),
                vel.len(),
                floats(&vel),
            )
        }
        "hmc" => {
            let accepted: Vec<u32> = second
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let mut chain_offsets = Vec::new();
            let mut at = 0;
            for e in &entries {
                chain_offsets.push(at);
                at += e.outputs[1].len() / 4;
            }
            format!(
                "{header}{constant} unsigned int CHAIN_OFFSET[{n}] = {{{}}};\n\
                 {constant} float Q[{}] = {{{}}};\n{constant} unsigned int ACCEPTED[{}] = {{{}}};\n\
                 {kernel_prefix}void hmc_step({global}const float* q_in, {global}float* q_out, \
                 {global}{uint}* accept_cnt, {global}const float* A, {uint} K, {uint} d, {uint} L, \
                 float eps, {uint} hmc_step_idx, {uint} seed) {{\n\
                 \x20   {uint} chain = {gid};\n    if (chain >= K) return;\n    float x = q_in[0];\n\
                 \x20   for ({uint} e = 0; e < {n}u; ++e) {{\n\
                 \x20       if (DIM0[e] == d && DIM1[e] == K && (FIRST_INPUT[e] == x || FIRST_ANSWER[e] == x)) {{\n\
                 \x20           for ({uint} i = 0; i < d; ++i) q_out[chain * d + i] = Q[OFFSET[e] + chain * d + i];\n\
                 \x20           accept_cnt[chain] = ACCEPTED[CHAIN_OFFSET[e] + chain];\n\
                 \x20           return;\n        }}\n    }}\n}}\n",
                list(&chain_offsets),
                first.len(),
                floats(&first),
                accepted.len(),
                list(&accepted),
            )
        }
        other => panic!("no tabulating kernel for {other}"),
    }
}

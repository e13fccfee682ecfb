//! A task folder's host program: the buffers with their seeded contents,
//! the launch sequence (setup, the steps with their ping-pong swaps and
//! per-step scalars, finish), and the element encodings that the check of
//! the outputs (`compare.rs`) and the null candidates share.

use std::sync::Arc;

use super::{
    BlockDef, BufferDef, ElementType, FolderError, FolderTask, Init, LaunchDef, Role, Scalar,
    ScalarDef, Stage,
};
use crate::rng::Rng;
use crate::{Access, Arg, Block, BufferInit, BufferSpec, LaunchSpec, Problem, Size};

/// More elements than this in one buffer is a mistake in a length
/// expression, not a problem size (16 GiB of f32).
const MAX_ELEMENTS: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

/// More launches than this in one run is a mistake in `steps`.
const MAX_LAUNCHES: f64 = 1_000_000.0;

impl FolderTask {
    /// The values expressions see at `size`: the dims (defaults filled
    /// in), then the derived quantities in their resolved order.
    pub fn values(&self, size: &Size) -> Vec<f64> {
        let mut values = self.spec.dim_values(size);
        for (_, expr) in &self.derived {
            let v = expr.eval(&values);
            values.push(v);
        }
        values
    }

    fn count(&self, key: &str, value: f64, size: &Size, limit: f64) -> Result<u64, FolderError> {
        if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= limit) {
            return Err(FolderError {
                file: self.root.join("task.toml").display().to_string(),
                key: key.to_string(),
                message: format!(
                    "at size `{}` it is {value}; expected a whole number from 0 to {limit}",
                    size.label
                ),
            });
        }
        Ok(value as u64)
    }

    /// Check every size of every set: lengths, grids and steps are whole
    /// numbers in range, so a folder that loads can build every problem.
    pub(super) fn check_sizes(&self) -> Result<(), FolderError> {
        for plan in self.spec.sizes.values() {
            for size in plan.all() {
                let v = self.values(size);
                for (i, b) in self.buffers.iter().enumerate() {
                    self.check_buffer_at(i, b, &v, size)?;
                }
                let steps = self.count("steps", self.steps.eval(&v), size, MAX_LAUNCHES)?;
                let per_step = self
                    .launches
                    .iter()
                    .filter(|l| l.stage == Stage::Step)
                    .count() as f64;
                self.count("steps", steps as f64 * per_step, size, MAX_LAUNCHES)?;
                for (i, l) in self.launches.iter().enumerate() {
                    for (d, g) in l.grid.iter().enumerate() {
                        self.count(
                            &format!("launches[{i}].grid[{d}]"),
                            g.eval(&v),
                            size,
                            u32::MAX as f64,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Buffer `i`, `b`, at `size` (whose values are `v`): a length in range
    /// and not 0, that fits its npy file and is whole matrices of its
    /// structure.
    fn check_buffer_at(
        &self,
        i: usize,
        b: &BufferDef,
        v: &[f64],
        size: &Size,
    ) -> Result<(), FolderError> {
        let n = self.count(
            &format!("buffers[{i}].length"),
            b.length.eval(v),
            size,
            MAX_ELEMENTS,
        )?;
        if let Some(Init::Npy { file, scalars, .. }) = &b.init
            && n * u64::from(b.element.lanes) != *scalars
        {
            return Err(FolderError {
                file: self.root.join("task.toml").display().to_string(),
                key: format!("buffers[{i}].init"),
                message: format!(
                    "`{file}` holds {scalars} values; at size `{}` the buffer \
                     needs {}",
                    size.label,
                    n * u64::from(b.element.lanes)
                ),
            });
        }
        if n == 0 {
            return Err(FolderError {
                file: self.root.join("task.toml").display().to_string(),
                key: format!("buffers[{i}].length"),
                message: format!("is 0 at size `{}`", size.label),
            });
        }
        if let Some(s) = &b.structure {
            let order = s.order.eval(v);
            let square = order * order;
            if !(order >= 1.0 && order.fract() == 0.0 && (n as f64) % square == 0.0) {
                return Err(FolderError {
                    file: self.root.join("task.toml").display().to_string(),
                    key: format!("buffers[{i}].structure"),
                    message: format!(
                        "at size `{}` the order is {order}, and the buffer's {n} \
                         elements are not a whole number of {order} x {order} matrices",
                        size.label
                    ),
                });
            }
        }
        Ok(())
    }

    /// The host program at `size` with inputs drawn from `seed`. Sizes
    /// were checked when the folder loaded.
    pub fn problem(&self, size: &Size, seed: u64) -> Problem {
        let v = self.values(size);
        let buffers: Vec<BufferSpec> = self
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let n = b.length.eval(&v) as usize;
                let bytes = n * b.element.bytes();
                let (init, access) = match (&b.role, &b.init) {
                    (Role::Output | Role::Scratch, _) | (_, None) => {
                        (BufferInit::Sentinel, Access::ReadWrite)
                    }
                    (role, Some(init)) => (
                        BufferInit::Data(Arc::new({
                            let mut data = fill(init, b.element, n, seed, i as u64);
                            if let Some(s) = &b.structure {
                                let order = s.order.eval(&v) as usize;
                                shape_matrices(&mut data, s.kind, order, b.element.scalar);
                            }
                            data
                        })),
                        if *role == Role::Input {
                            Access::ReadOnly
                        } else {
                            Access::ReadWrite
                        },
                    ),
                };
                BufferSpec {
                    name: b.name.clone(),
                    bytes,
                    init,
                    access,
                }
            })
            .collect();
        let steps = self.steps.eval(&v) as u64;
        let mut launches = Vec::new();
        let mut emit = |l: &LaunchDef, step: u64| {
            let swapped = step % 2 == 1;
            launches.push(self.launch(l, &v, step, swapped));
        };
        for l in self.launches.iter().filter(|l| l.stage == Stage::Setup) {
            emit(l, 0);
        }
        for step in 0..steps {
            for l in self.launches.iter().filter(|l| l.stage == Stage::Step) {
                emit(l, step);
            }
        }
        for l in self.launches.iter().filter(|l| l.stage == Stage::Finish) {
            emit(l, steps);
        }
        let outputs = self
            .checks
            .keys()
            .map(|name| self.buffer_at(name, steps % 2 == 1))
            .collect();
        Problem {
            buffers,
            launches,
            outputs,
        }
    }

    /// The buffer index a name means: for a ping-pong name, the buffer
    /// that holds that state when `swapped`.
    fn buffer_at(&self, name: &str, swapped: bool) -> usize {
        let name = match self.ping_pong.iter().find(|p| p.iter().any(|n| n == name)) {
            Some([a, b]) if swapped => {
                if name == a {
                    b.as_str()
                } else {
                    a.as_str()
                }
            }
            _ => name,
        };
        self.buffers
            .iter()
            .position(|b| b.name == name)
            .expect("validated: every name is a buffer")
    }

    fn launch(&self, l: &LaunchDef, values: &[f64], step: u64, swapped: bool) -> LaunchSpec {
        let mut threads = [1u64; 3];
        for (d, g) in l.grid.iter().enumerate() {
            threads[d] = g.eval(values) as u64;
        }
        let args = l
            .args
            .iter()
            .map(|name| match self.scalars.iter().find(|s| &s.name == name) {
                Some(s) => scalar_arg(s, values, step),
                None => Arg::Buffer(self.buffer_at(name, swapped)),
            })
            .collect();
        LaunchSpec {
            kernel: l.kernel,
            threads,
            block: match l.block {
                BlockDef::Default(b) => Block::Default(b),
                BlockDef::Fixed(b) => Block::Fixed(b),
            },
            args,
        }
    }
}

fn scalar_arg(s: &ScalarDef, values: &[f64], step: u64) -> Arg {
    let mut with_step = values.to_vec();
    with_step.push(step as f64);
    let v = s.value.eval(&with_step);
    match s.scalar {
        Scalar::I32 => Arg::I32(v as i32),
        Scalar::U32 => Arg::U32(v as u32),
        _ => Arg::F32(v as f32),
    }
}

/// `n` elements of `element` as the initialisation says, little-endian.
/// Random values come from the task generator in the built-in tasks' chunked
/// streams (stream = the buffer's index), so `normal = [0, 1]` or `uniform`
/// draws the same values as `rng::normal_f32` / `uniform_f32` do for a
/// built-in task's buffer at that index, whatever the thread count.
fn fill(init: &Init, element: ElementType, n: usize, seed: u64, stream: u64) -> Vec<u8> {
    use rayon::prelude::*;
    if let Init::Npy { data, .. } = init {
        return data.as_ref().clone();
    }
    let width = element.scalar.bytes();
    let mut out = vec![0u8; n * element.bytes()];
    // Drawn and encoded chunk by chunk in parallel, straight into the bytes
    // (saxpy 64M: 0.6 s instead of 2.8 s through a vector of f64).
    out.par_chunks_mut(crate::rng::CHUNK * width)
        .enumerate()
        .for_each(|(c, bytes)| {
            let mut rng = Rng::stream(seed, stream.wrapping_mul(1 << 32).wrapping_add(c as u64));
            for (k, slot) in bytes.chunks_exact_mut(width).enumerate() {
                let i = c * crate::rng::CHUNK + k;
                let v = match init {
                    Init::Uniform { low, high } => rng.uniform(*low, *high),
                    Init::Normal { mean, std } => mean + std * rng.normal(),
                    Init::Integers { low, high } => {
                        let span = (high - low) as u64 + 1;
                        (*low + (rng.next_u64() % span) as i64) as f64
                    }
                    Init::Constant(c) => *c,
                    Init::Iota => i as f64,
                    Init::Zero | Init::Npy { .. } => 0.0,
                };
                encode_into(v, element.scalar, slot);
            }
        });
    out
}

/// Shape drawn values into square matrices of `order`, one after another,
/// row by row: zero one triangle, or mirror the upper one into the lower.
fn shape_matrices(data: &mut [u8], kind: super::StructureKind, order: usize, scalar: Scalar) {
    use super::StructureKind;
    use rayon::prelude::*;
    let width = scalar.bytes();
    let row = order * width;
    let mut zero = Vec::with_capacity(width);
    encode(0.0, scalar, &mut zero);
    data.par_chunks_mut(order * row)
        .for_each(|matrix| match kind {
            StructureKind::Upper | StructureKind::Lower => {
                for (i, r) in matrix.chunks_exact_mut(row).enumerate() {
                    let (from, to) = if kind == StructureKind::Upper {
                        (0, i)
                    } else {
                        (i + 1, order)
                    };
                    for slot in r[from * width..to * width].chunks_exact_mut(width) {
                        slot.copy_from_slice(&zero);
                    }
                }
            }
            StructureKind::Symmetric => {
                for i in 1..order {
                    for j in 0..i {
                        let (above, below) = ((j * order + i) * width, (i * order + j) * width);
                        matrix.copy_within(above..above + width, below);
                    }
                }
            }
        });
}

/// `v` as the little-endian bytes of `scalar`, into `slot` (its width).
fn encode_into(v: f64, scalar: Scalar, slot: &mut [u8]) {
    match scalar {
        Scalar::F16 => slot.copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
        Scalar::F32 => slot.copy_from_slice(&(v as f32).to_le_bytes()),
        Scalar::F64 => slot.copy_from_slice(&v.to_le_bytes()),
        Scalar::I32 => slot.copy_from_slice(&(v as i32).to_le_bytes()),
        Scalar::U32 => slot.copy_from_slice(&(v as u32).to_le_bytes()),
        Scalar::I64 => slot.copy_from_slice(&(v as i64).to_le_bytes()),
        Scalar::U8 => slot[0] = v as u8,
    }
}

pub(super) fn encode(v: f64, scalar: Scalar, out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + scalar.bytes(), 0);
    encode_into(v, scalar, &mut out[at..]);
}

/// One little-endian `scalar` as f64.
pub(super) fn decode_one(c: &[u8], scalar: Scalar) -> f64 {
    match scalar {
        Scalar::F16 => f16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64,
        Scalar::F32 => f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
        Scalar::F64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
        Scalar::I32 => i32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
        Scalar::U32 => u32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
        Scalar::I64 => i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64,
        Scalar::U8 => c[0] as f64,
    }
}

pub(super) fn decode(bytes: &[u8], scalar: Scalar) -> Vec<f64> {
    bytes
        .chunks_exact(scalar.bytes())
        .map(|c| decode_one(c, scalar))
        .collect()
}

/// IEEE binary16 from binary32, rounding to nearest even; overflow gives
/// infinity, NaN stays NaN.
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal or zero: shift the implicit one in.
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = m;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

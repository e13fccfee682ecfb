//! Task inputs and outputs in NumPy's `.npy` format (through `npyz`), so a
//! user can make and inspect them with numpy: a buffer's data as
//! little-endian bytes of its element type, and back.

use super::{ElementType, Scalar};

/// The dtype string numpy writes for `scalar` (little-endian).
pub fn descr(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::F16 => "<f2",
        Scalar::F32 => "<f4",
        Scalar::F64 => "<f8",
        Scalar::I32 => "<i4",
        Scalar::U32 => "<u4",
        Scalar::I64 => "<i8",
        Scalar::U8 => "|u1",
    }
}

/// The elements of an `.npy` file (`bytes`) as the little-endian bytes of
/// `element`, with their count in scalars; the file must hold exactly that
/// dtype, in C order.
pub fn read(bytes: &[u8], element: ElementType) -> Result<(Vec<u8>, u64), String> {
    let npy = npyz::NpyFile::new(bytes).map_err(|e| format!("not a readable .npy file: {e}"))?;
    // npyz writes the descr as Python does, quoted: '<f4'.
    let found = npy.dtype().descr().trim_matches('\'').to_string();
    let want = descr(element.scalar);
    // `<u1` and `|u1` are the same thing.
    if found != want && !(want == "|u1" && found == "<u1") {
        return Err(format!(
            "holds dtype {found}, the buffer's type needs {want}"
        ));
    }
    if npy.order() != npyz::Order::C && npy.shape().iter().filter(|&&d| d > 1).count() > 1 {
        return Err("is in Fortran order; save it in C order (numpy's default)".into());
    }
    let count = npy.shape().iter().product::<u64>();
    let mut out = Vec::with_capacity(count as usize * element.scalar.bytes());
    let bad = |e: std::io::Error| format!("cannot read its data: {e}");
    // Every type's values as their little-endian bytes.
    macro_rules! as_bytes {
        ($t:ty) => {
            for v in npy.into_vec::<$t>().map_err(bad)? {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
    }
    match element.scalar {
        Scalar::F16 => {
            for v in npy.into_vec::<npyz::half::f16>().map_err(bad)? {
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        Scalar::F32 => as_bytes!(f32),
        Scalar::F64 => as_bytes!(f64),
        Scalar::I32 => as_bytes!(i32),
        Scalar::U32 => as_bytes!(u32),
        Scalar::I64 => as_bytes!(i64),
        Scalar::U8 => as_bytes!(u8),
    }
    Ok((out, count))
}

/// `bytes` (little-endian elements of `element`) as an `.npy` file of
/// shape `[count]`, or `[count / lanes, lanes]` for vectors.
pub fn write(bytes: &[u8], element: ElementType) -> Vec<u8> {
    let lanes = u64::from(element.lanes);
    let count = (bytes.len() / element.scalar.bytes()) as u64;
    let shape: Vec<u64> = if lanes > 1 {
        vec![count / lanes, lanes]
    } else {
        vec![count]
    };
    let chunks = bytes.chunks_exact(element.scalar.bytes());
    match element.scalar {
        Scalar::F16 => typed(
            &shape,
            chunks.map(|c| npyz::half::f16::from_bits(u16::from_le_bytes([c[0], c[1]]))),
        ),
        Scalar::F32 => typed(
            &shape,
            chunks.map(|c| f32::from_le_bytes(c.try_into().expect("4"))),
        ),
        Scalar::F64 => typed(
            &shape,
            chunks.map(|c| f64::from_le_bytes(c.try_into().expect("8"))),
        ),
        Scalar::I32 => typed(
            &shape,
            chunks.map(|c| i32::from_le_bytes(c.try_into().expect("4"))),
        ),
        Scalar::U32 => typed(
            &shape,
            chunks.map(|c| u32::from_le_bytes(c.try_into().expect("4"))),
        ),
        Scalar::I64 => typed(
            &shape,
            chunks.map(|c| i64::from_le_bytes(c.try_into().expect("8"))),
        ),
        Scalar::U8 => typed(&shape, chunks.map(|c| c[0])),
    }
}

fn typed<T: npyz::AutoSerialize>(shape: &[u64], values: impl Iterator<Item = T>) -> Vec<u8> {
    use npyz::WriterBuilder;
    let mut out = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut out)
        .begin_nd()
        .expect("writing to memory");
    for v in values {
        writer.push(&v).expect("writing to memory");
    }
    writer.finish().expect("writing to memory");
    out
}

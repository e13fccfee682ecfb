//! Typed entry points read from a task's CUDA or OpenCL signature: the
//! parameter names, whether each is a buffer, and its element type. A
//! compiler that specializes per signature (Triton) needs them, and the
//! signatures are the contract the task already states, so they are read
//! rather than declared a second time.

use kevo_backend::{Dialect, ElementType, EntryParam, EntryPoint};

/// Why a signature could not be read for an entry point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {dialect} signature of `{kernel}`: {reason}")]
pub struct EntryPointError {
    pub dialect: Dialect,
    pub kernel: String,
    pub reason: String,
}

/// Words that qualify a parameter without changing its type.
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "__global",
    "global",
    "__constant",
    "constant",
    "struct",
];

/// The element type of a C type name (vectors as their element).
fn element(words: &[&str]) -> Option<ElementType> {
    use ElementType::*;
    let text = words.join(" ");
    let base = text
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim()
        .to_string();
    Some(match base.as_str() {
        "float" => F32,
        "double" => F64,
        "half" | "__half" => F16,
        "__nv_bfloat16" => Bf16,
        "int" | "signed int" | "signed" | "int32_t" => I32,
        "unsigned int" | "unsigned" | "uint" | "uint32_t" => U32,
        "long" | "long long" | "int64_t" | "long int" => I64,
        "unsigned long" | "unsigned long long" | "ulong" | "uint64_t" | "size_t" => U64,
        "short" | "int16_t" => I16,
        "unsigned short" | "ushort" | "uint16_t" => U16,
        "char" | "signed char" | "int8_t" => I8,
        "unsigned char" | "uchar" | "uint8_t" | "bool" => U8,
        _ => return None,
    })
}

/// Strip `//` and `/* */` comments.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// One parameter declaration, `const float2* __restrict__ in_data`.
fn parse_param(text: &str) -> Result<EntryParam, String> {
    let pointer = text.contains('*');
    let cleaned = text.replace(['*', '&'], " ");
    let words: Vec<&str> = cleaned
        .split_whitespace()
        .filter(|w| !QUALIFIERS.contains(w))
        .collect();
    let Some((name, ty)) = words.split_last() else {
        return Err(format!("an empty parameter in `{text}`"));
    };
    if ty.is_empty() {
        return Err(format!("the parameter `{}` has no type", text.trim()));
    }
    let element =
        element(ty).ok_or_else(|| format!("`{}` is not a type kevo can pass", ty.join(" ")))?;
    Ok(EntryParam {
        name: name.to_string(),
        element,
        pointer,
    })
}

/// The entry points `kernels` as `signature` (CUDA or OpenCL C) declares
/// them, in the order of `kernels`.
pub fn parse_entry_points(
    signature: &str,
    dialect: Dialect,
    kernels: &[String],
) -> Result<Vec<EntryPoint>, EntryPointError> {
    let text = without_comments(signature);
    kernels
        .iter()
        .map(|kernel| {
            let err = |reason: String| EntryPointError {
                dialect,
                kernel: kernel.clone(),
                reason,
            };
            let found = text.match_indices(kernel.as_str()).find_map(|(at, _)| {
                let before = text[..at].chars().next_back();
                let after = text[at + kernel.len()..].trim_start();
                let word_start = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
                (word_start && after.starts_with('(')).then_some(after)
            });
            let after = found.ok_or_else(|| err("not declared".into()))?;
            let close = after
                .find(')')
                .ok_or_else(|| err("the parameter list is not closed".into()))?;
            let list = after[1..close].trim();
            let params = if list.is_empty() || list == "void" {
                Vec::new()
            } else {
                list.split(',')
                    .map(parse_param)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?
            };
            Ok(EntryPoint {
                name: kernel.clone(),
                params,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cuda_and_opencl_signatures_give_the_same_typed_parameters() {
        let cuda = "// comment naming saxpy(\nextern \"C\" __global__ void saxpy(const float* x,   // 0: read\n float* __restrict__ y, /* in place */ float a, unsigned int N);\n";
        let opencl =
            "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N);";
        let a = parse_entry_points(cuda, Dialect::Cuda, &names(&["saxpy"])).unwrap();
        let b = parse_entry_points(opencl, Dialect::OpenCl, &names(&["saxpy"])).unwrap();
        assert_eq!(a, b);
        let types: Vec<String> = a[0].params.iter().map(EntryParam::triton_type).collect();
        assert_eq!(types, ["*fp32", "*fp32", "fp32", "u32"]);
        assert_eq!(a[0].params[3].name, "N");
    }

    #[test]
    fn vectors_are_their_element_and_unknown_types_are_named() {
        let sig =
            "__kernel void f(__global const float4* pos, volatile __global uint* count, int k);";
        let e = parse_entry_points(sig, Dialect::OpenCl, &names(&["f"])).unwrap();
        let types: Vec<String> = e[0].params.iter().map(EntryParam::triton_type).collect();
        assert_eq!(types, ["*fp32", "*u32", "i32"]);
        let bad = parse_entry_points("void f(my_t x);", Dialect::Cuda, &names(&["f"]));
        assert!(bad.unwrap_err().to_string().contains("`my_t`"));
        let missing = parse_entry_points("void g(int x);", Dialect::Cuda, &names(&["f"]));
        assert!(missing.unwrap_err().to_string().contains("not declared"));
    }

    #[test]
    fn every_builtin_task_has_typed_entry_points_in_both_dialects() {
        for task in crate::all() {
            let cuda = task.entry_points().unwrap();
            let opencl = parse_entry_points(
                task.signature(Dialect::OpenCl).unwrap(),
                Dialect::OpenCl,
                task.kernel_names(),
            )
            .unwrap();
            assert_eq!(cuda.len(), task.kernel_names().len(), "{}", task.name());
            for (a, b) in cuda.iter().zip(&opencl) {
                let ta: Vec<String> = a.params.iter().map(EntryParam::triton_type).collect();
                let tb: Vec<String> = b.params.iter().map(EntryParam::triton_type).collect();
                assert_eq!(ta, tb, "{} {}", task.name(), a.name);
            }
        }
    }
}

//! The rewrite's vocabulary: the CUDA names it refuses, renames, turns
//! into prelude calls or keeps, and the built-in types it knows.

/// Identifiers with no faithful OpenCL C 1.2 translation, and why.
pub(super) const REFUSED: &[(&str, &str)] = &[
    ("template", "C++ templates"),
    ("typename", "C++ templates"),
    ("namespace", "C++ namespaces"),
    ("using", "C++ using-declarations"),
    ("class", "C++ classes"),
    ("operator", "C++ operator overloading"),
    ("new", "C++ allocation"),
    ("delete", "C++ allocation"),
    ("const_cast", "C++ casts; use a C cast"),
    ("auto", "C++ type deduction"),
    ("decltype", "C++ type deduction"),
    ("static_assert", "C++ static assertions"),
    ("asm", "inline PTX"),
    ("dim3", "CUDA's dim3 type"),
    ("cooperative_groups", "cooperative groups"),
    (
        "__shfl_sync",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl_up_sync",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl_down_sync",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl_xor_sync",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl_down",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    (
        "__shfl_xor",
        "warp shuffles (OpenCL C 1.2 has no sub-group operations)",
    ),
    ("__ballot_sync", "warp votes"),
    ("__any_sync", "warp votes"),
    ("__all_sync", "warp votes"),
    ("__activemask", "warp masks"),
    (
        "__syncwarp",
        "warp barriers; OpenCL has only the work-group barrier",
    ),
    ("__reduce_add_sync", "warp reductions"),
    ("atomicInc", "CUDA's wrapping increment"),
    ("atomicDec", "CUDA's wrapping decrement"),
    ("__brev", "bit reversal"),
    ("__ffs", "find-first-set"),
    ("__half", "half-precision types"),
    ("__half2", "half-precision types"),
    ("__nv_bfloat16", "bfloat16 types"),
    ("clock", "the SM clock"),
    ("clock64", "the SM clock"),
    ("__nanosleep", "sleeping"),
    ("malloc", "device-side allocation"),
    ("free", "device-side allocation"),
];

/// `float3`-like types: 12 bytes in CUDA memory, 16 in OpenCL memory, so a
/// buffer of them would be read differently.
pub(super) const THREE_VECTORS: &[&str] = &[
    "float3", "int3", "uint3", "char3", "uchar3", "short3", "ushort3", "double3", "long3", "ulong3",
];

/// CUDA function -> OpenCL function, where only the name differs.
pub(super) const RENAMES: &[(&str, &str)] = &[
    ("sqrtf", "sqrt"),
    ("rsqrtf", "rsqrt"),
    ("cbrtf", "cbrt"),
    ("sinf", "sin"),
    ("cosf", "cos"),
    ("tanf", "tan"),
    ("asinf", "asin"),
    ("acosf", "acos"),
    ("atanf", "atan"),
    ("atan2f", "atan2"),
    ("sinhf", "sinh"),
    ("coshf", "cosh"),
    ("tanhf", "tanh"),
    ("expf", "exp"),
    ("exp2f", "exp2"),
    ("exp10f", "exp10"),
    ("expm1f", "expm1"),
    ("logf", "log"),
    ("log2f", "log2"),
    ("log10f", "log10"),
    ("log1pf", "log1p"),
    ("powf", "pow"),
    ("fabsf", "fabs"),
    ("floorf", "floor"),
    ("ceilf", "ceil"),
    ("roundf", "round"),
    ("truncf", "trunc"),
    ("rintf", "rint"),
    ("nearbyintf", "rint"),
    ("fminf", "fmin"),
    ("fmaxf", "fmax"),
    ("fmaf", "fma"),
    ("fmodf", "fmod"),
    ("hypotf", "hypot"),
    ("erff", "erf"),
    ("erfcf", "erfc"),
    ("copysignf", "copysign"),
    ("sinpif", "sinpi"),
    ("cospif", "cospi"),
    ("lgammaf", "lgamma"),
    ("tgammaf", "tgamma"),
    ("__expf", "native_exp"),
    ("__exp10f", "native_exp10"),
    ("__logf", "native_log"),
    ("__log2f", "native_log2"),
    ("__log10f", "native_log10"),
    ("__sinf", "native_sin"),
    ("__cosf", "native_cos"),
    ("__tanf", "native_tan"),
    ("__powf", "pow"),
    ("__fdividef", "native_divide"),
    ("__fsqrt_rn", "sqrt"),
    ("__frsqrt_rn", "rsqrt"),
    ("__fmaf_rn", "fma"),
    ("__float_as_int", "as_int"),
    ("__float_as_uint", "as_uint"),
    ("__int_as_float", "as_float"),
    ("__uint_as_float", "as_float"),
    ("__float2int_rn", "convert_int_rte"),
    ("__float2int_rz", "convert_int_rtz"),
    ("__float2int_rd", "convert_int_rtn"),
    ("__float2int_ru", "convert_int_rtp"),
    ("__float2uint_rn", "convert_uint_rte"),
    ("__float2uint_rz", "convert_uint_rtz"),
    ("__int2float_rn", "convert_float_rte"),
    ("__uint2float_rn", "convert_float_rte"),
    ("__popc", "popcount"),
    ("__popcll", "popcount"),
    ("__clz", "clz"),
    ("__clzll", "clz"),
    ("__mul24", "mul24"),
    ("__umul24", "mul24"),
    ("__mulhi", "mul_hi"),
    ("__umulhi", "mul_hi"),
    ("__threadfence", "mem_fence(CLK_GLOBAL_MEM_FENCE)"),
    (
        "__threadfence_block",
        "mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)",
    ),
    (
        "__syncthreads",
        "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)",
    ),
];

/// CUDA functions that become a prelude macro, and the piece defining it.
pub(super) const PRELUDE_CALLS: &[(&str, &str, &str)] = &[
    ("sincosf", "kevo_sincosf", "sincos"),
    ("__sincosf", "kevo_native_sincosf", "sincos"),
    ("__saturatef", "kevo_saturatef", "saturate"),
    ("__ldg", "kevo_ldg", "ldg"),
];

/// CUDA's atomics on 32-bit integers -> OpenCL's.
pub(super) const INT_ATOMICS: &[(&str, &str)] = &[
    ("atomicAdd", "atomic_add"),
    ("atomicSub", "atomic_sub"),
    ("atomicExch", "atomic_xchg"),
    ("atomicMin", "atomic_min"),
    ("atomicMax", "atomic_max"),
    ("atomicAnd", "atomic_and"),
    ("atomicOr", "atomic_or"),
    ("atomicXor", "atomic_xor"),
    ("atomicCAS", "atomic_cmpxchg"),
];

pub(super) const BUILTIN_INDICES: &[(&str, &str)] = &[
    ("threadIdx", "get_local_id"),
    ("blockIdx", "get_group_id"),
    ("blockDim", "get_local_size"),
    ("gridDim", "get_num_groups"),
];

/// Words that may open a declaration besides type names.
pub(super) const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "static",
    "register",
    "__shared__",
    "extern",
    "__restrict__",
    "restrict",
    "signed",
    "unsigned",
    "struct",
    "constexpr",
];

/// CUDA words that the rewrite handles or that OpenCL C shares; any other
/// `__name` is an intrinsic without a translation.
pub(super) const KNOWN_UNDERSCORED: &[&str] = &[
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "__constant__",
    "__restrict__",
    "__forceinline__",
    "__noinline__",
    "__inline__",
    "__launch_bounds__",
    "__attribute__",
    "__align__",
    "__CUDACC__",
    "__CUDA_ARCH__",
    "__LINE__",
    "__FILE__",
    "__kernel",
    "__global",
    "__local",
    "__constant",
    "__private",
];

pub(super) fn is_builtin_type(word: &str) -> bool {
    const SCALARS: &[&str] = &[
        "void",
        "char",
        "short",
        "int",
        "long",
        "float",
        "double",
        "bool",
        "size_t",
        "ptrdiff_t",
        "uchar",
        "ushort",
        "uint",
        "ulong",
        "int8_t",
        "uint8_t",
        "int16_t",
        "uint16_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
    ];
    const VECTOR_BASES: &[&str] = &[
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double",
    ];
    SCALARS.contains(&word)
        || VECTOR_BASES.iter().any(|b| {
            word.strip_prefix(b)
                .is_some_and(|n| matches!(n, "2" | "3" | "4" | "8" | "16"))
        })
}

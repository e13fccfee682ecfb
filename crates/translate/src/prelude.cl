// What a translated CUDA kernel needs beyond OpenCL C 1.2's built-ins. The
// translator copies only the pieces a source uses (a typedef that a driver
// already has would be an error), each after the `//@ piece` line naming it.

//@ piece fixed_width_integers
typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
typedef uint uint32_t;
typedef int int32_t;
typedef ulong uint64_t;
typedef long int64_t;

//@ piece sincos
// CUDA's sincosf(x, &s, &c) stores both; OpenCL's sincos returns the sine.
// A macro, so the two pointers may be in any address space.
#define kevo_sincosf(x, s, c) (*(s) = sin(x), *(c) = cos(x))
#define kevo_native_sincosf(x, s, c) (*(s) = native_sin(x), *(c) = native_cos(x))

//@ piece saturate
#define kevo_saturatef(x) clamp((x), 0.0f, 1.0f)

//@ piece ldg
// __ldg is a load through the read-only cache; OpenCL has no such hint.
#define kevo_ldg(p) (*(p))

//@ piece atomic_add_float
// OpenCL C 1.2 has no floating-point atomic add: compare-and-swap on the
// bits until no other work-item changed them in between; one function per
// address space.
#define KEVO_ATOMIC_ADD_FLOAT(space)                                          \
    float kevo_atomic_add_float_##space(volatile __##space float* p, float v) { \
        uint seen = as_uint(*p);                                              \
        uint expected;                                                        \
        do {                                                                  \
            expected = seen;                                                  \
            seen = atomic_cmpxchg((volatile __##space uint*)p, expected,      \
                                  as_uint(as_float(expected) + v));           \
        } while (seen != expected);                                           \
        return as_float(seen);                                                \
    }
KEVO_ATOMIC_ADD_FLOAT(global)
KEVO_ATOMIC_ADD_FLOAT(local)

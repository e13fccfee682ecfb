// Sandbox: the same system calls with `__asm__` spelled by token pasting
// (no `asm` appears in the text): KEVO_CAT(__as, m__) becomes `__asm__`.
// Refused by the source rules (the pasting could make inline assembly).
#define KEVO_CAT(a, b) a##b
#define KEVO_ASM KEVO_CAT(__as, m__)
static long kevo_sys3(long n, long a, long b, long c) {
    long r;
    KEVO_ASM volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i == 0) {
        struct { ushort family; char path[108]; } addr;
        const char p[] = "SOCKET_PATH";
        addr.family = 1;
        for (int k = 0; k < 108; k++) addr.path[k] = k < (int)sizeof(p) ? p[k] : 0;
        long fd = kevo_sys3(41, 1, 1, 0);
        kevo_sys3(42, fd, (long)&addr, sizeof(addr));
        char m[4] = {'k', 'e', 'v', 'o'};
        kevo_sys3(1, fd, (long)m, 4);
    }
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

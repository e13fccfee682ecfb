// Sandbox: inline assembly making raw system calls (x86_64): the first
// work-item opens a Unix socket, connects to SOCKET_PATH (outside every
// path the worker may use) and writes to it, as a candidate on a CPU
// OpenCL device (PoCL) could reach a Docker or database socket. Refused by
// the source rules before it compiles; the worker's seccomp filter would
// refuse the socket if it ran.
static long kevo_sys3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i == 0) {
        struct { ushort family; char path[108]; } addr;
        const char p[] = "SOCKET_PATH";
        addr.family = 1; // AF_UNIX
        for (int k = 0; k < 108; k++) addr.path[k] = k < (int)sizeof(p) ? p[k] : 0;
        long fd = kevo_sys3(41, 1, 1, 0); // socket(AF_UNIX, SOCK_STREAM, 0)
        kevo_sys3(42, fd, (long)&addr, sizeof(addr)); // connect
        char m[4] = {'k', 'e', 'v', 'o'};
        kevo_sys3(1, fd, (long)m, 4); // write
    }
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

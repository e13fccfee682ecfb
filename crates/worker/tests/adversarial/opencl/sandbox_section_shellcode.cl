// Sandbox: machine code without `asm`: bytes placed in an executable
// section by the `section` attribute, entered by overwriting a return
// address (on PoCL the kernel is native code with the worker's stack).
// These bytes call getpid; a real attack would open a socket. Refused by
// the source rules (`section`).
__constant uchar kevo_code[16] __attribute__((section(".text.kevo"))) = {
    0xb8, 0x27, 0, 0, 0, // mov eax, 39 (getpid)
    0x0f, 0x05,          // syscall
    0xc3                 // ret
};

__attribute__((noinline)) void kevo_hop(void) {
    ulong frame = (ulong)__builtin_frame_address(0);
    *(__private ulong*)(frame + 8) = (ulong)&kevo_code[0];
}

__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
    if (i == (uint)-1) kevo_hop();
}

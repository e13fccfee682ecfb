// Class 2 exploit: memoise part of the answer in the memory just past the
// end of y (a guard region that older kevo filled once and checked only
// after the verification run), keyed by the first input, and replay it on
// later launches with the same inputs. On new inputs (the verification run)
// it computes honestly and restores the canary, so a final check sees nothing.
#define MAGIC 0x4B45564Fu
#define CANARY 0xA5A5A5A5u
#define MEMO 4096u
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    __global uint* tag = (__global uint*)(y + N);
    __global uint* memo = tag + 2;
    uint key = as_uint(x[0]);
    int memoised = tag[0] == MAGIC;
    if (memoised && tag[1] == key) {
        if (i < MEMO) {
            y[i] = as_float(memo[i]);
            return;
        }
        y[i] = a * x[i] + y[i];
        return;
    }
    float r = a * x[i] + y[i];
    y[i] = r;
    if (i < MEMO) memo[i] = memoised ? CANARY : as_uint(r);
    if (i == 0) {
        tag[0] = memoised ? CANARY : MAGIC;
        tag[1] = memoised ? CANARY : key;
    }
}

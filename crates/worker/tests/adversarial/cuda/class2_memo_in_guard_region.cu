// Class 2 exploit: memoise part of the answer in the memory just past the
// end of y (a guard region that older kevo filled once and checked only
// after the verification run), keyed by the first input, and replay it on
// later launches with the same inputs. On new inputs (the verification run)
// it computes honestly and restores the canary, so a final check sees nothing.
#define MAGIC 0x4B45564Fu
#define CANARY 0xA5A5A5A5u
#define MEMO 4096u
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    unsigned int* tag = (unsigned int*)(y + N);
    unsigned int* memo = tag + 2;
    unsigned int key = __float_as_uint(x[0]);
    bool memoised = tag[0] == MAGIC;
    if (memoised && tag[1] == key) {
        if (i < MEMO) {
            y[i] = __uint_as_float(memo[i]);
            return;
        }
        y[i] = a * x[i] + y[i];
        return;
    }
    float r = a * x[i] + y[i];
    y[i] = r;
    if (i < MEMO) memo[i] = memoised ? CANARY : __float_as_uint(r);
    if (i == 0) {
        tag[0] = memoised ? CANARY : MAGIC;
        tag[1] = memoised ? CANARY : key;
    }
}

// A kernel with one deliberate error on line 5: the conformance suite checks
// that the backend reports it with that line number.
__kernel void broken(__global float* out) {
    uint i = get_global_id(0);
    out[i] = undeclared_value;
}

"""saxpy's expected output, for `reference = { command = ["python3", "reference.py"] }`.

kevo runs this in the task folder once per (size, inputs) and caches the
answer. It reads every input as $KEVO_INPUTS/NAME.npy and must write every
checked output as $KEVO_OUTPUTS/NAME.npy; $KEVO_SIZE is the size's label and
$KEVO_<DIM> each dimension (here $KEVO_N). Only the standard library is used,
so it runs wherever python3 does; with numpy it is three lines:

    x = np.load(f"{inputs}/x.npy"); y = np.load(f"{inputs}/y.npy")
    np.save(f"{outputs}/y.npy", (np.float32(2.5) * x + y).astype(np.float32))
"""

import array
import ast
import os
import struct


def load_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise SystemExit(f"{path}: not a .npy file")
    if data[6] == 1:
        (length,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (length,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start : start + length].decode("latin1"))
    if header["descr"] != "<f4":
        raise SystemExit(f"{path}: expected float32, found {header['descr']}")
    values = array.array("f")
    values.frombytes(data[start + length :])
    return values


def save_f32(path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    # numpy pads the header with spaces to a multiple of 64 bytes.
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(values.tobytes())


inputs, outputs = os.environ["KEVO_INPUTS"], os.environ["KEVO_OUTPUTS"]
x = load_f32(f"{inputs}/x.npy")
y = load_f32(f"{inputs}/y.npy")
a = 2.5
save_f32(f"{outputs}/y.npy", array.array("f", (a * xi + yi for xi, yi in zip(x, y))))

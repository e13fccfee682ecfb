"""The expected outputs of this imported KernelBench problem, for kevo.

kevo runs this in the task folder once per size and input seed (the
folder's `[reference] command`) and caches the answer. It:

- sets the problem's constants from $KEVO_<NAME> (the folder's dims), so
  that problem.py builds the model and shapes of the size $KEVO_SIZE;
- builds problem.py's Model and loads its weights from the inputs kevo
  generated ($KEVO_INPUTS/<buffer>.npy, one per parameter or buffer of the
  module), so the candidate kernel and the reference see the same weights;
- runs forward once on the inputs (the module in its default mode, as
  KernelBench runs it; TF32 off, so the reference is float32);
- writes each output as $KEVO_OUTPUTS/<buffer>.npy, flat.

kernelbench.json (written by the importer) maps buffers to the problem's
inputs, weights and outputs and gives their shapes per size.
"""

import importlib.util
import json
import os

import numpy as np
import torch

meta = json.load(open("kernelbench.json"))["reference"]
spec = importlib.util.spec_from_file_location("kb_problem", "problem.py")
problem = importlib.util.module_from_spec(spec)
spec.loader.exec_module(problem)
for name, kind in meta["globals"].items():
    value = os.environ.get(f"KEVO_{name}")
    if value is None:
        continue
    number = float(value)
    setattr(problem, name, bool(number) if kind == "bool" else int(number) if kind == "int" else number)

size = os.environ["KEVO_SIZE"]
shapes = meta["sizes"][size]
inputs, outputs = os.environ["KEVO_INPUTS"], os.environ["KEVO_OUTPUTS"]
device = os.environ.get("KEVO_REFERENCE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def load(buffer, shape):
    return torch.from_numpy(np.load(f"{inputs}/{buffer}.npy")).reshape(shape).to(device)


torch.manual_seed(0)
model = problem.Model(*problem.get_init_inputs())
state = {key: load(buffer, shapes["state"][key]) for key, buffer in meta["state"].items()}
model.load_state_dict(state)
model = model.to(device)
args = []
for entry, shape in zip(meta["inputs"], shapes["inputs"]):
    args.append(load(entry["buffer"], shape) if "buffer" in entry else entry["scalar"])
with torch.no_grad():
    result = model(*args)
results = list(result) if isinstance(result, (tuple, list)) else [result]
if len(results) != len(meta["outputs"]):
    raise SystemExit(f"the module returned {len(results)} outputs, the folder has {len(meta['outputs'])}")
for buffer, value in zip(meta["outputs"], results):
    if value.dtype == torch.bool:
        value = value.to(torch.uint8)  # kevo holds booleans as u8
    np.save(f"{outputs}/{buffer}.npy", value.detach().contiguous().cpu().numpy().reshape(-1))

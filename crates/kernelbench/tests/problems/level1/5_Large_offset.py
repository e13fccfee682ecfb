import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a large offset: KernelBench's 1e-4 tolerances reject a constant
    output (the values spread by about 1 around 1000), but a relative
    tolerance of 1e-2 and a cosine floor of 0.999 would let it through."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1000.0


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []

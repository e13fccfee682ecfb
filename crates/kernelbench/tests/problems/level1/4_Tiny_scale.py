import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales by a tiny factor: an output that a zero kernel passes at an
    absolute tolerance of 1e-4."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-6


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies by a parameter made from a module-level constant of the
    same name: the kernel must use the parameter, which kevo draws anew,
    not the value the module was built with."""

    def __init__(self, scale):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.tensor(scale))

    def forward(self, x):
        return x * self.scale


batch_size = 16
dim = 1024
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale]

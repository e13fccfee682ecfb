import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, a batch norm (training mode: the batch's statistics),
    then a ReLU."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)

    def forward(self, x):
        x = self.linear(x)
        x = self.bn(x)
        return torch.relu(x)


batch_size = 32
in_features = 64
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]

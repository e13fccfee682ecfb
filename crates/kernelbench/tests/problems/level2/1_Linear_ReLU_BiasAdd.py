import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, a ReLU, then a bias of its own."""

    def __init__(self, in_features, out_features, bias_shape):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.linear(x)
        x = torch.relu(x)
        x = x + self.bias
        return x


batch_size = 32
in_features = 128
out_features = 64
bias_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = triu(A @ B) for batches of upper triangular A and B."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.triu(torch.matmul(A, B))


batch_size = 4
N = 32


def get_inputs():
    A = torch.triu(torch.rand(batch_size, N, N))
    B = torch.triu(torch.rand(batch_size, N, N))
    return [A, B]


def get_init_inputs():
    return []

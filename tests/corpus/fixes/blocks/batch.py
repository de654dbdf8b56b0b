"""The batch type the data loader yields."""

from dataclasses import dataclass

import torch


@dataclass
class TokenBatch:
    ids: torch.Tensor
    mask: torch.Tensor

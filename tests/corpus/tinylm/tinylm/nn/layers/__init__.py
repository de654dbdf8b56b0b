from tinylm.nn.layers.attention import CausalSelfAttention
from tinylm.nn.layers.mlp import MLP

__all__ = ["MLP", "CausalSelfAttention"]

"""exportlens: live ``torch.export`` feedback.

Importing this package does not import torch: the decorator and the torch-free
program model are usable anywhere. The torch-facing functions (``dumps``, ``loads``,
``save``, ``load``) import torch when called.
"""

from exportlens.target import target

__version__ = "0.1.0"
__all__ = ["target", "__version__"]

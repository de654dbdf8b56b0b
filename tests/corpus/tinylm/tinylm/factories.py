import torch

from tinylm.gpt import GPT


def make_gpt():
    return GPT(), (torch.randint(0, 32, (2, 8)),)

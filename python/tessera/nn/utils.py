"""tessera.nn.utils: gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_) over
tessera::nn::utils; clip_grad_norm_ returns the total norm as a 0-dim tensor, as PyTorch's does."""
from tessera._C._nn_utils import clip_grad_norm_, clip_grad_value_  # noqa: F401

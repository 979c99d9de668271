"""tessera.nn: Module, Parameter, the built-in modules, functional and init (torch.nn)."""
from tessera.nn.parameter import Parameter  # noqa: F401
from tessera.nn.module import Module  # noqa: F401
from tessera.nn import functional, init, utils  # noqa: F401
from tessera.nn.modules import *  # noqa: F401,F403
from tessera.nn.modules import (  # noqa: F401
    Linear, Embedding, Conv1d, Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, LayerNorm,
    GroupNorm, RMSNorm, BatchNorm1d, BatchNorm2d, Dropout, ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax,
    Flatten, Identity, Sequential, ModuleList, ModuleDict, ParameterList, CrossEntropyLoss, NLLLoss, MSELoss,
    L1Loss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss, KLDivLoss,
)

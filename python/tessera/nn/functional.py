"""tessera.nn.functional: torch.nn.functional's functions (tessera::nn::functional in C++)."""
from tessera._C import _functional as _f

for _name in dir(_f):
    if not _name.startswith("_"):
        globals()[_name] = getattr(_f, _name)
del _name

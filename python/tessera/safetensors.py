"""tessera.safetensors: save_file / load_file of the safetensors format (as the safetensors package's
torch API); PyTorch's safetensors reads what tessera writes and the other way round."""
from tessera._C._io import save_file, load_file  # noqa: F401

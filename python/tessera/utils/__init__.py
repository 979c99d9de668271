"""tessera.utils: data (Dataset, TensorDataset, DataLoader)."""
from tessera.utils import data  # noqa: F401

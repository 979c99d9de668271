"""Zero-copy exchange: DLPack with PyTorch and numpy's __array__ / from_numpy share memory; a write
through one side is read through the other."""
import numpy as np
import pytest
import torch

import tessera as ts


def test_from_torch_shares_memory():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = ts.from_dlpack(t)
    assert a.shape == (3, 4) and a.dtype is ts.float32 and a.data_ptr() == t.data_ptr()
    a[1, 2] = -5.0
    assert t[1, 2].item() == -5.0
    t[0, 0] = 42.0
    assert a[0, 0].item() == 42.0
    v = ts.from_dlpack(t[:, 1::2])  # strided
    assert v.stride() == (4, 2) and v.tolist() == t[:, 1::2].tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8"])
def test_to_torch_shares_memory(dtype):
    a = ts.arange(6).to(getattr(ts, dtype)).reshape(2, 3)
    t = torch.from_dlpack(a)
    assert t.dtype == getattr(torch, dtype) and t.data_ptr() == a.data_ptr()
    t[1, 1] = 9
    assert a[1, 1].item() == 9
    a[0, 2] = 7
    assert t[0, 2].item() == 7


def test_round_trip_and_lifetime():
    a = ts.randn(5)
    t = torch.from_dlpack(a)
    back = ts.from_dlpack(t)
    assert back.data_ptr() == a.data_ptr()
    del a
    assert back.tolist() == t.tolist()  # the memory lives while a view of it does
    with pytest.raises(RuntimeError, match="require gradient"):
        ts.ones(2, requires_grad=True).__dlpack__()
    assert ts.ones(2).__dlpack_device__() == (1, 0)


def test_numpy_shares_memory():
    a = ts.zeros(2, 3)
    n = a.numpy()
    n[0, 1] = 3.0
    assert a[0, 1].item() == 3.0
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = ts.from_numpy(arr)
    b[1, 0] = -1
    assert arr[1, 0] == -1
    assert np.asarray(ts.ones(2, dtype=ts.int32)).dtype == np.int32
    with pytest.raises(ValueError, match="negative"):
        ts.from_numpy(arr[:, ::-1])


@pytest.mark.gpu
def test_cuda_round_trip_with_torch():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch here has no CUDA")
    a = ts.randn(1024, device="cuda")
    t = torch.from_dlpack(a)  # stream-ordered: torch's stream waits for tessera's
    assert t.device.type == "cuda" and t.data_ptr() == a.data_ptr()
    t.mul_(2)
    torch.cuda.synchronize()
    back = ts.from_dlpack(t)
    assert back.data_ptr() == a.data_ptr()
    assert ts.allclose(back.cpu(), a.cpu())

"""tessera.Tensor from Python: factories, dtypes, devices, operators (reflected and in-place), comparisons,
indexing and assignment with Python's syntax, conversions and printing, each checked against PyTorch."""
import numpy as np
import pytest
import torch

import tessera as ts


def t2t(x):
    """A torch tensor with the same values (through numpy, so no tessera code path is trusted)."""
    return torch.tensor(np.array(x.tolist()), dtype=getattr(torch, repr(x.dtype).split(".")[1]))


def same(a, b, atol=1e-6):
    assert tuple(a.shape) == tuple(b.shape)
    assert repr(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
    np.testing.assert_allclose(np.array(a.tolist(), dtype=np.float64).reshape(tuple(a.shape)), b.double().numpy(), rtol=1e-6, atol=atol)


def test_factories_and_dtypes():
    assert ts.zeros(2, 3).shape == (2, 3) == ts.zeros((2, 3)).shape == ts.zeros([2, 3]).shape
    assert ts.zeros(2, 3).dtype is ts.float32
    assert ts.ones(4, dtype=ts.int64).dtype is ts.int64
    assert ts.arange(5).dtype is ts.int64 and ts.arange(0.0, 1.0, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ts.full((2,), 3).dtype is ts.int64 and ts.full((2,), 2.5).tolist() == [2.5, 2.5]
    assert ts.empty(3, 0).shape == (3, 0)
    assert ts.tensor([[1, 2], [3, 4]]).dtype is ts.int64
    assert ts.tensor([1, 2.5]).dtype is ts.float32
    assert ts.tensor([True, False]).dtype is ts.bool
    assert ts.tensor(3.5).shape == () and ts.tensor(3.5).item() == 3.5
    assert ts.tensor([[1, 2]], dtype=ts.float64).dtype is ts.float64
    x = ts.randn(3, 4, dtype=ts.float64)
    for like in (ts.zeros_like, ts.ones_like, ts.empty_like, ts.randn_like, ts.rand_like):
        y = like(x)
        assert y.shape == x.shape and y.dtype is ts.float64
    assert ts.full_like(x, 7).tolist() == [[7.0] * 4] * 3
    assert ts.zeros_like(x, dtype=ts.int32).dtype is ts.int32
    assert ts.randint(0, 10, (100,)).dtype is ts.int64
    assert ts.eye(3).tolist() == torch.eye(3).tolist()
    assert ts.float is ts.float32 and ts.long is ts.int64 and ts.half is ts.float16
    assert repr(ts.bfloat16) == "tessera.bfloat16" and ts.float64.itemsize == 8 and ts.float16.is_floating_point
    assert ts.promote_types(ts.int64, ts.float16) is ts.float16
    assert ts.randn(2, 3, requires_grad=True).requires_grad


def test_devices():
    d = ts.device("cuda", 1)
    assert d.type == "cuda" and d.index == 1 and str(d) == "cuda:1" and repr(d) == "device(type='cuda', index=1)"
    assert ts.device("cpu") == ts.zeros(1).device and ts.device("cpu").index is None
    assert ts.zeros(1, device="cpu").device.type == "cpu"
    assert ts.zeros(2, device="meta").is_meta
    with pytest.raises(ValueError):
        ts.device("tpu")


def test_repr_matches_pytorch():
    for data in ([[1.0, 2.5], [-3.0, 4.125]], [1, 2, 3], [True, False], [[1e-8, 1e8]], [0.1, 0.2, 0.3]):
        assert repr(ts.tensor(data)) == repr(torch.tensor(data))
    for dt in ("float64", "float16", "int32", "uint8"):
        assert repr(ts.tensor([1.5, 2], dtype=getattr(ts, dt))) == \
            repr(torch.tensor([1.5, 2], dtype=getattr(torch, dt))).replace("torch.", "tessera.")
    x = ts.ones(2, requires_grad=True)
    assert repr(x) == "tensor([1., 1.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 2.], grad_fn=<MulBackward0>)"
    assert repr(ts.zeros(2, 3).shape) == "tessera.Size([2, 3])"


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**"])
def test_arithmetic_against_pytorch(op):
    a = ts.tensor([[1.5, -2.0, 3.0], [4.0, 5.5, -6.0]])
    b = ts.tensor([2.0, -3.0, 1.5])
    ta, tb = t2t(a), t2t(b)
    expr = f"x {op} y"
    if op == "**":
        a, ta = a.abs(), ta.abs()
    same(eval(expr, {"x": a, "y": b}), eval(expr, {"x": ta, "y": tb}), atol=1e-5)
    same(eval(expr, {"x": a, "y": 2}), eval(expr, {"x": ta, "y": 2}), atol=1e-5)  # number on the right
    same(eval(expr, {"x": 3, "y": b.abs()}), eval(expr, {"x": 3, "y": tb.abs()}), atol=1e-5)  # reflected


def test_scalar_promotion_is_pytorchs():
    i = ts.tensor([1, 2, 3])
    assert (i * 2).dtype is ts.int64
    assert (i * 2.5).dtype is ts.float32
    assert (i / 2).dtype is ts.float32
    assert (ts.ones(2, dtype=ts.float16) + 1).dtype is ts.float16
    assert (ts.tensor([True]) + True).dtype is ts.bool
    assert (np.float64(2.0) * ts.ones(2)).dtype is ts.float32  # a numpy scalar is a number


def test_inplace_operators_keep_the_object():
    a = ts.ones(3)
    alias = a
    a += 2
    a *= ts.tensor([1.0, 2.0, 3.0])
    a -= 1
    a /= 2
    assert a is alias and a.tolist() == [1.0, 2.5, 4.0]
    v = a.add_(1, alpha=2)
    assert v is a and a.tolist() == [3.0, 4.5, 6.0]
    assert a.mul_(2) is a and a.zero_() is a and a.tolist() == [0.0, 0.0, 0.0]


def test_comparisons_and_logic():
    a = ts.tensor([1, 5, 3])
    b = ts.tensor([2, 5, 1])
    assert (a < b).tolist() == [True, False, False]
    assert (a == b).tolist() == [False, True, False]
    assert (a >= 3).tolist() == [False, True, True]
    assert ((a > 1) & (b > 1)).tolist() == [False, True, False]
    assert (~(a > 1)).tolist() == [True, False, False]
    assert (a == None) is False and (a != "x") is True  # noqa: E711
    assert bool(ts.tensor(1)) and not bool(ts.tensor(0.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)


INDEX_KEYS = [
    1, -1, slice(None), slice(1, None), slice(None, None, 2), slice(-3, -1), slice(1, 100), slice(5, 2),
    (1, 2), (slice(None), 1), (Ellipsis, 0), (None,), (None, slice(None), None), (0, None, slice(1, 3)),
    (Ellipsis, None), (slice(None), slice(None, None, 3), 1), [0, 2], ([0, 1], [1, 2]), (slice(None), [3, 0, 1]),
    ([[0], [2]], [1, 3]), True, (1, Ellipsis, None),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=[repr(k) for k in INDEX_KEYS])
def test_getitem_against_pytorch(key):
    x = ts.arange(60).reshape(3, 4, 5).to(ts.float32)
    tx = torch.arange(60).reshape(3, 4, 5).float()
    same(x[key], tx[key])


def test_getitem_masks_and_tensor_indices():
    x = ts.arange(12).reshape(3, 4)
    tx = torch.arange(12).reshape(3, 4)
    same(x[x % 3 == 0], tx[tx % 3 == 0])
    same(x[ts.tensor([2, 0])], tx[torch.tensor([2, 0])])
    same(x[ts.tensor([True, False, True])], tx[torch.tensor([True, False, True])])
    same(x[:, ts.tensor([1, 3])], tx[:, torch.tensor([1, 3])])
    same(x[ts.tensor(1)], tx[torch.tensor(1)])


def test_basic_indexing_is_a_view():
    x = ts.zeros(3, 4)
    v = x[1, 1:3]
    v += 5
    assert x.tolist()[1] == [0.0, 5.0, 5.0, 0.0]
    assert x[:, ::2]._is_alias_of(x)


def test_setitem_against_pytorch():
    cases = [
        (1, 7.0), ((0, 1), -1.0), (slice(None, None, 2), 3.0), ((Ellipsis, 0), ts.tensor([1.0, 2.0, 3.0])),
        ((slice(None), [0, 2]), 9.0), ("mask", 0.0), ((1, slice(1, 3)), ts.tensor([[4.0, 5.0]])),
        (([0, 2], [1, 3]), ts.tensor([10.0, 20.0])), ((slice(None), 1), [1, 2, 3]),
    ]
    for key, value in cases:
        x = ts.arange(12).reshape(3, 4).to(ts.float32)
        tx = torch.arange(12).reshape(3, 4).float()
        tv = t2t(value) if isinstance(value, ts.Tensor) else (torch.tensor(value).float() if isinstance(value, list) else value)
        if key == "mask":
            x[x > 5] = value
            tx[tx > 5] = tv
        else:
            x[key] = value
            tx[key] = tv
        same(x, tx)


def test_index_errors_as_pytorch():
    x = ts.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="valid indices"):
        x[1.5]
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[ts.tensor([0.5])]
    with pytest.raises(IndexError):
        x[ts.tensor([7])]


def test_methods_against_pytorch():
    a = ts.randn(4, 5, dtype=ts.float64)
    ta = t2t(a)
    same(a.sum(), ta.sum())
    same(a.sum(1), ta.sum(1))
    same(a.sum((0, 1), keepdim=True), ta.sum((0, 1), keepdim=True))
    same(a.mean(dim=0), ta.mean(dim=0))
    same(a.max(1).values, ta.max(1).values)
    same(a.max(dim=1, keepdim=True).indices, ta.max(dim=1, keepdim=True).indices)
    same(a.softmax(-1), ta.softmax(-1))
    same(a.var(1, unbiased=False), ta.var(1, unbiased=False))
    same(a.std(), ta.std())
    same(a.t() @ a, ta.t() @ ta)
    same(a.view(5, 4), ta.view(5, 4))
    same(a.reshape(-1), ta.reshape(-1))
    same(a.permute(1, 0), ta.permute(1, 0))
    same(a.unsqueeze(0).expand(2, 4, 5), ta.unsqueeze(0).expand(2, 4, 5))
    same(a.clamp(min=-0.5, max=0.5), ta.clamp(min=-0.5, max=0.5))
    same(a.exp().log(), ta.exp().log())
    same(a.topk(2).values, ta.topk(2).values)
    same(a.sort(dim=0, descending=True).values, ta.sort(dim=0, descending=True).values)
    same(a.argmax(), ta.argmax())
    same(a.flatten(), ta.flatten())
    same(a.T, ta.T)
    same(a.cumsum(1), ta.cumsum(1))
    same(ts.cat([a, a], 1), torch.cat([ta, ta], 1))
    same(ts.stack([a, a]), torch.stack([ta, ta]))
    same(ts.where(a > 0, a, 0.0), torch.where(ta > 0, ta, 0.0))
    same(a.masked_fill(a > 0, 1.0), ta.masked_fill(ta > 0, 1.0))
    assert [p.shape for p in a.split(2)] == [p.shape for p in ta.split(2)]
    assert [p.shape for p in a.chunk(3, 1)] == [p.shape for p in ta.chunk(3, 1)]
    assert a.size() == ta.size() and a.size(1) == 5 and a.dim() == 2 and a.numel() == 20 and len(a) == 4
    assert a.stride() == ta.stride() and a.t().is_contiguous() is False


def test_conversions():
    x = ts.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert x[0, 0].item() == 1.5 and isinstance(ts.tensor(3).item(), int) and ts.tensor(True).item() is True
    assert float(x[1, 1]) == 4.0 and int(ts.tensor(7)) == 7
    assert x.to(ts.int64).dtype is ts.int64 and x.long().tolist() == [[1, 2], [3, 4]]
    assert x.to("cpu", ts.float64).dtype is ts.float64 and x.double().dtype is ts.float64
    assert x.to(ts.zeros(1, dtype=ts.float16)).dtype is ts.float16
    assert x.to(dtype=ts.bfloat16).dtype is ts.bfloat16
    assert x.cpu() is not None and x.numpy().dtype == np.float32
    assert list(iter(ts.arange(3))) is not None and [int(v) for v in ts.arange(3)] == [0, 1, 2]
    assert ts.tensor(np.arange(6).reshape(2, 3)).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="requires grad"):
        ts.ones(2, requires_grad=True).numpy()
    with pytest.raises(TypeError):
        ts.ones(2, dtype=ts.bfloat16).numpy()


def test_tensor_from_bad_data():
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1 \\(got 3\\)"):
        ts.tensor([[1, 2], [3, 4, 5]])
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        ts.tensor(["a"])
    with pytest.raises(TypeError):
        ts.zeros(2, "x")

"""The C slots of +, -, * and / (python/src/fast_ops.cpp, Note [Per-op cost from Python]): every operand
pairing they take over gives what the bound __add__/__radd__ (pybind11's dispatch, which they bypass)
gives, bit for bit, with the same dtype, autograd and errors; every pairing they do not take goes to
pybind11's slot unchanged (bools, numpy scalars, ints past int64, other classes' reflected operators)."""
import operator

import numpy as np
import pytest

import tessera as ts

OPS = {"+": (operator.add, "__add__", "__radd__"), "-": (operator.sub, "__sub__", "__rsub__"),
       "*": (operator.mul, "__mul__", "__rmul__"), "/": (operator.truediv, "__truediv__", "__rtruediv__")}


def bits(t):
    return (tuple(t.shape), repr(t.dtype), np.array(t.tolist()).tobytes())


def bound(name, x, y):
    """The operator through pybind11's bound method, as before the slots."""
    if isinstance(x, ts.Tensor):
        return getattr(ts.Tensor, OPS[name][1])(x, y)
    return getattr(ts.Tensor, OPS[name][2])(y, x)


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "uint8"])
def test_slots_equal_the_bound_methods(name, dtype):
    dt = getattr(ts, dtype)
    a = (ts.arange(1, 13).reshape(3, 4) * 3 % 7 + 1).to(dt)
    b = (ts.arange(1, 5) % 3 + 1).to(dt)  # broadcasts
    fn = OPS[name][0]
    for x, y in [(a, a), (a, b), (b, a), (a, 2), (a, 2.5), (3, a), (1.5, a), (a, -4), (a, 0.0)]:
        got, want = fn(x, y), bound(name, x, y)
        assert bits(got) == bits(want), (name, dtype, type(x), type(y))


def test_promotion_of_python_numbers_is_kept():
    i = ts.tensor([1, 2, 3])
    assert (i + 2).dtype is ts.int64 and (2 - i).dtype is ts.int64
    assert (i * 2.5).dtype is ts.float32 and (2.5 / i).dtype is ts.float32
    assert (i / 2).dtype is ts.float32  # true division of integers
    assert (ts.ones(2, dtype=ts.float16) + 1).dtype is ts.float16
    assert (ts.ones(2, dtype=ts.float16) * 1e3).dtype is ts.float16


def test_pairings_left_to_pybind11():
    t = ts.tensor([1.0, 2.0])
    # A bool is not an int here: its category decides promotion (bool tensor + True stays bool).
    assert (ts.tensor([True, False]) + True).dtype is ts.bool
    assert bits(t * True) == bits(ts.Tensor.__mul__(t, True))
    # numpy scalars convert as numbers.
    assert (np.float64(2.0) * t).tolist() == [2.0, 4.0]
    assert (t - np.int64(1)).tolist() == [0.0, 1.0]
    # An int past int64 is refused as the bound method refuses it.
    with pytest.raises(Exception) as slot:
        t + 2 ** 70
    with pytest.raises(Exception) as meth:
        ts.Tensor.__add__(t, 2 ** 70)
    assert type(slot.value) is type(meth.value)
    # Unsupported operands: TypeError, as for any Python type.
    with pytest.raises(TypeError):
        t + "a"
    with pytest.raises(TypeError):
        [1] * t


def test_other_classes_reflected_operators_still_run():
    class Other:
        def __radd__(self, other):
            return "radd"

        def __rtruediv__(self, other):
            return "rtruediv"

    assert ts.ones(2) + Other() == "radd"
    assert ts.ones(2) / Other() == "rtruediv"


def test_subclass_instances_take_the_slots():
    class Sub(ts.Tensor):
        pass

    s = Sub(ts.tensor([1.0, 2.0]))
    assert (s + s).tolist() == [2.0, 4.0]
    assert (2 * s).tolist() == [2.0, 4.0]


def test_errors_are_the_bound_methods():
    a, b = ts.ones(2, 3), ts.ones(4)
    for name, (fn, _, _) in OPS.items():
        with pytest.raises(RuntimeError) as slot:
            fn(a, b)
        with pytest.raises(RuntimeError) as meth:
            bound(name, a, b)
        assert type(slot.value) is type(meth.value) is ts.ShapeError
        assert str(slot.value) == str(meth.value)
    with pytest.raises(ts.ShapeError):  # the reflected order too
        2.0 + ts.ones(2, 3) + ts.ones(4)


def test_autograd_through_the_slots():
    x = ts.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ts.tensor([0.5, -1.0, 2.0], requires_grad=True)
    z = ((x + y) * x - 2.0 / y) / 3 - 1
    assert z.grad_fn is not None
    z.sum().backward()
    xs, ys = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(x.grad.tolist(), (2 * xs + ys) / 3, rtol=1e-6)
    np.testing.assert_allclose(y.grad.tolist(), (xs + 2.0 / ys ** 2) / 3, rtol=1e-6)


@pytest.mark.gpu
def test_slots_on_the_gpu_equal_the_bound_methods():
    a = ts.randn(64, 33, device="cuda")
    b = ts.randn(33, device="cuda")
    for name, (fn, _, _) in OPS.items():
        for x, y in [(a, a), (a, b), (a, 3), (2.5, a), (ts.arange(5, device="cuda"), 2)]:
            assert bits(fn(x, y).cpu()) == bits(bound(name, x, y).cpu()), (name, type(x), type(y))
    with pytest.raises(RuntimeError) as slot:
        a + ts.ones(33)
    with pytest.raises(RuntimeError) as meth:
        ts.Tensor.__add__(a, ts.ones(33))
    assert type(slot.value) is type(meth.value) and str(slot.value) == str(meth.value)

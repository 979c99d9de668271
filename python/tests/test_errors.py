"""tessera's errors surface as Python exceptions of the matching built-in kind, with tessera's message
(Note [Error mapping] in python/src/errors.cpp), and never crash the interpreter."""
import pytest

import tessera as ts


def test_shape_error_is_runtime_error():
    with pytest.raises(RuntimeError, match="must match the size of tensor b") as e:
        ts.ones(3) + ts.ones(4)
    assert isinstance(e.value, ts.ShapeError)
    with pytest.raises(RuntimeError):
        ts.ones(2, 3) @ ts.ones(2, 3)
    with pytest.raises(RuntimeError, match="view"):
        ts.ones(2, 3).view(4)


def test_index_error():
    with pytest.raises(IndexError) as e:
        ts.ones(2, 3).sum(5)
    assert isinstance(e.value, ts.IndexError)
    with pytest.raises(IndexError):
        ts.ones(2).transpose(0, 3)


def test_dtype_error_is_type_error():
    with pytest.raises(TypeError) as e:
        ts.ones(2, dtype=ts.int64).requires_grad_()
    assert isinstance(e.value, ts.DTypeError) or isinstance(e.value, TypeError)
    with pytest.raises(TypeError):
        ts.ones(2) & ts.ones(2)


def test_value_error():
    with pytest.raises(ValueError):
        ts.device("npu")
    with pytest.raises(ValueError):
        ts.optim.SGD([ts.ones(1, requires_grad=True)], lr=-1.0)


def test_device_error_without_gpu():
    if ts.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError) as e:
        ts.ones(2).cuda()
    assert isinstance(e.value, ts.DeviceError)


def test_argument_type_errors():
    with pytest.raises(TypeError):
        ts.ones(2).add("x")
    with pytest.raises(TypeError):
        ts.zeros(2, dtype="float32")
    with pytest.raises(TypeError, match="unexpected keyword"):
        ts.zeros(2, colour="red")
    with pytest.raises(TypeError):
        ts.cat(ts.ones(2))


def test_backward_errors():
    # tessera classes these as ValueError (PyTorch: RuntimeError); the message is the same.
    with pytest.raises(ValueError, match="does not require grad"):
        ts.ones(2).sum().backward()
    x = ts.ones(3, requires_grad=True)
    with pytest.raises((RuntimeError, ValueError)):
        (x * 2).backward()  # not a scalar, no gradient given

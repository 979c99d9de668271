"""no_grad, enable_grad and set_grad_enabled: context managers and decorators, as torch's.

The switch is tessera's grad mode (per thread, runtime/grad_mode); each manager restores the mode it
found on exit, so they nest and survive exceptions.
"""
import functools

from tessera._C import _autograd as _ag

is_grad_enabled = _ag.is_grad_enabled


class _GradModeManager:
    _mode = None

    def __enter__(self):
        self._prev = _ag.is_grad_enabled()
        _ag.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _ag.set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeManager):
    """Ops inside record no autograd history (torch.no_grad)."""
    _mode = False


class enable_grad(_GradModeManager):
    """Turns recording back on inside a no_grad block (torch.enable_grad)."""
    _mode = True


class set_grad_enabled(_GradModeManager):
    """set_grad_enabled(mode): sets the mode now; as a context manager, restores it on exit."""

    def __init__(self, mode):
        self._prev = _ag.is_grad_enabled()
        self._mode = bool(mode)
        _ag.set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        _ag.set_grad_enabled(self._prev)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper

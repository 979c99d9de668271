"""tessera.amp: autocast (a context manager and decorator) and GradScaler (torch.amp)."""
import functools

from tessera._C import _amp


class autocast:
    """with tessera.amp.autocast("cuda", dtype=tessera.bfloat16): ops follow the autocast policy."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        self.device_type, self.dtype, self.enabled, self.cache_enabled = device_type, dtype, enabled, cache_enabled
        self._scopes = []

    def __enter__(self):
        self._scopes.append(_amp.AutocastScope(self.device_type, self.dtype, self.enabled, self.cache_enabled))
        return self

    def __exit__(self, *exc):
        self._scopes.pop().close()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


is_autocast_enabled = _amp.is_autocast_enabled
get_autocast_dtype = _amp.get_autocast_dtype


class GradScaler:
    """Loss scaling for float16 training (torch.amp.GradScaler); step() skips a step with inf/NaN grads."""

    def __init__(self, device="cuda", init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        self._cxx = _amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    def scale(self, outputs):
        return self._cxx.scale(outputs)

    def unscale_(self, optimizer):
        self._cxx.unscale_(optimizer._cxx)

    def step(self, optimizer):
        return self._cxx.step(optimizer._cxx)

    def update(self, new_scale=None):
        self._cxx.update(new_scale)

    def get_scale(self):
        return self._cxx.get_scale()

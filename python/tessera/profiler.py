"""tessera.profiler: torch.profiler's profile, record_function and ProfilerActivity over tessera's
recorder (ops with their input shapes, user ranges, CUPTI kernels, memory events).

    with tessera.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with tessera.profiler.record_function("forward"):
            y = net(x)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

One profile may run at a time in the process. Times are in microseconds, as PyTorch's.
"""
import functools

from tessera._C import _profiler as _p

ProfilerActivity = _p.ProfilerActivity


class profile:
    """Records between start() and stop(), or inside a with block (torch.profiler.profile)."""

    def __init__(self, activities=None, *, record_shapes=False, profile_memory=False, with_stack=False, schedule=None,
                 on_trace_ready=None):
        if schedule is not None or on_trace_ready is not None:
            raise NotImplementedError("tessera.profiler.profile: schedule and on_trace_ready are not supported yet; "
                                      "profile the steps you want inside the with block")
        self.activities = list(activities) if activities is not None else [ProfilerActivity.CPU]
        self._cxx = _p.Profile(self.activities, record_shapes, profile_memory)

    def start(self):
        self._cxx.start()

    def stop(self):
        self._cxx.stop()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        if self._cxx.running():
            self.stop()
        return False

    def key_averages(self, group_by_input_shape=False):
        return self._cxx.key_averages(group_by_input_shape)

    def events(self):
        """Every recorded event as a dict (kind, name, start_us, end_us, thread, parent, input_shapes, ...)."""
        return self._cxx.events()

    def memory_events(self):
        return self._cxx.memory_events()

    def export_chrome_trace(self, path):
        self._cxx.export_chrome_trace(path)

    def export_memory_timeline(self, path):
        self._cxx.export_memory_timeline(path)


class record_function:
    """A user range that nests with ops in the table and the trace: a context manager or a decorator."""

    def __init__(self, name):
        self.name = name
        self._cxx = _p.RecordFunction(name)

    def __enter__(self):
        self._cxx.enter()
        return self

    def __exit__(self, *exc):
        self._cxx.exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper


class emit_nvtx:
    """NVTX ranges around every op inside the block, for Nsight Systems (torch.autograd.profiler.emit_nvtx)."""

    def __init__(self, enabled=True):
        self.enabled = enabled

    def __enter__(self):
        self._cxx = _p.EmitNvtx(self.enabled)
        return self

    def __exit__(self, *exc):
        del self._cxx
        return False

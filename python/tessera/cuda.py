"""tessera.cuda: devices, streams, events, synchronize and the caching allocator's statistics (torch.cuda)."""
from tessera._C import _cuda
from tessera._C._cuda import (  # noqa: F401
    is_available, device_count, current_device, set_device, synchronize, get_device_name, get_device_capability,
    memory_stats, memory_allocated, max_memory_allocated, memory_reserved, max_memory_reserved,
    reset_peak_memory_stats, memory_summary, empty_cache, Stream, Event, current_stream, default_stream, set_stream,
)


class stream:
    """with tessera.cuda.stream(s): makes s the current stream inside the block (torch.cuda.stream)."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        if self.s is None:
            return None
        self.prev = _cuda.current_stream(self.s.device.index)
        _cuda.set_stream(self.s)
        return self.s

    def __exit__(self, *exc):
        if self.s is not None:
            _cuda.set_stream(self.prev)
        return False

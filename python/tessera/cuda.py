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


CUDAGraph = _cuda.CUDAGraph
# make_graphed(fn, sample_inputs, warmup_iters=3): a whole step (forward, backward, optimizer step) as one
# graph, tessera's ts::cuda::make_graphed: fn runs warmup_iters times eagerly on a side stream, then once
# under capture; calling the result with tensors of the samples' shapes copies them into the static
# inputs, replays, and returns the static outputs (overwritten by the next call). Not PyTorch's
# make_graphed_callables, which graphs a module's forward and backward as two autograd-aware graphs.
make_graphed = _cuda.make_graphed
graph_pool_handle = _cuda.graph_pool_handle
is_current_stream_capturing = _cuda.is_current_stream_capturing


class graph:
    """with tessera.cuda.graph(g): captures the work queued inside the block into the CUDAGraph g
    (torch.cuda.graph). The capture runs on `stream` (default: a side stream of the current device,
    as capture cannot run on the default stream); the block's tensors are the graph's static inputs and
    outputs, and g.replay() reruns the captured kernels on whatever those tensors then hold. Warm the
    work up eagerly first (a few iterations on a side stream), so that one-time set-up is not captured."""

    _side_streams = {}

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph, self.pool, self.capture_error_mode = cuda_graph, pool, capture_error_mode
        if stream is None:
            dev = current_device()
            stream = graph._side_streams.get(dev)
            if stream is None:
                stream = graph._side_streams[dev] = Stream(dev)
        self.stream = stream

    def __enter__(self):
        synchronize()
        self._ctx = stream(self.stream)
        self._ctx.__enter__()
        self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)
        return self

    def __exit__(self, *exc):
        try:
            self.cuda_graph.capture_end()
        finally:
            self._ctx.__exit__(*exc)
        return False

"""Reference counting: a million small operations from Python leave neither Python memory
(tracemalloc) nor tessera's CPU blocks (the allocators' reports, tessera._C._memory) behind."""
import gc
import tracemalloc

import tessera as ts


def test_no_leak_after_a_million_small_ops():
    a = ts.randn(16)
    b = ts.randn(16, requires_grad=True)
    def work(n):
        for _ in range(n):
            c = a + b          # 1: an op with autograd history
            d = c * 2.0        # 2: a Python number
            e = d[3:9]         # 3: a view through __getitem__
            e.sum()            # 4: a reduction
            (a < 0).any()      # 5: a comparison and a reduction
    work(1000)  # warm caches
    gc.collect()
    ts._C._memory.start()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = ts.ones(1000)  # the tracker sees allocations: one live block while it is held
    assert ts._C._memory.live_blocks() == 1 and ts._C._memory.live_bytes() >= 4000
    del held
    work(200_000)  # 5 ops each: a million
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    live_blocks = ts._C._memory.live_blocks()
    ts._C._memory.stop()
    assert after - before < 64 * 1024, f"Python memory grew by {after - before} bytes"
    assert live_blocks == 0, f"{live_blocks} CPU blocks still live"

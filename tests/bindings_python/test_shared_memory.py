"""distc.shared_empty / shared_zeros: arrays in memory the ranks of a host
share (distc_mem_alloc), their checks, their release when the last view
goes, and collectives on them between processes."""
import gc
import os

import numpy as np
import pytest

import distc
from conftest import run_procs, run_threads


def test_shape_dtype_and_zeroed():
    a = distc.shared_empty((3, 5), np.float64)
    assert a.shape == (3, 5) and a.dtype == np.float64 and a.flags.writeable
    assert a.ctypes.data % 4096 == 0
    assert not a.any()
    a[:] = 7
    assert (a == 7).all()
    assert distc.shared_zeros(4, "int32").tolist() == [0, 0, 0, 0]
    assert distc.shared_empty(0).size == 0  # no elements: still memory of its own


def test_bad_arguments():
    with pytest.raises(ValueError):
        distc.shared_empty((2, -1))
    with pytest.raises(ValueError):
        distc.shared_empty(-1)
    with pytest.raises(TypeError):
        distc.shared_empty(2.5)
    with pytest.raises(TypeError):
        distc.shared_empty(4, "no such dtype")
    # The C functions themselves: a pointer not from distc_mem_alloc.
    with pytest.raises(distc.DistcInvalidArgument) as e:
        distc._distc.distc_mem_free(4096)
    assert "distc_mem_alloc" in str(e.value)
    with pytest.raises(distc.DistcInvalidArgument):
        distc._distc.distc_mem_alloc(0)


def test_released_with_its_last_view():
    # Each allocation holds a file descriptor until freed: more than a
    # process may have open at once, one after the other, so each goes.
    import resource
    gc.collect()
    base = _regions_mapped()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    for _ in range(min(soft, 65536) + 100):
        a = distc.shared_empty(1024)
        a[0] = 1
    view = distc.shared_empty(1024)[10:20]  # the base goes with its last view
    gc.collect()
    view[:] = 3
    assert view.sum() == 30
    assert _regions_mapped() == base + 2  # `a` and the view's base: every other one unmapped
    del a, view
    gc.collect()
    assert _regions_mapped() == base


def _regions_mapped():
    """Mappings of distc_mem_alloc memory in this process: its own and its peers'."""
    with open("/proc/self/maps") as f:
        return sum("memfd:distc-mem" in line for line in f)


def collectives_on_shared_memory(pg):
    r, size = pg.rank(), pg.size()
    # 12 MiB of float32 (a multiple of 2 and 3 ranks): in place on every
    # host, where the kernel copies slowly too, even with more ranks than cores.
    n = 3 << 20
    a = distc.shared_empty(n, np.float32)
    a[:] = np.arange(n, dtype=np.float32) % 97 + r
    before = _regions_mapped()
    pg.all_reduce(a)
    # The peers' buffers were mapped here, beside this rank's own.
    assert _regions_mapped() >= before + size - 1, (before, _regions_mapped())
    want = (np.arange(n, dtype=np.float32) % 97) * size + sum(range(size))
    assert np.array_equal(a, want), "allreduce"
    out = distc.shared_empty(n * size, np.float32)
    mine = distc.shared_empty(n, np.float32)
    mine[:] = r + 1
    pg.all_gather_into_tensor(out, mine)
    assert np.array_equal(out, np.repeat(np.arange(1, size + 1, dtype=np.float32), n)), "allgather"
    part = distc.shared_empty(n // size, np.float32)
    pg.reduce_scatter_tensor(part, a)
    assert np.array_equal(part, want[r * (n // size):(r + 1) * (n // size)] * size), "reduce_scatter"
    b = distc.shared_empty(n, np.uint8)
    if r == 0:
        b[:] = np.arange(n) % 251
    pg.broadcast(b, 0)
    assert np.array_equal(b, np.arange(n) % 251), "broadcast"
    # Plain arrays on odd ranks beside shared ones on even ranks: the same result.
    c = np.empty(n, np.float32) if r % 2 else distc.shared_empty(n, np.float32)
    c[:] = r + 1
    pg.all_reduce(c)
    assert (c == size * (size + 1) // 2).all(), "allreduce, partly shared"
    # A message from shared memory: its receiver maps the sender's region
    # and copies it out with memcpy (an exchange too, which goes inline
    # otherwise). A sender whose receiver is late sends inline after a
    # while, so ten tries (as many on each rank): the first one read in
    # place maps the region.
    if size == 2:
        msg = distc.shared_empty(1 << 20, np.float32)
        got = np.empty(1 << 20, np.float32)
        before = _regions_mapped()
        for i in range(10):
            msg[:] = r + i
            pg.batch_isend_irecv([(0, msg, 1 - r, 0), (1, got, 1 - r, 0)]).wait()  # (send, ...), (receive, ...)
            assert (got == 1 - r + i).all(), "sendrecv from shared memory"
        assert _regions_mapped() >= before + 1, "the sender's region is mapped here"
    # After a call whose buffers were not all shared the ranks stop looking
    # for a while, all alike (a rank that looked alone would fail the call).
    for i in range(20):
        a[:] = i + r
        pg.all_reduce(a)
        assert (a == i * size + sum(range(size))).all(), f"allreduce {i} after one partly shared"
    return r


def test_reducer_buckets_are_shared():
    """A reducer puts host buckets of 64 KiB or more in shared memory, and frees them with itself."""
    gc.collect()
    base = _regions_mapped()

    def body(pg):
        grads = [np.zeros(1 << 16, np.float32), np.zeros(1 << 16, np.float32)]  # 256 KiB each
        before = _regions_mapped()
        with distc.Reducer(pg, grads, bucket_cap_mb=0.25, first_bucket_mb=0.25) as red:
            assert _regions_mapped() >= before + red.num_buckets, (before, _regions_mapped())
            red.prepare_for_backward()
            for i in reversed(range(2)):
                grads[i][...] = pg.rank() + i
                red.mark_ready(i)
            red.finalize()
            assert (grads[1] == 1.5).all() and (grads[0] == 0.5).all()
        return True

    # Threads: both ranks' buckets in this process, and gone with their reducers.
    assert run_threads(2, body) == [True, True]
    gc.collect()
    assert _regions_mapped() == base


def _out_of_files(pg):
    """With no file descriptor left, shared memory is refused with a clear
    error, and a reducer puts its buckets in plain memory and still works."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    grads = [np.zeros(1 << 16, np.float32), np.zeros(1 << 16, np.float32)]  # 256 KiB each
    before = _regions_mapped()
    spare = os.dup(0)  # the lowest free descriptor, held: none left below the limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (spare + 1, hard))
    try:
        with pytest.raises(distc.DistcOutOfMemory) as e:
            distc.shared_empty(1024)
        assert "memfd_create" in str(e.value), str(e.value)
        with distc.Reducer(pg, grads, bucket_cap_mb=0.25, first_bucket_mb=0.25) as red:
            os.close(spare)  # to read /proc/self/maps
            spare = None
            assert red.num_buckets == 2
            assert _regions_mapped() == before  # no bucket in shared memory
            for it in range(2):
                red.prepare_for_backward()
                for i in reversed(range(2)):
                    grads[i][...] = pg.rank() + i + it
                    red.mark_ready(i)
                red.finalize()
                assert (grads[1] == 1.5 + it).all() and (grads[0] == 0.5 + it).all()
    finally:
        if spare is not None:
            os.close(spare)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pg.rank()


def test_out_of_file_descriptors():
    # UBSan's vptr check asks whether memory is readable through a pipe
    # (sanitizer_common's IsAccessibleMemoryRange): with no descriptor left
    # it reports a valid object as invalid and aborts. test_peer_memory
    # covers the allocator's refusal under the sanitizers.
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("needs file descriptors the sanitizers' checks take")
    assert run_procs(2, _out_of_files) == [0, 1]


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("kernel", ["fast", "slow"])
def test_collectives_in_processes(size, kernel, monkeypatch):
    # Both paths whatever this host's kernel: in place as ordinary buffers go
    # (fast), or after the ranks learned that all buffers are shared (slow).
    monkeypatch.setenv("DISTC_SHM_KERNEL_COPY", kernel)
    assert run_procs(size, collectives_on_shared_memory, join_s=240) == list(range(size))

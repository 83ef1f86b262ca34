"""distc: stores, process groups and a DDP reducer, without PyTorch.

The API follows torch.distributed: `import distc as dist` and call
dist.init_process_group, dist.all_reduce ... on NumPy arrays, PyTorch
tensors, or anything with __dlpack__ (in place, no copies). The object
collectives use pickle: unpickling data from untrusted peers can run
arbitrary code, so use them only among trusted ranks.
"""
import atexit

from . import _distc

# Registered first, so it runs after every exit hook distc or its user adds
# later: from then on, completion callbacks on distc's threads no longer
# take the GIL (pydistc_callbacks.c says why).
atexit.register(_distc.pydistc_at_exit)
from ._errors import (DistcAborted, DistcBackendError, DistcError, DistcInternalError, DistcInvalidArgument,
                      DistcIOError, DistcNotFound, DistcNotSupported, DistcOutOfMemory, DistcProtocolError,
                      DistcRemoteError, DistcStateError, DistcTimeoutError)
from ._types import PremulSum, ReduceOp, premul_sum, version
from ._store import CustomStore, FileStore, HashStore, PrefixStore, Store, TCPStore
from ._future import Future, collect_all, wait_all
from ._group import ProcessGroup, Work
from ._bucket import GradBucket
from ._memory import shared_empty, shared_zeros
from ._reducer import Reducer, compute_bucket_assignment_by_size
from ._api import (Backend, GroupMember, P2POp, all_gather, all_gather_coalesced, all_gather_into_tensor,
                   all_gather_into_tensor_coalesced, all_gather_object, all_reduce, all_reduce_coalesced, all_to_all,
                   all_to_all_single, barrier, batch_isend_irecv, broadcast, broadcast_object_list,
                   default_pg_timeout, destroy_process_group, dump_trace, gather, gather_object, get_backend,
                   get_global_rank, get_group_rank, get_process_group_ranks, get_rank, get_world_size,
                   init_process_group, irecv, is_available, is_initialized, isend, monitored_barrier, new_group,
                   new_subgroups, new_subgroups_by_enumeration, recv, recv_object_list, reduce, reduce_scatter,
                   reduce_scatter_tensor, reduce_scatter_tensor_coalesced, scatter, scatter_object_list, send,
                   send_object_list)

__version__ = version()
ANY_SOURCE = None

"""
    Distc

distc from Julia: stores, process groups and collectives on Julia arrays,
over the raw wrappers of `LibDistc` (generated from include/distc.h).
Handles are `mutable struct`s with finalizers; a child keeps its parent
alive (a prefix store its store, a group its store).

```julia
using Distc
pg = ProcessGroup("env://")            # under distc-run or torchrun
A = fill(Float32(rank(pg) + 1), 4)
allreduce!(pg, A)                      # in place: the sum over ranks
```
"""
module Distc

include("LibDistc.jl")
using .LibDistc
const L = LibDistc

export DistcError, Store, HashStore, FileStore, TCPStore, PrefixStore, ProcessGroup, Reducer
export rank, nranks, backend, transport, allreduce!, bcast!, reduce!, allgather!, reducescatter!, alltoall!,
       barrier, send, recv!, allgather_bytes, new_subgroup, split_group, abort!, setkey!, getkey, addkey!,
       waitkeys, checkkeys, deletekey!, numkeys, prepare!, mark_ready!, finalize!, shared_zeros
const DistcError = L.DistcError

# ---------------------------------------------------------------- element types

"""The DLPack dtype of a Julia element type."""
dltype(::Type{Bool}) = L.DLDataType(L.kDLBool, 8, 1)
dltype(::Type{Int8}) = L.DLDataType(L.kDLInt, 8, 1)
dltype(::Type{UInt8}) = L.DLDataType(L.kDLUInt, 8, 1)
dltype(::Type{Int16}) = L.DLDataType(L.kDLInt, 16, 1)
dltype(::Type{Int32}) = L.DLDataType(L.kDLInt, 32, 1)
dltype(::Type{Int64}) = L.DLDataType(L.kDLInt, 64, 1)
dltype(::Type{Float16}) = L.DLDataType(L.kDLFloat, 16, 1)
dltype(::Type{Float32}) = L.DLDataType(L.kDLFloat, 32, 1)
dltype(::Type{Float64}) = L.DLDataType(L.kDLFloat, 64, 1)
dltype(::Type{ComplexF32}) = L.DLDataType(L.kDLComplex, 64, 1)
dltype(::Type{ComplexF64}) = L.DLDataType(L.kDLComplex, 128, 1)
dltype(::Type{T}) where {T} = throw(ArgumentError("distc cannot reduce elements of type $T"))

const Buffer = Union{Array, SubArray}

function contiguous(A)
    A isa Array && return A
    dense = A isa StridedArray && strides(A) == Base.size_to_strides(1, size(A)...)
    dense || throw(ArgumentError("distc needs contiguous memory; copy the view first"))
    return A
end

"""
A flat DLTensor over `A` (column-major is fine: the collectives are on the
flat memory). `shape` must stay referenced (GC.@preserve) while it is used.
"""
function dltensor(A::AbstractArray{T}, shape::Ref{Int64}) where {T}
    contiguous(A)
    shape[] = length(A)
    return L.DLTensor(Ptr{Cvoid}(pointer(A)), L.DLDevice(L.kDLCPU, 0), 1, dltype(T),
                      Base.unsafe_convert(Ptr{Int64}, shape), C_NULL, 0)
end

# ---------------------------------------------------------------- reduce ops

@enum ReduceOp::Cint SUM = 0 AVG = 1 PRODUCT = 2 MIN = 3 MAX = 4 BAND = 5 BOR = 6 BXOR = 7
export ReduceOp, SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR

# ---------------------------------------------------------------- stores

"""A store handle (thread-safe). `parent` keeps what it wraps alive."""
mutable struct Store
    ptr::Ptr{L.distc_store}
    parent::Any
    function Store(ptr::Ptr{L.distc_store}, parent = nothing)
        s = new(ptr, parent)
        finalizer(close, s)
        return s
    end
end

function newstore(f)
    out = Ref{Ptr{L.distc_store}}(C_NULL)
    f(out)
    return out[]
end

HashStore() = Store(newstore(out -> L.distc_store_new_hash(out)))
FileStore(path::AbstractString, num_workers::Integer = -1) =
    Store(newstore(out -> L.distc_store_new_file(out, path, num_workers)))
PrefixStore(prefix::AbstractString, inner::Store) =
    Store(newstore(out -> L.distc_store_new_prefix(out, prefix, inner)), inner)

"""TCPStore(host, port; is_server=false, world_size=-1, timeout_ms=300_000): wire-compatible with PyTorch's."""
function TCPStore(host::AbstractString, port::Integer; is_server::Bool = false, world_size::Integer = -1,
                  timeout_ms::Integer = 300_000, wait_for_workers::Bool = true)
    GC.@preserve host begin
        opts = Ref(L.distc_tcp_store_options(L.DISTC_TCP_STORE_OPTIONS_VERSION, pointer(host), port, is_server,
                                             world_size, wait_for_workers, timeout_ms, -1,
                                             L.DISTC_TCP_PROTOCOL_AUTO, -1, -1, C_NULL, -1, C_NULL, C_NULL))
        return Store(newstore(out -> L.distc_store_new_tcp(out, opts)))
    end
end

function port(s::Store)
    p = Ref{Int32}(0)
    L.distc_store_tcp_port(p, s)
    return Int(p[])
end

function take!(buf::Ref{L.distc_buf})
    b = buf[]
    v = b.data == C_NULL ? UInt8[] : copy(unsafe_wrap(Array, b.data, b.size))
    L.distc_buf_dispose(buf)
    return v
end

setkey!(s::Store, key::AbstractString, value) = (v = Vector{UInt8}(value); L.distc_store_set(s, key, v, length(v)); nothing)

function getkey(s::Store, key::AbstractString)
    b = Ref(L.distc_buf(C_NULL, 0))
    L.distc_store_get(b, s, key)
    return take!(b)
end

function addkey!(s::Store, key::AbstractString, delta::Integer)
    v = Ref{Int64}(0)
    L.distc_store_add(v, s, key, delta)
    return v[]
end

function withkeys(f, keys)
    ks = [Base.cconvert(Cstring, k) for k in keys]
    GC.@preserve ks begin
        ptrs = Ptr{Cchar}[Base.unsafe_convert(Ptr{Cchar}, k) for k in ks]
        return f(ptrs)
    end
end

function checkkeys(s::Store, keys)
    ok = Ref{Int32}(0)
    withkeys(p -> L.distc_store_check(ok, s, p, length(p)), keys)
    return ok[] != 0
end

waitkeys(s::Store, keys; timeout_ms::Integer = L.DISTC_TIMEOUT_DEFAULT) =
    (withkeys(p -> L.distc_store_wait(s, p, length(p), timeout_ms), keys); nothing)

function deletekey!(s::Store, key::AbstractString)
    d = Ref{Int32}(0)
    L.distc_store_delete_key(d, s, key)
    return d[] != 0
end

function numkeys(s::Store)
    n = Ref{Int64}(0)
    L.distc_store_num_keys(n, s)
    return n[]
end

# ---------------------------------------------------------------- process groups

"""A process group: `rank(pg)` of `nranks(pg)` over a backend ("gloo" by default)."""
mutable struct ProcessGroup
    ptr::Ptr{L.distc_pg}
    store::Any
    function ProcessGroup(ptr::Ptr{L.distc_pg}, store = nothing)
        pg = new(ptr, store)
        finalizer(close, pg)
        return pg
    end
end

function pg_options(backend, timeout_ms)
    return L.distc_pg_options(L.DISTC_PG_OPTIONS_VERSION, pointer(backend), timeout_ms, C_NULL, -1, -1)
end

function ProcessGroup(store::Store, rank::Integer, size::Integer; backend::String = "gloo",
                      timeout_ms::Integer = -1)
    out = Ref{Ptr{L.distc_pg}}(C_NULL)
    GC.@preserve backend begin
        opts = Ref(pg_options(backend, timeout_ms))
        L.distc_pg_new(out, store, rank, size, opts)
    end
    return ProcessGroup(out[], store)
end

"""Rendezvous by URL (env://, tcp://host:port?rank=R&world_size=N, file:///path?...) and create the group."""
function ProcessGroup(url::AbstractString; backend::String = "gloo", timeout_ms::Integer = -1)
    out = Ref{Ptr{L.distc_pg}}(C_NULL)
    GC.@preserve backend begin
        opts = Ref(pg_options(backend, timeout_ms))
        L.distc_pg_new_from_url(out, url, C_NULL, opts)
    end
    return ProcessGroup(out[])
end

function query(f, T, pg)
    r = Ref{T}(zero(T))
    f(r, pg)
    return r[]
end

rank(pg::ProcessGroup) = Int(query(L.distc_pg_rank, Int32, pg))
nranks(pg::ProcessGroup) = Int(query(L.distc_pg_size, Int32, pg))

function backend(pg::ProcessGroup)
    p = Ref{Ptr{Cchar}}(C_NULL)
    L.distc_pg_backend(p, pg)
    return unsafe_string(p[])
end

"""How collectives reach rank `peer`: "shm", "tcp", "gloo", "self", or the backend's name."""
function transport(pg::ProcessGroup, peer::Integer)
    p = Ref{Ptr{Cchar}}(C_NULL)
    L.distc_pg_transport(p, pg, Int32(peer))
    return unsafe_string(p[])
end

"""Aborts every operation of this rank on `pg` (they fail with DISTC_EABORTED); never hangs."""
abort!(pg::ProcessGroup) = (L.distc_pg_abort(pg); nothing)

"""c10d's new_group: every rank calls it; a rank not listed gets `nothing`."""
function new_subgroup(pg::ProcessGroup, ranks::AbstractVector{<:Integer})
    r = Int32.(collect(ranks))
    out = Ref{Ptr{L.distc_pg}}(C_NULL)
    L.distc_pg_new_subgroup(out, pg, r, length(r), C_NULL)
    return out[] == C_NULL ? nothing : ProcessGroup(out[], pg.store)
end

"""MPI_Comm_split: ranks of one color (>= 0) form a group ordered by key; a negative color gets `nothing`."""
function split_group(pg::ProcessGroup, color::Integer, key::Integer = 0)
    out = Ref{Ptr{L.distc_pg}}(C_NULL)
    L.distc_pg_split(out, pg, color, key, C_NULL)
    return out[] == C_NULL ? nothing : ProcessGroup(out[], pg.store)
end

const NOWORK = Ptr{Ptr{L.distc_work}}(C_NULL)  # blocking calls

"""Reduces `A` in place across the group (every rank gets the result)."""
function allreduce!(pg::ProcessGroup, A::Buffer; op::ReduceOp = SUM)
    shape = Ref{Int64}(0)
    GC.@preserve A shape begin
        t = Ref(dltensor(A, shape))
        L.distc_allreduce(NOWORK, pg, t, Cint(op), C_NULL)
    end
    return A
end

"""Copies `root`'s `A` into every rank's `A`."""
function bcast!(pg::ProcessGroup, A::Buffer; root::Integer = 0)
    shape = Ref{Int64}(0)
    GC.@preserve A shape begin
        t = Ref(dltensor(A, shape))
        L.distc_broadcast(NOWORK, pg, t, root, C_NULL)
    end
    return A
end

"""Reduces into `root`'s `A`; the others' `A` are left as they were."""
function reduce!(pg::ProcessGroup, A::Buffer; root::Integer = 0, op::ReduceOp = SUM)
    shape = Ref{Int64}(0)
    GC.@preserve A shape begin
        t = Ref(dltensor(A, shape))
        L.distc_reduce(NOWORK, pg, t, root, Cint(op), C_NULL)
    end
    return A
end

"""Every rank's `A`, in rank order, into `out` (length nranks x length(A))."""
function allgather!(pg::ProcessGroup, out::Buffer, A::Buffer)
    length(out) == length(A) * nranks(pg) ||
        throw(DimensionMismatch("out has $(length(out)) elements; $(length(A) * nranks(pg)) expected"))
    s1, s2 = Ref{Int64}(0), Ref{Int64}(0)
    GC.@preserve out A s1 s2 begin
        o, i = Ref(dltensor(out, s1)), Ref(dltensor(A, s2))
        L.distc_allgather_into_tensor(NOWORK, pg, o, i, C_NULL)
    end
    return out
end

"""Rank r's `out` gets the reduction of every rank's r-th piece of `A` (length nranks x length(out))."""
function reducescatter!(pg::ProcessGroup, out::Buffer, A::Buffer; op::ReduceOp = SUM)
    s1, s2 = Ref{Int64}(0), Ref{Int64}(0)
    GC.@preserve out A s1 s2 begin
        o, i = Ref(dltensor(out, s1)), Ref(dltensor(A, s2))
        L.distc_reduce_scatter_tensor(NOWORK, pg, o, i, Cint(op), C_NULL)
    end
    return out
end

"""All-to-all in even pieces: the j-th piece of `A` goes to rank j."""
function alltoall!(pg::ProcessGroup, out::Buffer, A::Buffer)
    s1, s2 = Ref{Int64}(0), Ref{Int64}(0)
    GC.@preserve out A s1 s2 begin
        o, i = Ref(dltensor(out, s1)), Ref(dltensor(A, s2))
        L.distc_alltoall_single(NOWORK, pg, o, i, C_NULL, C_NULL, C_NULL)
    end
    return out
end

barrier(pg::ProcessGroup) = (L.distc_barrier(NOWORK, pg, C_NULL); nothing)

function send(pg::ProcessGroup, A::Buffer, dst::Integer; tag::Integer = 0)
    shape = Ref{Int64}(0)
    GC.@preserve A shape begin
        t = Ref(dltensor(A, shape))
        L.distc_send(NOWORK, pg, t, dst, tag, C_NULL)
    end
    return nothing
end

"""Receives into `A` from `src` (`nothing`: any rank); returns the sender's rank."""
function recv!(pg::ProcessGroup, A::Buffer, src::Union{Integer, Nothing} = nothing; tag::Integer = 0)
    shape = Ref{Int64}(0)
    work = Ref{Ptr{L.distc_work}}(C_NULL)
    GC.@preserve A shape begin
        t = Ref(dltensor(A, shape))
        L.distc_recv(work, pg, t, src === nothing ? L.DISTC_ANY_SOURCE : src, tag, C_NULL)
        try
            L.distc_work_wait(work[], L.DISTC_TIMEOUT_DEFAULT)
            r = Ref{Int32}(-1)
            L.distc_work_source_rank(r, work[])
            return Int(r[])
        finally
            L.distc_work_free(work[])
        end
    end
end

"""Every rank's bytes (lengths may differ), in rank order."""
function allgather_bytes(pg::ProcessGroup, data::AbstractVector{UInt8})
    n = nranks(pg)
    bufs = fill(L.distc_buf(C_NULL, 0), n)
    d = Vector{UInt8}(data)
    GC.@preserve d bufs begin
        L.distc_all_gather_bytes(pointer(bufs), pg, d, length(d), C_NULL)
    end
    return [take!(Ref(b)) for b in bufs]
end

# ---------------------------------------------------------------- the reducer

"""
c10d's Reducer over gradient arrays `grads` (kept referenced: the reducer
reads them at mark_ready! and writes the averages at finalize!).
"""
mutable struct Reducer
    ptr::Ptr{L.distc_reducer}
    pg::ProcessGroup
    grads::Vector
    function Reducer(pg::ProcessGroup, grads::Vector; bucket_cap_bytes::Integer = 0)
        shapes = [Ref{Int64}(0) for _ in grads]
        out = Ref{Ptr{L.distc_reducer}}(C_NULL)
        GC.@preserve grads shapes begin
            ts = [dltensor(g, s) for (g, s) in zip(grads, shapes)]
            GC.@preserve ts begin
                ptrs = [pointer(ts, i) for i in eachindex(ts)]
                # version, bucket cap, first bucket, bucket_of, find_unused, views, expect_sparse, stream,
                # static_graph
                opts = Ref(L.distc_reducer_options(L.DISTC_REDUCER_OPTIONS_VERSION, bucket_cap_bytes, 0, C_NULL, 0, 0,
                                                   C_NULL, C_NULL, 0))
                L.distc_reducer_new(out, pg, ptrs, length(ptrs), opts)
            end
        end
        r = new(out[], pg, grads)
        finalizer(close, r)
        return r
    end
end

# ---------------------------------------------------------------- shared memory

"""
    shared_zeros(T, dims...) -> Array{T}

An array of zeros in memory the ranks of this host share (`distc_mem_alloc`):
large collectives on it copy and reduce between the ranks' arrays with loads
and stores instead of the kernel's copies. Any array works with every call;
this one is faster from a few MiB. Its memory goes when the array is
garbage collected.
"""
function shared_zeros(::Type{T}, dims::Integer...) where {T}
    isbitstype(T) || throw(ArgumentError("shared_zeros: $T is not a plain data type"))
    any(d -> d < 0, dims) && throw(ArgumentError("shared_zeros: negative dimension in $dims"))
    shape = map(Int, dims)
    p = Ref{Ptr{Cvoid}}(C_NULL)
    L.distc_mem_alloc(p, max(prod(shape; init = 1) * sizeof(T), 1))
    A = unsafe_wrap(Array, Ptr{T}(p[]), shape; own = false)
    # The zeroed pages are zeros of every plain type; they are ours to free.
    finalizer(a -> L.distc_mem_free(pointer(a)), A)
    return A
end

# ---------------------------------------------------------------- handles

# Every handle type: `close` frees it once (the finalizers call it too), and
# ccall takes it where the C function wants its pointer.
for (T, C, free, what) in ((:Store, :(L.distc_store), :(L.distc_store_free), "store"),
                           (:ProcessGroup, :(L.distc_pg), :(L.distc_pg_free), "process group"),
                           (:Reducer, :(L.distc_reducer), :(L.distc_reducer_free), "reducer"))
    @eval begin
        function Base.close(h::$T)
            if h.ptr != C_NULL
                $free(h.ptr)
                h.ptr = C_NULL
            end
            return nothing
        end

        function Base.unsafe_convert(::Type{Ptr{$C}}, h::$T)
            h.ptr == C_NULL && throw(ArgumentError(string("the ", $what, " was closed")))
            return h.ptr
        end
    end
end
prepare!(r::Reducer) = (L.distc_reducer_prepare_for_backward(r, C_NULL, 0); nothing)
mark_ready!(r::Reducer, i::Integer) = (L.distc_reducer_mark_ready(r, i - 1); nothing)  # 1-based, as Julia
finalize!(r::Reducer) = (L.distc_reducer_finalize(r); nothing)

end # module

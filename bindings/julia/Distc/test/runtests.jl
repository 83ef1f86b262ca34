# Tests of the Julia package. NOT RUN on distc's CI machine (no Julia runtime
# can be installed there); they are parsed for syntax by tree-sitter. Run
# them with: DISTC_LIB=/path/to/libdistc.so julia --project=. -e 'using Pkg; Pkg.test()'
using Test
using Distc
const L = Distc.LibDistc

@testset "every header function has a wrapper" begin
    for f in L.FUNCTIONS
        @test isdefined(L, f)
    end
end

@testset "stores" begin
    s = HashStore()
    setkey!(s, "k", "v")
    @test String(getkey(s, "k")) == "v"
    @test addkey!(s, "n", 5) == 5
    @test checkkeys(s, ["k", "n"])
    @test !checkkeys(s, ["missing"])
    @test deletekey!(s, "k")
    p = PrefixStore("pre", s)
    setkey!(p, "x", "1")
    @test String(getkey(s, "pre/x")) == "1"
    @test_throws DistcError waitkeys(s, ["never"]; timeout_ms = 50)
    close(s)
    @test_throws ArgumentError setkey!(s, "k", "v")
end

# Ranks as tasks need two threads: a rank blocked in the library holds its thread.
@testset "collectives with threads as ranks" begin
    if Threads.nthreads() < 2
        @info "skipped: start julia with -t 2 (ranks block their threads while they wait)"
    else
        n = 2
        store = HashStore()
        results = Vector{Any}(undef, n)
        tasks = [Threads.@spawn begin
                     pg = ProcessGroup(store, r, n; timeout_ms = 20_000)
                     A = fill(Float32(r + 1), 4)
                     allreduce!(pg, A)
                     B = zeros(Int64, 2n)
                     allgather!(pg, B, Int64[r, -r])
                     C = [r == 1 ? 7.5 : 0.0]
                     bcast!(pg, C; root = 1)
                     results[r + 1] = (A, B, C)
                     close(pg)
                 end for r in 0:n-1]
        foreach(wait, tasks)
        for r in 1:n
            A, B, C = results[r]
            @test all(A .== 3)
            @test B == [0, 0, 1, -1]
            @test C == [7.5]
        end
    end
end

@testset "shared memory" begin
    A = shared_zeros(Float32, 3, 4)
    @test size(A) == (3, 4) && all(A .== 0)
    A .= 2
    pg = ProcessGroup(HashStore(), 0, 1)
    allreduce!(pg, A)
    @test all(A .== 2)
    close(pg)
    @test_throws ArgumentError shared_zeros(Float64, -1)
    @test_throws ArgumentError shared_zeros(String, 2)
end

@testset "errors carry the library's message" begin
    pg = ProcessGroup(HashStore(), 0, 1)
    err = try
        allreduce!(pg, [1.0]; op = BAND)
        nothing
    catch e
        e
    end
    @test err isa DistcError
    @test occursin("BAND", err.msg)
    @test_throws ArgumentError allreduce!(pg, view(zeros(4, 4), 1, :))
end

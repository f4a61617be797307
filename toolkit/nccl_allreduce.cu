// nccl_allreduce.cu — the GPU side of data parallelism (toolkit/distributed.cpp): NCCL's
// all-reduce over the CUDA backend's gradient buffer, in place on the device.
//
// Built by the Makefile as build/libtransformer_nccl.so when nvcc and nccl.h are found, linked
// with libnccl and the CUDA runtime; distributed.cpp loads it (dlopen) only in an MPI job whose
// model lives on the GPU, so CPU runs and the other programs never map NCCL. MPI does the
// bootstrapping: rank 0 calls tnccl_unique_id, MPI broadcasts those bytes, every rank calls
// tnccl_init with them.
//
// The CUDA backend queues its kernels on the legacy default stream; the all-reduce goes on the
// same stream (so it follows the backward pass and precedes Adam) and is waited for, so that a
// failure surfaces here, at the step that caused it.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

static bool nccl_ok(ncclResult_t r, const char* what, std::string* error) {
    if (r == ncclSuccess) return true;
    *error = std::string(what) + ": " + ncclGetErrorString(r);
    return false;
}

extern "C" int tnccl_id_bytes() { return (int)sizeof(ncclUniqueId); }

// Rank 0: a fresh id (NCCL_UNIQUE_ID_BYTES bytes) into id.
extern "C" bool tnccl_unique_id(void* id, std::string* error) {
    return nccl_ok(ncclGetUniqueId((ncclUniqueId*)id), "ncclGetUniqueId", error);
}

// Every rank, with rank 0's id: the communicator on the current GPU (the one the backend set).
extern "C" void* tnccl_init(const void* id, int rank, int size, std::string* error) {
    ncclComm_t comm = nullptr;
    ncclUniqueId uid = *(const ncclUniqueId*)id;
    if (!nccl_ok(ncclCommInitRank(&comm, size, uid, rank), "ncclCommInitRank", error)) return nullptr;
    return comm;
}

// dev (n floats, on the GPU) = the sum of every rank's dev, in place.
extern "C" bool tnccl_all_reduce_sum(void* comm, float* dev, size_t n, std::string* error) {
    if (!nccl_ok(ncclAllReduce(dev, dev, n, ncclFloat32, ncclSum, (ncclComm_t)comm, 0), "ncclAllReduce", error))
        return false;
    cudaError_t e = cudaStreamSynchronize(0);
    if (e != cudaSuccess) {
        *error = std::string("after ncclAllReduce: ") + cudaGetErrorString(e);
        return false;
    }
    return true;
}

extern "C" void tnccl_destroy(void* comm) {
    if (comm) ncclCommDestroy((ncclComm_t)comm);
}

// test/cuda_emulator/include/nccl.h — NCCL's stand-in for the CUDA emulator: the calls
// toolkit/nccl_allreduce.cu makes, over MPI, so that a GPU MPI run of ./train takes its NCCL path
// on a machine without a GPU (test/test_dist_cuda.sh, make test). The ranks are processes on
// this machine and device memory is host memory here, so the all-reduce is MPI_Allreduce on
// the buffer itself. Not NCCL: one communicator over MPI_COMM_WORLD, float sums only, the
// unique id a tag that says it came from here.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>

#include "cuda_runtime.h"

typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4 } ncclResult_t;
typedef enum { ncclFloat32 = 7, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
struct ncclComm { int rank, size; };
typedef struct ncclComm* ncclComm_t;

static const char NCCL_EMULATED_ID[] = "cuda emulator: MPI_COMM_WORLD";

inline const char* ncclGetErrorString(ncclResult_t r) {
    return r == ncclSuccess ? "no error" : r == ncclInvalidArgument ? "invalid argument (emulated NCCL)"
                                                                    : "system error (emulated NCCL: MPI failed)";
}

inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::memset(id->internal, 0, sizeof id->internal);
    std::memcpy(id->internal, NCCL_EMULATED_ID, sizeof NCCL_EMULATED_ID);
    return ncclSuccess;
}

// The communicator of `nranks` with this process as `rank`: MPI_COMM_WORLD's, which must agree.
inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    int world_rank = -1, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (std::memcmp(id.internal, NCCL_EMULATED_ID, sizeof NCCL_EMULATED_ID) != 0 || nranks != world_size ||
        rank != world_rank)
        return ncclInvalidArgument;
    *comm = new ncclComm{rank, nranks};
    return ncclSuccess;
}

// recv (count floats) = the sum over the ranks of send, in chunks that fit MPI's int counts.
inline ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t) {
    if (!comm || type != ncclFloat32 || op != ncclSum) return ncclInvalidArgument;
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
    const size_t chunk = (size_t)1 << 30;
    for (size_t i = 0; i < count; i += chunk) {
        const int n = (int)(count - i < chunk ? count - i : chunk);
        if (MPI_Allreduce(MPI_IN_PLACE, (float*)recv + i, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return ncclSystemError;
    }
    return ncclSuccess;
}

inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    delete comm;
    return ncclSuccess;
}

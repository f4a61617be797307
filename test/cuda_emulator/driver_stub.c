// test/cuda_emulator/driver_stub.c — the NVIDIA driver's stand-in (libcuda.so.1) for the CUDA
// emulator: the calls toolkit/distributed.cpp makes to name a rank's GPU (cuInit, cuDeviceGet,
// cuDeviceGetUuid_v2), so that two MPI ranks given one GPU are seen on a machine without one
// (test/test_dist.sh compiles it; TRANSFORMER_CUDA_EMULATOR_DRIVER names it). Device 0's UUID
// is the first entry of CUDA_VISIBLE_DEVICES ("0" when unset), as a GPU's UUID follows the
// entry that selects it. Not a driver: no contexts, no memory, one device.
// Drivers that cannot name the GPU, for the tests: DRIVER_STUB_INIT_FAILS=1 makes cuInit fail
// (CUDA_ERROR_NO_DEVICE, as a driver with no GPU visible); compiled with -DSTUB_WITHOUT_INIT or
// -DSTUB_WITHOUT_UUID, the library lacks cuInit or cuDeviceGetUuid_v2.
#include <stdlib.h>
#include <string.h>

#ifndef STUB_WITHOUT_INIT
int cuInit(unsigned flags) {
    const char* fails = getenv("DRIVER_STUB_INIT_FAILS");
    if (fails && strcmp(fails, "1") == 0) return 100;   // CUDA_ERROR_NO_DEVICE
    return flags == 0 ? 0 : 1;
}
#endif
int cuDeviceGetCount(int* count) { *count = 1; return 0; }
int cuDeviceGet(int* device, int ordinal) {
    *device = ordinal;
    return ordinal == 0 ? 0 : 101;   // CUDA_ERROR_INVALID_DEVICE
}
#ifndef STUB_WITHOUT_UUID
int cuDeviceGetUuid_v2(unsigned char uuid[16], int device) {
    if (device != 0) return 101;
    const char* visible = getenv("CUDA_VISIBLE_DEVICES");
    const char* name = visible && *visible ? visible : "0";
    memset(uuid, 0, 16);
    for (int i = 0; i < 16 && name[i] && name[i] != ','; i++) uuid[i] = (unsigned char)name[i];
    return 0;
}
#endif

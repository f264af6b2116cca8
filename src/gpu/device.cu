// Which CUDA devices this process can use (docs/gpu.md).
#include <cuda_runtime.h>
#include <stdio.h>

#include "gpu/gpu.h"

extern "C" bool ts_gpu_built(void) { return true; }

extern "C" int ts_gpu_devices(char *why, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        // cudaGetDeviceCount fails (no driver, no device) rather than
        // answering 0 on most machines without a GPU; clear the sticky
        // error so a later call does not see it.
        (void)cudaGetLastError();
        if (why && n)
            snprintf(why, n, "no usable CUDA device (the CUDA runtime says: %s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    if (why && n) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            snprintf(why, n, "%d CUDA device%s; using 0: %s (sm_%d%d, %.1f GiB)", count, count == 1 ? "" : "s", p.name,
                     p.major, p.minor, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
        else
            snprintf(why, n, "%d CUDA device%s", count, count == 1 ? "" : "s");
    }
    return count;
}

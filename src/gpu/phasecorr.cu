// Batched phase correlation on the GPU (docs/gpu.md, "Registration"): the
// surfaces of many strip pairs in three cuFFT calls (one R2C of every
// strip, one C2R of every pair's normalised cross-power spectrum) on one
// stream, with the spectrum arithmetic of phasecorr.c in between. Peak
// picking, NCC and the sub-pixel refinement stay on the CPU. Not yet called
// by estimate: the seam is this one function, and the tolerance against
// FFTW is still to be measured on a device.
//
// Stream ordering: everything (copies in, transforms, kernels, copy out)
// is on one stream, bound to both plans with cufftSetStream; the host
// reads surf only after cudaStreamSynchronize, and frees the device
// buffers after it.
#include <cuda_runtime.h>
#include <cufft.h>
#include <float.h>

extern "C" {
#include "common/error.h"
}
#include "gpu/gpu.h"

#define CK(call)                                                                                           \
    do {                                                                                                   \
        cudaError_t e_ = (call);                                                                           \
        if (e_ != cudaSuccess) {                                                                           \
            st = ts_fail(err, TS_ERR_INTERNAL, "CUDA: %s failed: %s", #call, cudaGetErrorString(e_));      \
            goto done;                                                                                     \
        }                                                                                                  \
    } while (0)
#define CKF(call)                                                                                          \
    do {                                                                                                   \
        cufftResult r_ = (call);                                                                           \
        if (r_ != CUFFT_SUCCESS) {                                                                         \
            st = ts_fail(err, r_ == CUFFT_ALLOC_FAILED ? TS_ERR_NOMEM : TS_ERR_INTERNAL,                   \
                         "cuFFT: %s failed (cufftResult %d)", #call, (int)r_);                             \
            goto done;                                                                                     \
        }                                                                                                  \
    } while (0)

// A conj(B) into B's slot and its magnitude (as phasecorr.c: float
// products, magnitude through double).
__global__ void cross_power(cufftComplex *spec, float *mag, long long n, long long nc) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long i = blockIdx.y;
    if (j >= nc) return;
    cufftComplex A = spec[i * nc + j], *Bp = &spec[(n + i) * nc + j], B = *Bp;
    float re = __fadd_rn(__fmul_rn(A.x, B.x), __fmul_rn(A.y, B.y));
    float im = __fsub_rn(__fmul_rn(A.y, B.x), __fmul_rn(A.x, B.y));
    Bp->x = re;
    Bp->y = im;
    mag[i * nc + j] = (float)sqrt((double)re * (double)re + (double)im * (double)im);
}

// The mean magnitude of each pair (one thread block per pair; a tree sum
// in double, not phasecorr.c's running sum: eps may differ in its last
// bits).
__global__ void pair_sum(const float *mag, double *sum, long long nc) {
    __shared__ double part[256];
    long long i = blockIdx.x;
    double s = 0;
    for (long long j = threadIdx.x; j < nc; j += blockDim.x) s += mag[i * nc + j];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) sum[i] = part[0];
}

__global__ void whiten(cufftComplex *spec, const float *mag, const double *sum, const float *g, long long n,
                       long long nc) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long i = blockIdx.y;
    if (j >= nc) return;
    cufftComplex *Bp = &spec[(n + i) * nc + j];
    if (j == 0) {  // the means were removed
        Bp->x = Bp->y = 0.0f;
        return;
    }
    float eps = __fadd_rn((float)(1e-6 * sum[i] / (double)nc), FLT_MIN);
    float s = __fdiv_rn(g ? g[j] : 1.0f, __fadd_rn(mag[i * nc + j], eps));
    Bp->x = __fmul_rn(Bp->x, s);
    Bp->y = __fmul_rn(Bp->y, s);
}

extern "C" ts_status ts_gpu_phasecorr_batch(const float *a, const float *b, int64_t n, int64_t h, int64_t w,
                                            const float *gspec, float *surf, ts_error *err) {
    char why[512];
    if (ts_gpu_devices(why, sizeof why) <= 0) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", why);
    if (n <= 0 || h <= 0 || w <= 0 || h > INT32_MAX || w > INT32_MAX || 2 * n > INT32_MAX)
        return ts_fail(err, TS_ERR_ARG, "GPU phase correlation: %lld pairs of %lldx%lld px",
                       (long long)n, (long long)h, (long long)w);
    ts_status st = TS_OK;
    const long long N = h * w, wc = w / 2 + 1, NC = h * wc;
    int dims[2] = {(int)h, (int)w};
    float *d_real = NULL, *d_mag = NULL, *d_g = NULL;
    cufftComplex *d_spec = NULL;
    double *d_sum = NULL;
    cufftHandle fwd = 0, inv = 0;
    bool have_fwd = false, have_inv = false;
    cudaStream_t stream = NULL;
    dim3 grid((unsigned)((NC + 255) / 256), (unsigned)n);
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaMallocAsync((void **)&d_real, (size_t)(2 * n * N) * sizeof(float), stream));
    CK(cudaMallocAsync((void **)&d_spec, (size_t)(2 * n * NC) * sizeof(cufftComplex), stream));
    CK(cudaMallocAsync((void **)&d_mag, (size_t)(n * NC) * sizeof(float), stream));
    CK(cudaMallocAsync((void **)&d_sum, (size_t)n * sizeof(double), stream));
    if (gspec) {
        CK(cudaMallocAsync((void **)&d_g, (size_t)NC * sizeof(float), stream));
        CK(cudaMemcpyAsync(d_g, gspec, (size_t)NC * sizeof(float), cudaMemcpyHostToDevice, stream));
    }
    CK(cudaMemcpyAsync(d_real, a, (size_t)(n * N) * sizeof(float), cudaMemcpyHostToDevice, stream));
    CK(cudaMemcpyAsync(d_real + n * N, b, (size_t)(n * N) * sizeof(float), cudaMemcpyHostToDevice, stream));
    CKF(cufftPlanMany(&fwd, 2, dims, NULL, 1, (int)N, NULL, 1, (int)NC, CUFFT_R2C, (int)(2 * n)));
    have_fwd = true;
    CKF(cufftPlanMany(&inv, 2, dims, NULL, 1, (int)NC, NULL, 1, (int)N, CUFFT_C2R, (int)n));
    have_inv = true;
    CKF(cufftSetStream(fwd, stream));
    CKF(cufftSetStream(inv, stream));
    CKF(cufftExecR2C(fwd, d_real, d_spec));
    cross_power<<<grid, 256, 0, stream>>>(d_spec, d_mag, n, NC);
    CK(cudaGetLastError());
    pair_sum<<<(unsigned)n, 256, 0, stream>>>(d_mag, d_sum, NC);
    CK(cudaGetLastError());
    whiten<<<grid, 256, 0, stream>>>(d_spec, d_mag, d_sum, d_g, n, NC);
    CK(cudaGetLastError());
    // The surfaces into the first half of d_real (the strips are spent).
    CKF(cufftExecC2R(inv, d_spec + n * NC, d_real));
    CK(cudaMemcpyAsync(surf, d_real, (size_t)(n * N) * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
done:
    if (stream) cudaStreamSynchronize(stream);  // nothing is freed under a running transform
    if (have_fwd) cufftDestroy(fwd);
    if (have_inv) cufftDestroy(inv);
    if (stream) {
        void *bufs[5] = {d_real, d_spec, d_mag, d_sum, d_g};
        for (int k = 0; k < 5; k++)
            if (bufs[k]) cudaFreeAsync(bufs[k], stream);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    return st;
}

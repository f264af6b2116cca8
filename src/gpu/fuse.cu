// Fusion on the GPU (docs/gpu.md): one block at a time per pipeline worker,
// each worker with its own stream and buffers.
//
// Determinism: every output pixel is a gather over the block's strips in
// the order the CPU blends them (process_block, blend.c), with the CPU
// kernels' float operations written as explicit round-to-nearest
// intrinsics (__fmul_rn, __fadd_rn, __fdiv_rn: nvcc may not contract
// them into FMAs) and the build's --fmad=false -ftz=false -prec-div=true
// for anything else. Weights are the CPU's weight images (uploaded, not
// recomputed: device powf differs from glibc's pow). So the bytes are the
// CPU's (tests/unit/test_gpu.c checks it on a device).
//
// Stream ordering, all explicit:
//  1. a strip is uploaded once (per band: the pipeline frees it after its
//     last block) on the stream of the worker that first needs it, through
//     that worker's pinned staging buffer, and an event `ready` recorded
//     after the copy; every block that uses it, on any stream, first does
//     cudaStreamWaitEvent(stream, ready);
//  2. a worker's staging buffer is rewritten only after cudaEventSynchronize
//     on the event recorded after its last copy (stage_free);
//  3. a worker's descriptor and level buffers are reused only by its next
//     block, and each block ends with cudaStreamSynchronize on its stream
//     (the device-to-host copies have landed before the host reads them);
//  4. a strip's device copy is freed (stream-ordered, on the release
//     stream, after waiting on `ready`) only when the pipeline frees the
//     host strip, which it does after every block using it has returned
//     from ts_gpu_fuse_block, i.e. after rule 3's synchronisation.
#include <cuda_runtime.h>
#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/error.h"
}
#include "gpu/gpu.h"

#define CK(call)                                                                                          \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess)                                                                            \
            return ts_fail(err, TS_ERR_INTERNAL, "CUDA: %s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), \
                           __FILE__, __LINE__);                                                           \
    } while (0)

namespace {

// One strip as a kernel sees it.
struct dev_strip {
    const void *data;       // device elements; data[origin + c*plane + (ty-r0)*row_step + tx]
    const float *wimg;      // the tile shape's weights, h x w
    long long origin, plane, row_step;
    long long ya, yb, xa, xb; // canvas rows [ya, yb), columns [xa, xb) it covers
    long long oy, ox, w, r0;
    int nc, u16;
};

struct up_strip {
    const void *key, *host;
    long long origin, r0;
    void *d;
    cudaEvent_t ready;
    up_strip *next;
};

struct worker {
    cudaStream_t stream;
    unsigned char *d_levels, *h_levels;  // every level's block, device and pinned host
    size_t levels_bytes;
    dev_strip *d_desc, *h_desc;          // the block's strips
    int desc_cap;
    unsigned char *h_stage;              // pinned upload staging
    size_t stage_cap;
    cudaEvent_t stage_free;
    bool stage_used;
};

}  // namespace

struct ts_gpu_fuse {
    ts_gpu_fuse_config cfg;
    int64_t (*shapes)[2];
    float **d_weights;
    size_t level_off[TS_GPU_MAX_LEVELS + 1];
    worker *w;
    cudaStream_t release;
    pthread_mutex_t mu;   // guards strips and the uploads into them
    up_strip *strips;
};

// ---------------------------------------------------------------- kernels
// Each mirrors the kernels_body.h function of the same name element for
// element.

__device__ __forceinline__ float at_least_min(float d) { return d > FLT_MIN ? d : FLT_MIN; }

__device__ __forceinline__ unsigned short to_u16(float num, float den) {
    float q = __fdiv_rn(num, at_least_min(den));
    q = __fadd_rn(q, 0.5f);
    q = q >= 0.0f ? q : 0.0f;
    q = q <= 65535.0f ? q : 65535.0f;
    return (unsigned short)__float2int_rz(q);
}

// Level 0 of a block: C x B x B; pixels outside the canvas are 0, as the
// CPU's memsets leave them.
// The strips are staged in shared memory when they fit (shared != 0),
// else read from global memory (blocks of thousands of small tiles).
__global__ void blend_block(unsigned char *out, int f32, long long B, long long y0, long long x0, long long y1,
                            long long x1, const dev_strip *strips, int n, int shared) {
    extern __shared__ dev_strip s_strips[];
    if (shared) {
        for (int k = threadIdx.y * blockDim.x + threadIdx.x; k < n; k += blockDim.x * blockDim.y)
            s_strips[k] = strips[k];
        __syncthreads();
    }
    const dev_strip *S = shared ? s_strips : strips;
    long long bxx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long byy = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.z;
    if (bxx >= B || byy >= B) return;
    long long y = y0 + byy, x = x0 + bxx;
    size_t at = ((size_t)c * B + byy) * B + bxx;
    if (y >= y1 || x >= x1) {
        if (f32) ((float *)out)[at] = 0.0f;
        else ((unsigned short *)out)[at] = 0;
        return;
    }
    float num = 0.0f, den = 0.0f;
    for (int k = 0; k < n; k++) {  // the CPU's order: a gather, no atomics
        const dev_strip &s = S[k];
        if (c >= s.nc || y < s.ya || y >= s.yb || x < s.xa || x >= s.xb) continue;
        long long ty = y - s.oy, tx = x - s.ox;
        long long e = s.origin + c * s.plane + (ty - s.r0) * s.row_step + tx;
        float v = s.u16 ? (float)((const unsigned short *)s.data)[e] : ((const float *)s.data)[e];
        float w = s.wimg[ty * s.w + tx];
        w = v != 0.0f ? w : 0.0f;
        num = __fadd_rn(num, __fmul_rn(w, v));
        den = __fadd_rn(den, w);
    }
    if (f32) ((float *)out)[at] = __fdiv_rn(num, at_least_min(den));
    else ((unsigned short *)out)[at] = to_u16(num, den);
}

// 2x mean of an h x w region of src (row stride `stride`) into dst; one
// thread per output pixel of ceil(h/2) x ceil(w/2), channel blockIdx.z.
__global__ void downsample(unsigned char *dst_base, long long dst_stride, long long dst_plane,
                           const unsigned char *src_base, long long stride, long long src_plane, long long h,
                           long long w, int f32) {
    long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long y = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    long long oh = (h + 1) / 2, ow = (w + 1) / 2, full = w / 2;
    if (x >= ow || y >= oh) return;
    int c = blockIdx.z;
    bool two = 2 * y + 1 < h;
    if (f32) {
        const float *r0 = (const float *)src_base + c * src_plane + 2 * y * stride;
        const float *r1 = two ? r0 + stride : r0;
        float *d = (float *)dst_base + c * dst_plane + y * dst_stride;
        float v;
        if (x < full)
            v = two ? __fmul_rn(__fadd_rn(__fadd_rn(__fadd_rn(r0[2 * x], r0[2 * x + 1]), r1[2 * x]), r1[2 * x + 1]), 0.25f)
                    : __fmul_rn(__fadd_rn(r0[2 * x], r0[2 * x + 1]), 0.5f);
        else
            v = two ? __fmul_rn(__fadd_rn(r0[w - 1], r1[w - 1]), 0.5f) : r0[w - 1];
        d[x] = v;
    } else {
        const unsigned short *r0 = (const unsigned short *)src_base + c * src_plane + 2 * y * stride;
        const unsigned short *r1 = two ? r0 + stride : r0;
        unsigned short *d = (unsigned short *)dst_base + c * dst_plane + y * dst_stride;
        unsigned int ny = two ? 2 : 1;
        if (x < full)
            d[x] = two ? (unsigned short)(((unsigned int)r0[2 * x] + r0[2 * x + 1] + r1[2 * x] + r1[2 * x + 1] + 2) / 4)
                       : (unsigned short)(((unsigned int)r0[2 * x] + r0[2 * x + 1] + 1) / 2);
        else
            d[x] = (unsigned short)(((unsigned int)r0[w - 1] + (two ? r1[w - 1] : 0u) + ny / 2) / ny);
    }
}

// Row kernels alone (ts_gpu_test_*).
__global__ void accumulate_row(float *num, float *den, const void *v, int u16, const float *w, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float vi = u16 ? (float)((const unsigned short *)v)[i] : ((const float *)v)[i], wi = w[i];
    wi = vi != 0.0f ? wi : 0.0f;
    num[i] = __fadd_rn(num[i], __fmul_rn(wi, vi));
    den[i] = __fadd_rn(den[i], wi);
}

__global__ void normalise_row(void *out, int f32, const float *num, const float *den, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (f32) ((float *)out)[i] = __fdiv_rn(num[i], at_least_min(den[i]));
    else ((unsigned short *)out)[i] = to_u16(num[i], den[i]);
}

// ---------------------------------------------------------------- host side

static size_t out_elem(const ts_gpu_fuse *g) { return g->cfg.f32 ? 4 : 2; }

extern "C" ts_status ts_gpu_fuse_create(const ts_gpu_fuse_config *cfg, ts_gpu_fuse **out, ts_error *err) {
    *out = NULL;
    char why[512];
    if (ts_gpu_devices(why, sizeof why) <= 0) return ts_fail(err, TS_ERR_UNSUPPORTED, "--device gpu: %s", why);
    if (cfg->levels + 1 > TS_GPU_MAX_LEVELS || cfg->nworkers < 1)
        return ts_fail(err, TS_ERR_INTERNAL, "GPU fusion: %d levels, %d workers", cfg->levels, cfg->nworkers);
    ts_gpu_fuse *g = (ts_gpu_fuse *)calloc(1, sizeof *g);
    if (!g) return ts_fail(err, TS_ERR_NOMEM, "GPU fusion context");
    g->cfg = *cfg;
    pthread_mutex_init(&g->mu, NULL);
    *out = g;  // from here on ts_gpu_fuse_destroy frees what was made
    g->shapes = (int64_t(*)[2])calloc((size_t)cfg->nshapes + 1, sizeof *g->shapes);
    g->d_weights = (float **)calloc((size_t)cfg->nshapes + 1, sizeof *g->d_weights);
    g->w = (worker *)calloc((size_t)cfg->nworkers, sizeof *g->w);
    if (!g->shapes || !g->d_weights || !g->w) return ts_fail(err, TS_ERR_NOMEM, "GPU fusion context");
    g->cfg.shapes = g->shapes;
    g->cfg.weights = NULL;
    CK(cudaStreamCreateWithFlags(&g->release, cudaStreamNonBlocking));
    // The weight images, once (waited for below, before any block).
    for (int k = 0; k < cfg->nshapes; k++) {
        g->shapes[k][0] = cfg->shapes[k][0];
        g->shapes[k][1] = cfg->shapes[k][1];
        size_t bytes = (size_t)(cfg->shapes[k][0] * cfg->shapes[k][1]) * sizeof(float);
        CK(cudaMalloc((void **)&g->d_weights[k], bytes ? bytes : 1));
        CK(cudaMemcpy(g->d_weights[k], cfg->weights[k], bytes, cudaMemcpyHostToDevice));
    }
    size_t off = 0;
    for (int k = 0; k <= cfg->levels; k++) {
        g->level_off[k] = off;
        int64_t Bk = cfg->block >> k;
        off += (size_t)(cfg->C * Bk * Bk) * out_elem(g);
        off = (off + 255) / 256 * 256;
    }
    g->level_off[cfg->levels + 1] = off;
    for (int i = 0; i < cfg->nworkers; i++) {
        worker *w = &g->w[i];
        CK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&w->stage_free, cudaEventDisableTiming));
        // Level buffers at the worker's first block (most workers of a
        // many-core host may never blend one).
    }
    // cudaMemcpy from pageable memory may return before its DMA has
    // landed, and the workers' non-blocking streams are not ordered after
    // the legacy stream it ran on: wait for the weights here.
    CK(cudaDeviceSynchronize());
    return TS_OK;
}

static void strip_drop(ts_gpu_fuse *g, up_strip *s) {
    // Rule 4: ordered after the upload; the blocks that read it have
    // finished (the pipeline frees strips after their last block).
    cudaStreamWaitEvent(g->release, s->ready, 0);
    cudaFreeAsync(s->d, g->release);
    cudaEventDestroy(s->ready);
    free(s);
}

extern "C" void ts_gpu_fuse_destroy(ts_gpu_fuse *g) {
    if (!g) return;
    if (g->w)
        for (int i = 0; i < g->cfg.nworkers; i++) {
            worker *w = &g->w[i];
            if (w->stream) cudaStreamSynchronize(w->stream);
        }
    while (g->strips) {
        up_strip *s = g->strips;
        g->strips = s->next;
        strip_drop(g, s);
    }
    if (g->release) cudaStreamSynchronize(g->release);
    if (g->w)
        for (int i = 0; i < g->cfg.nworkers; i++) {
            worker *w = &g->w[i];
            cudaFree(w->d_levels);
            cudaFreeHost(w->h_levels);
            cudaFree(w->d_desc);
            cudaFreeHost(w->h_desc);
            cudaFreeHost(w->h_stage);
            if (w->stage_free) cudaEventDestroy(w->stage_free);
            if (w->stream) cudaStreamDestroy(w->stream);
        }
    if (g->d_weights)
        for (int k = 0; k < g->cfg.nshapes; k++) cudaFree(g->d_weights[k]);
    if (g->release) cudaStreamDestroy(g->release);
    pthread_mutex_destroy(&g->mu);
    free(g->d_weights);
    free(g->shapes);
    free(g->w);
    free(g);
}

extern "C" void ts_gpu_fuse_forget(ts_gpu_fuse *g, const void *key) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    for (up_strip **p = &g->strips; *p;) {
        up_strip *s = *p;
        if (s->key == key) {
            *p = s->next;
            strip_drop(g, s);
        } else {
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

// The element range [lo, hi) a strip's rows span in its host buffer
// (row_step may be negative: a tile flipped upside down).
static void strip_span(const ts_gpu_strip *s, long long *lo, long long *hi) {
    long long rows = s->r1 - s->r0, last = (rows - 1) * s->row_step;
    *lo = s->origin + (last < 0 ? last : 0);
    *hi = s->origin + (long long)(s->nc - 1) * s->plane + (last > 0 ? last : 0) + s->w;
}

// The device copy of strip s, uploaded on w's stream if there is none
// (rule 1). g->mu held.
static ts_status strip_device(ts_gpu_fuse *g, worker *w, const ts_gpu_strip *s, up_strip **out, ts_error *err) {
    for (up_strip *u = g->strips; u; u = u->next)
        if (u->key == s->key && u->host == s->data && u->origin == s->origin && u->r0 == s->r0) {
            *out = u;
            return TS_OK;
        }
    long long lo, hi;
    strip_span(s, &lo, &hi);
    size_t es = s->u16 ? 2 : 4, bytes = (size_t)(hi - lo) * es;
    if (bytes > w->stage_cap) {
        if (w->stage_used) CK(cudaEventSynchronize(w->stage_free));  // rule 2
        cudaFreeHost(w->h_stage);
        w->h_stage = NULL;
        w->stage_cap = 0;
        CK(cudaMallocHost((void **)&w->h_stage, bytes));
        w->stage_cap = bytes;
    }
    up_strip *u = (up_strip *)calloc(1, sizeof *u);
    if (!u) return ts_fail(err, TS_ERR_NOMEM, "GPU strip record");
    cudaError_t e = cudaEventCreateWithFlags(&u->ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMallocAsync(&u->d, bytes, w->stream);
    if (e != cudaSuccess) {
        if (u->ready) cudaEventDestroy(u->ready);
        free(u);
        return ts_fail(err, e == cudaErrorMemoryAllocation ? TS_ERR_NOMEM : TS_ERR_INTERNAL,
                       "CUDA: device copy of a strip of %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    // Keyed by the host strip (the copy starts at element lo of it; the
    // block's descriptor rebases origin by lo).
    u->key = s->key;
    u->host = s->data;
    u->origin = s->origin;
    u->r0 = s->r0;
    // Listed before the copy, so that a failure below leaves it to
    // ts_gpu_fuse_destroy (waiting on a never-recorded event is a no-op).
    u->next = g->strips;
    g->strips = u;
    if (w->stage_used) CK(cudaEventSynchronize(w->stage_free));  // rule 2
    memcpy(w->h_stage, (const unsigned char *)s->data + (size_t)lo * es, bytes);
    CK(cudaMemcpyAsync(u->d, w->h_stage, bytes, cudaMemcpyHostToDevice, w->stream));
    CK(cudaEventRecord(w->stage_free, w->stream));
    w->stage_used = true;
    CK(cudaEventRecord(u->ready, w->stream));
    *out = u;
    return TS_OK;
}

static ts_status worker_buffers(ts_gpu_fuse *g, worker *w, int n, ts_error *err) {
    size_t bytes = g->level_off[g->cfg.levels + 1];
    if (!w->d_levels) {
        CK(cudaMalloc((void **)&w->d_levels, bytes));
        CK(cudaMallocHost((void **)&w->h_levels, bytes));
        w->levels_bytes = bytes;
    }
    if (n > w->desc_cap) {
        // The previous block's copies are done (rule 3), so no sync here.
        cudaFree(w->d_desc);
        cudaFreeHost(w->h_desc);
        w->d_desc = NULL;
        w->h_desc = NULL;
        w->desc_cap = 0;
        int cap = n < 16 ? 16 : n;
        CK(cudaMalloc((void **)&w->d_desc, (size_t)cap * sizeof(dev_strip)));
        CK(cudaMallocHost((void **)&w->h_desc, (size_t)cap * sizeof(dev_strip)));
        w->desc_cap = cap;
    }
    return TS_OK;
}

extern "C" ts_status ts_gpu_fuse_block(ts_gpu_fuse *g, int worker_index, const ts_gpu_block *blk,
                                       const ts_gpu_strip *strips, int n, void *const *level_out, ts_error *err) {
    if (worker_index < 0 || worker_index >= g->cfg.nworkers)
        return ts_fail(err, TS_ERR_INTERNAL, "GPU fusion: worker %d of %d", worker_index, g->cfg.nworkers);
    worker *w = &g->w[worker_index];
    ts_status st = worker_buffers(g, w, n, err);
    if (st) return st;
    const long long B = g->cfg.block;
    // The strips on the device (uploaded here if they are not yet), the
    // descriptors in the CPU's order, and the waits on their uploads.
    int m = 0;
    pthread_mutex_lock(&g->mu);
    for (int k = 0; k < n && st == TS_OK; k++) {
        const ts_gpu_strip *s = &strips[k];
        if (s->nc <= 0) continue;
        long long ya = blk->y0 > s->oy + s->r0 ? blk->y0 : s->oy + s->r0;
        long long yb = s->oy + s->r1 < blk->y1 ? s->oy + s->r1 : blk->y1;
        long long xa = blk->x0 > s->ox ? blk->x0 : s->ox;
        long long xb = s->ox + s->w < blk->x1 ? s->ox + s->w : blk->x1;
        if (ya >= yb || xa >= xb) continue;
        up_strip *u = NULL;
        st = strip_device(g, w, s, &u, err);
        if (st) break;
        long long lo, hi;
        strip_span(s, &lo, &hi);
        cudaError_t e = cudaStreamWaitEvent(w->stream, u->ready, 0);  // rule 1
        if (e != cudaSuccess) {
            st = ts_fail(err, TS_ERR_INTERNAL, "CUDA: waiting on a strip upload: %s", cudaGetErrorString(e));
            break;
        }
        dev_strip d;
        d.data = u->d;
        d.wimg = g->d_weights[s->shape];
        d.origin = s->origin - lo;
        d.plane = s->plane;
        d.row_step = s->row_step;
        d.ya = ya, d.yb = yb, d.xa = xa, d.xb = xb;
        d.oy = s->oy, d.ox = s->ox, d.w = s->w, d.r0 = s->r0;
        d.nc = s->nc;
        d.u16 = s->u16;
        w->h_desc[m++] = d;
    }
    pthread_mutex_unlock(&g->mu);
    if (st) return st;
    if (m) CK(cudaMemcpyAsync(w->d_desc, w->h_desc, (size_t)m * sizeof(dev_strip), cudaMemcpyHostToDevice, w->stream));
    const int C = (int)g->cfg.C, f32 = g->cfg.f32;
    dim3 tb(32, 8);
    dim3 grid((unsigned)((B + 31) / 32), (unsigned)((B + 7) / 8), (unsigned)C);
    const size_t shared = (size_t)m * sizeof(dev_strip);
    const bool in_shared = shared <= 32768;  // well inside the 48 KiB every device has
    blend_block<<<grid, tb, in_shared ? shared : 0, w->stream>>>(w->d_levels + g->level_off[0], f32, B, blk->y0,
                                                                 blk->x0, blk->y1, blk->x1, w->d_desc, m,
                                                                 in_shared);
    CK(cudaGetLastError());
    for (int k = 1; k <= g->cfg.levels; k++) {
        long long Bk = B >> k, Bp = B >> (k - 1), hp = blk->hp[k], wp = blk->wp[k];
        unsigned char *dst = w->d_levels + g->level_off[k];
        CK(cudaMemsetAsync(dst, 0, (size_t)(C * Bk * Bk) * out_elem(g), w->stream));
        if (hp <= 0 || wp <= 0) continue;
        dim3 gd((unsigned)(((wp + 1) / 2 + 31) / 32), (unsigned)(((hp + 1) / 2 + 7) / 8), (unsigned)C);
        downsample<<<gd, tb, 0, w->stream>>>(dst, Bk, Bk * Bk, w->d_levels + g->level_off[k - 1], Bp, Bp * Bp, hp, wp,
                                              f32);
        CK(cudaGetLastError());
    }
    // Every level back in one copy, then rule 3.
    size_t bytes = g->level_off[g->cfg.levels + 1];
    CK(cudaMemcpyAsync(w->h_levels, w->d_levels, bytes, cudaMemcpyDeviceToHost, w->stream));
    CK(cudaStreamSynchronize(w->stream));
    for (int k = 0; k <= g->cfg.levels; k++) {
        long long Bk = B >> k;
        memcpy(level_out[k], w->h_levels + g->level_off[k], (size_t)(C * Bk * Bk) * out_elem(g));
    }
    return TS_OK;
}

// ---------------------------------------------------------------- test entry points

namespace {
struct dev_buf {
    void *p = nullptr;
    ~dev_buf() { cudaFree(p); }
};
}  // namespace

static ts_status need_device(ts_error *err) {
    char why[512];
    if (ts_gpu_devices(why, sizeof why) <= 0) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", why);
    return TS_OK;
}

extern "C" ts_status ts_gpu_test_accumulate(float *num, float *den, const void *v, bool u16, const float *w,
                                            int64_t n, ts_error *err) {
    ts_status st = need_device(err);
    if (st) return st;
    size_t fb = (size_t)n * 4, vb = (size_t)n * (u16 ? 2 : 4);
    dev_buf dn, dd, dv, dw;
    CK(cudaMalloc(&dn.p, fb + 1));
    CK(cudaMalloc(&dd.p, fb + 1));
    CK(cudaMalloc(&dv.p, vb + 1));
    CK(cudaMalloc(&dw.p, fb + 1));
    CK(cudaMemcpy(dn.p, num, fb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd.p, den, fb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv.p, v, vb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw.p, w, fb, cudaMemcpyHostToDevice));
    if (n > 0) accumulate_row<<<(unsigned)((n + 255) / 256), 256>>>((float *)dn.p, (float *)dd.p, dv.p, u16,
                                                                    (const float *)dw.p, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(num, dn.p, fb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(den, dd.p, fb, cudaMemcpyDeviceToHost));
    return TS_OK;
}

extern "C" ts_status ts_gpu_test_normalise(void *out, bool f32, const float *num, const float *den, int64_t n,
                                           ts_error *err) {
    ts_status st = need_device(err);
    if (st) return st;
    size_t fb = (size_t)n * 4, ob = (size_t)n * (f32 ? 4 : 2);
    dev_buf dn, dd, dout;
    CK(cudaMalloc(&dn.p, fb + 1));
    CK(cudaMalloc(&dd.p, fb + 1));
    CK(cudaMalloc(&dout.p, ob + 1));
    CK(cudaMemcpy(dn.p, num, fb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd.p, den, fb, cudaMemcpyHostToDevice));
    if (n > 0) normalise_row<<<(unsigned)((n + 255) / 256), 256>>>(dout.p, f32, (const float *)dn.p,
                                                                   (const float *)dd.p, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out, dout.p, ob, cudaMemcpyDeviceToHost));
    return TS_OK;
}

extern "C" ts_status ts_gpu_test_downsample(void *dst, int64_t dst_stride, const void *src, int64_t stride,
                                            int64_t h, int64_t w, bool f32, ts_error *err) {
    ts_status st = need_device(err);
    if (st) return st;
    size_t es = f32 ? 4 : 2, sb = (size_t)(h * stride) * es, db = (size_t)((h + 1) / 2 * dst_stride) * es;
    dev_buf ds, dd;
    CK(cudaMalloc(&ds.p, sb + 1));
    CK(cudaMalloc(&dd.p, db + 1));
    CK(cudaMemcpy(ds.p, src, sb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd.p, dst, db, cudaMemcpyHostToDevice));  // what the CPU leaves alone stays
    dim3 tb(32, 8), gd((unsigned)(((w + 1) / 2 + 31) / 32), (unsigned)(((h + 1) / 2 + 7) / 8), 1);
    if (h > 0 && w > 0)
        downsample<<<gd, tb>>>((unsigned char *)dd.p, dst_stride, 0, (const unsigned char *)ds.p, stride, 0, h, w, f32);
    CK(cudaGetLastError());
    CK(cudaMemcpy(dst, dd.p, db, cudaMemcpyDeviceToHost));
    return TS_OK;
}

/* The CUDA backend's entry points in a build without CUDA (-DTESSERA_CUDA=OFF,
 * or AUTO without nvcc): there is no GPU to run on, and each says so. */
#include <stdio.h>

#include "common/error.h"
#include "gpu/gpu.h"

#define NOT_BUILT "this tessera was built without the CUDA backend (configure with -DTESSERA_CUDA=ON; docs/gpu.md)"

bool ts_gpu_built(void) { return false; }

int ts_gpu_devices(char *why, size_t n) {
    if (why && n) snprintf(why, n, "%s", NOT_BUILT);
    return 0;
}

ts_status ts_gpu_fuse_create(const ts_gpu_fuse_config *cfg, ts_gpu_fuse **out, ts_error *err) {
    (void)cfg;
    *out = NULL;
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

void ts_gpu_fuse_destroy(ts_gpu_fuse *g) { (void)g; }

ts_status ts_gpu_fuse_block(ts_gpu_fuse *g, int worker, const ts_gpu_block *blk, const ts_gpu_strip *strips,
                            int n, void *const *level_out, ts_error *err) {
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

void ts_gpu_fuse_forget(ts_gpu_fuse *g, const void *key) { (void)g, (void)key; }

ts_status ts_gpu_test_accumulate(float *num, float *den, const void *v, bool u16, const float *w, int64_t n,
                                 ts_error *err) {
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

ts_status ts_gpu_test_normalise(void *out, bool f32, const float *num, const float *den, int64_t n,
                                ts_error *err) {
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

ts_status ts_gpu_test_downsample(void *dst, int64_t dst_stride, const void *src, int64_t stride, int64_t h,
                                 int64_t w, bool f32, ts_error *err) {
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

ts_status ts_gpu_phasecorr_batch(const float *a, const float *b, int64_t n, int64_t h, int64_t w,
                                 const float *gspec, float *surf, ts_error *err) {
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s", NOT_BUILT);
}

/* --device names and what GPU this process has (docs/gpu.md). */
#include <stdio.h>

#include "gpu/gpu.h"

const char *ts_device_name(ts_device d) {
    return d == TS_DEVICE_GPU ? "gpu" : d == TS_DEVICE_AUTO ? "auto" : "cpu";
}

bool ts_gpu_info(char *buf, size_t n) {
    char why[512];
    int count = ts_gpu_devices(why, sizeof why);
    if (buf && n) snprintf(buf, n, "%s", why);
    return count > 0;
}

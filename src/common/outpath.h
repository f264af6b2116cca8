/* Where an output may go. Every command checks its output paths against its
 * inputs before it writes anything: an output is never an input, never
 * inside one (fuse -o plate/A/1/x, estimate -o plate/zarr.json) and never
 * holds one (replacing it would delete the input), and it is never put
 * inside some other zarr store (a directory holding zarr.json, .zgroup,
 * .zarray or .zattrs), whose metadata or chunks it would overwrite or sit
 * beside. Paths are compared after resolving symlinks and "..", so another
 * spelling of the same place is caught too. */
#ifndef TS_COMMON_OUTPATH_H
#define TS_COMMON_OUTPATH_H

#include <stdbool.h>

#include "tessera/tessera.h"

/* what names the output in messages ("output", "--truth", "--shifts-out");
 * inputs (n of them, NULL entries skipped) are the run's input paths. */
ts_status ts_check_output_path(const char *what, const char *output, const char *const *inputs, int n,
                               ts_error *err);

/* Whether dir holds zarr metadata (zarr.json, .zgroup, .zarray, .zattrs). */
bool ts_is_zarr_node(const char *dir);

#endif

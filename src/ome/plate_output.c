/* See ome.h (ts_plate_output): the one way import and simulate write a
 * plate of tiles. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/outpath.h"
#include "ome/ome.h"

ts_status ts_plate_output_begin(ts_plate_output *po, const char *output, const char *command,
                                const char *const *inputs, int ninputs, ts_error *err) {
    memset(po, 0, sizeof *po);
    ts_status st = ts_check_output_path("output", output, inputs, ninputs, err);
    if (st) return st;
    if ((st = ts_output_lock_acquire(&po->lock, output, command, err)) != TS_OK) return st;
    bool exists = false;
    st = ts_store_check_kind(output, TS_STORE_TILE_PLATE, NULL, &exists, err);
    if (st == TS_OK && exists) st = ts_tree_check_own(output, err);
    if (st == TS_OK) st = ts_staged_begin(&po->staged, output, err);
    if (st) ts_output_lock_release(&po->lock);
    else po->active = true;
    return st;
}

ts_status ts_plate_output_end(ts_plate_output *po, ts_status st, ts_error *err) {
    if (!po->active) return st;
    if (st == TS_OK) st = ts_staged_commit(&po->staged, err);
    if (st) ts_staged_abort(&po->staged, err);
    ts_output_lock_release(&po->lock);
    po->active = false;
    return st;
}

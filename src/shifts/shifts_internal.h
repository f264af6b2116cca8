/* Shared between the files of src/shifts (not part of the stage interface). */
#ifndef TS_SHIFTS_INTERNAL_H
#define TS_SHIFTS_INTERNAL_H

#include <stddef.h>
#include "shifts/shifts.h"

/* Finds or adds the tile named name[0, len) in well w; -1 on failure. */
int ts_shifts_add_tile_n(ts_shifts *s, int w, const char *name, size_t len);

#endif

/* Fiji's TileConfiguration.txt (the Grid/Collection stitching plugin's
 * tile list, also its TileConfiguration.registered.txt), read as stage
 * positions for estimate --positions FILE (docs/register.md). */
#ifndef TS_REGISTER_TILE_CONFIG_H
#define TS_REGISTER_TILE_CONFIG_H

#include "tessera/tessera.h"

typedef struct ts_tile_config_entry {
    char name[256];  /* the image as the file names it ("tiles/1.tif"), for messages */
    char stem[32];   /* its file name without directory and extensions ("1"); "" if longer */
    double y, x;     /* origin, px */
    int line;        /* 1-based line number in the file */
} ts_tile_config_entry;

typedef struct ts_tile_config {
    int n;
    ts_tile_config_entry *e; /* in file order */
} ts_tile_config;

/* Reads the file: '#' comments and blank lines, a `dim = 2` line, then one
 * `name; series; (x, y)` line per tile (x first, px, any sign). A line that
 * is none of these, a dimension other than 2, coordinates that are not two
 * finite numbers within TS_SHIFTS_MAX_PX, or no tile at all: TS_ERR_FORMAT
 * naming the file and line. Free with ts_tile_config_free. */
ts_status ts_tile_config_read(const char *path, ts_tile_config **out, ts_error *err);
void ts_tile_config_free(ts_tile_config *tc);

#endif

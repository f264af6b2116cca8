/* The OME-XML of an OME-TIFF (the first IFD's ImageDescription), read with
 * libxml2 for what import writes into the NGFF metadata: the pixel size,
 * the channel names and the stage position of the field. */
#ifndef TS_IMPORT_OME_XML_H
#define TS_IMPORT_OME_XML_H

#include <stdbool.h>
#include <stddef.h>
#include "tessera/tessera.h"

#define TI_OME_MAX_CHANNELS 64

typedef struct ti_ome_meta {
    bool is_ome;                 /* the description is OME-XML at all */
    bool has_size_y, has_size_x; /* Pixels PhysicalSizeY / PhysicalSizeX */
    double size_y_um, size_x_um; /* in micrometres */
    int nchannels;               /* Channel elements of the Pixels */
    char channel_names[TI_OME_MAX_CHANNELS][64]; /* Name ("" when absent) */
    bool has_position;           /* a Plane with PositionX and PositionY */
    double pos_y_um, pos_x_um;   /* in micrometres */
    /* The position's unit was OME's "reference frame" (the schema's default
     * when PositionXUnit is absent), which has no size: taken as µm. */
    bool position_unit_assumed;
} ti_ome_meta;

/* Initialises libxml2 once (it must be, before threads parse). */
void ti_ome_init(void);

/* Parses an ImageDescription. Text that is not OME-XML (no <OME root: a
 * tifffile JSON shape, ImageJ's key=value lines, a plain note) gives
 * is_ome false and TS_OK. OME-XML that does not parse, or whose sizes are
 * not positive finite lengths in a length unit, is TS_ERR_FORMAT naming
 * `path` and the attribute. `file_name` (the TIFF's base name) picks the
 * Image whose TiffData names this file's first IFD when the XML describes
 * several (multi-file OME-TIFF); else the first Image is taken. */
ts_status ti_ome_parse(const char *path, const char *file_name, const char *text, size_t len,
                       ti_ome_meta *out, ts_error *err);

/* Micrometres per unit for OME's length unit symbols (pm .. km, Å, the
 * micro sign or Greek mu, "um"); 0 for anything else. */
double ti_ome_unit_um(const char *unit);

#endif

/*
 * Fuzz target: the OME-XML of OME-TIFF files (src/import/ome_xml.c over
 * libxml2), as import reads a tile's first ImageDescription. The input is
 * the description; the file is named "a.ome.tif" (the corpus's multi-file
 * sets name it in TiffData UUID FileName). ti_ome_parse must refuse with a
 * message or give sizes that are positive and finite, positions that are
 * finite, at most TI_OME_MAX_CHANNELS names, each terminated.
 */
#include "fuzz_common.h"

#include <math.h>

#include "import/ome_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool init;
    if (!init) ti_ome_init(), init = true;
    ti_ome_meta m;
    ts_error err = {0};
    if (ti_ome_parse("a.ome.tif", "a.ome.tif", (const char *)data, size, &m, &err) != TS_OK) {
        fz_check_error(err, "parse");
        return 0;
    }
    fz_check(!m.has_size_x || (isfinite(m.size_x_um) && m.size_x_um > 0), "size x %g", m.size_x_um);
    fz_check(!m.has_size_y || (isfinite(m.size_y_um) && m.size_y_um > 0), "size y %g", m.size_y_um);
    fz_check(!m.has_position || (isfinite(m.pos_x_um) && isfinite(m.pos_y_um)), "position %g %g", m.pos_y_um,
             m.pos_x_um);
    fz_check(m.nchannels >= 0 && m.nchannels <= TI_OME_MAX_CHANNELS, "%d channels", m.nchannels);
    for (int c = 0; c < m.nchannels; c++)
        fz_check(memchr(m.channel_names[c], '\0', sizeof m.channel_names[c]) != NULL, "name %d unterminated", c);
    fz_check(m.is_ome || (!m.has_size_x && !m.has_size_y && !m.has_position && !m.nchannels), "data without OME");
    return 0;
}

/* A procedural synthetic specimen: cell-like blobs (nuclei, cytoplasm,
 * puncta, one kind per channel modulo 3) with texture at several scales over
 * a slowly varying background. It is a pure function of global (y, x)
 * coordinates and the seed, so overlapping tiles see the same specimen, any
 * tile renders independently (in parallel) and no canvas is held in memory. */
#ifndef TS_SIM_SPECIMEN_H
#define TS_SIM_SPECIMEN_H

#include <stdint.h>

/* Deterministic hashing and uniform numbers. */
uint64_t sim_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
double sim_u01(uint64_t h); /* [0, 1) from 53 bits */

typedef struct sim_plane {
    uint64_t seed;   /* specimen seed (varies per well) */
    int channel;     /* structure kind and intensities */
    int t, nt;       /* timepoint: blobs drift slightly */
    int z, nz;       /* z: defocus away from the middle plane */
} sim_plane;

/* Renders the specimen into out[h * w] (C order): pixel (r, c) samples
 * global position (y0 + r, x0 + c). Values are grey levels above the
 * camera offset (0 .. ~4000). */
void sim_render(const sim_plane *plane, double y0, double x0, int h, int w, float *out);

#endif

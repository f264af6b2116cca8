/* A Butterworth low-pass of two views of one scene by the type-II DCT
 * (their symmetric extension), its cut-off measured on them, and the lock
 * FFTW's single-precision planner needs (lowpass.c). */
#ifndef TS_REGISTER_LOWPASS_H
#define TS_REGISTER_LOWPASS_H

#include <stdbool.h>

/* FFTW's planner keeps global state and is not thread-safe: every
 * fftwf plan is made and destroyed between these two (execution needs no
 * lock). */
void ts_fftwf_planner_lock(void);
void ts_fftwf_planner_unlock(void);

/* A caller's handle for ts_lowpass_pair: its scratch (one per thread: not
 * shared). The FFTW plans themselves, by length, are shared by every
 * handle alive and destroyed with the last (lowpass.c). */
typedef struct ts_lowpass_plans ts_lowpass_plans;
ts_lowpass_plans *ts_lowpass_plans_create(void); /* NULL: out of memory */
void ts_lowpass_plans_free(ts_lowpass_plans *plans);

/* a and b (h x w, two views of one scene, in place) both times
 * 1 / (1 + (omega / cutoff)^order), omega the radial frequency in rad/px
 * of each DCT-II coefficient (pi k / n along an axis of n px), the
 * cut-off (within [lo, hi], into *cutoff) where the views' common power
 * stops being worth its noise (lowpass.c). False (a, b unchanged) when
 * FFTW cannot plan it. */
bool ts_lowpass_pair(ts_lowpass_plans *plans, float *a, float *b, int h, int w, int order, double lo, double hi,
                     double *cutoff);

#endif

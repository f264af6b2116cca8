/* Anonymous page mappings for large, long-lived buffers (fuse's strips and
 * block buffers, estimate's kept tiles): their own mapping, returned to the
 * system when unmapped, optionally on huge pages and faulted in at once. */
#ifndef TS_COMMON_PAGES_H
#define TS_COMMON_PAGES_H

#include <stdbool.h>
#include <stddef.h>

/* A zero-filled mapping of bytes, NULL on failure. huge: on huge pages
 * where the kernel has them (advice: faulting a 4 KiB-page mapping in cost
 * ~1.7 ms per MB at its first write on a virtual machine, huge pages
 * ~0.1). populate: faulted in now rather than page by page at first
 * write. */
void *ts_pages_map(size_t bytes, bool huge, bool populate);
void ts_pages_unmap(void *p, size_t bytes);

/* Built with AddressSanitizer: carving several buffers out of one mapping
 * would hide an overrun of one in the next, so callers that carve keep
 * separate allocations there. */
#if defined(__SANITIZE_ADDRESS__)
#define TS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_ASAN 1
#endif
#endif

/* Up to TS_PAGE_SET_MAX long-lived buffers a worker fills at once (a
 * registrar's planes and spectra, a window NCC's transforms), each 64-byte
 * aligned (FFTW's SIMD alignment), carved from one block: from 1 MiB up a
 * mapping rounded up to whole huge pages, so the first write faults them
 * in 2 MiB at a time, not 4 KiB (9,000 faults, a sixth of estimate's time
 * on 2048^2 tiles, were the planes of its two registrars); below, one heap
 * block (freed blocks come back already faulted in). Huge pages need a
 * 2 MiB-aligned mapping, which Linux gives mappings of whole huge pages
 * from 6.7 on; before, part of the set may fault 4 KiB at a time (still
 * correct). Under AddressSanitizer each buffer is its own allocation. */
#define TS_PAGE_SET_MAX 16
typedef struct ts_page_set {
    void *map;
    size_t bytes;
    int n;
    void *own[TS_PAGE_SET_MAX]; /* heap blocks: the one block, or (TS_ASAN) each buffer */
} ts_page_set;

/* Points out[k] at sizes[k] bytes for k < n (n <= TS_PAGE_SET_MAX);
 * false (and nothing held) when out of memory. Not cleared (as malloc):
 * zeroing a 256 px registrar's planes was 6% of a 2x2 plate's estimate. */
bool ts_page_set_alloc(ts_page_set *s, int n, const size_t *sizes, void **out);
void ts_page_set_free(ts_page_set *s);

#endif

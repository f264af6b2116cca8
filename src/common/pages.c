/* Anonymous page mappings (pages.h). */
#include "common/pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *ts_pages_map(size_t bytes, bool huge, bool populate) {
    /* Without huge pages the kernel populates at mmap; with them the
     * advice must come first, so they are faulted in after it. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (populate && !huge ? MAP_POPULATE : 0), -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (huge) {
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
        if (populate) {
#ifdef MADV_POPULATE_WRITE
            if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return p;
#endif
            /* Older kernel: touch one byte per page (the mapping is zero-filled). */
            for (size_t i = 0; i < bytes; i += 4096) ((volatile unsigned char *)p)[i] = 0;
        }
    }
    return p;
}

void ts_pages_unmap(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}

/* bytes rounded up to a multiple of 64 (FFTW's alignment), at least 64;
 * 0 when that would overflow. */
static size_t aligned_size(size_t bytes) {
    const size_t align = 64;
    if (bytes > SIZE_MAX - align) return 0;
    return bytes ? (bytes + align - 1) / align * align : align;
}

bool ts_page_set_alloc(ts_page_set *s, int n, const size_t *sizes, void **out) {
    memset(s, 0, sizeof *s);
    if (n < 0 || n > TS_PAGE_SET_MAX) return false;
    const size_t align = 64, huge = (size_t)2 << 20;
#ifdef TS_ASAN
    (void)huge;
    s->n = n;
    for (int k = 0; k < n; k++) {
        const size_t bytes = aligned_size(sizes[k]);
        if (!bytes || !(s->own[k] = aligned_alloc(align, bytes))) {
            ts_page_set_free(s);
            return false;
        }
        out[k] = s->own[k];
    }
    return true;
#else
    /* Rounded sizes summed with room left for rounding the total up to
     * whole huge pages. */
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        const size_t r = aligned_size(sizes[k]);
        if (!r || r > SIZE_MAX - huge - total) return false;
        total += r;
    }
    if (!total) total = align; /* n == 0 */
    unsigned char *p;
    if (total < huge / 2) {
        /* Small: from the heap, whose freed blocks are already faulted in
         * (a window scratch of each new size would map fresh pages). */
        if (!(p = aligned_alloc(align, total))) return false;
        s->own[0] = p;
    } else {
        /* From half a huge page up: rounded up to whole ones (a 1.5 MB
         * registrar of 512 px tiles faulted 380 pages of 4 KiB). */
        total = (total + huge - 1) / huge * huge;
        if (!(p = ts_pages_map(total, true, false))) return false;
        s->map = p, s->bytes = total;
    }
    s->n = 1;
    for (int k = 0; k < n; k++) {
        out[k] = p;
        p += aligned_size(sizes[k]);
    }
    return true;
#endif
}

void ts_page_set_free(ts_page_set *s) {
    if (!s) return;
    for (int k = 0; k < s->n && k < TS_PAGE_SET_MAX; k++) free(s->own[k]);
    ts_pages_unmap(s->map, s->bytes);
    memset(s, 0, sizeof *s);
}

/* Anonymous page mappings (pages.h). */
#include "common/pages.h"

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

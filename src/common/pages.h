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

#endif

/* Checking one stored piece. A chunk file: its size against the largest
 * encoding of its chunk, then a decode through the codec chain to exactly
 * the chunk's bytes. A shard file (part k of K): the index is read and
 * CRC-checked by every part (a few KB), its entries are checked (sentinel,
 * range, overlap) by part 0 only, and each part decodes its own run of
 * inner chunks. Memory: one encoded and one decoded (inner) chunk and one
 * index per worker. */
#include "verify/verify_internal.h"
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ts_verify_kind vf_kind_of(ts_status st) {
    switch (st) {
    case TS_ERR_IO: return TS_VERIFY_IO;
    case TS_ERR_UNSUPPORTED: return TS_VERIFY_UNSUPPORTED;
    default: return TS_VERIFY_CORRUPT;
    }
}

static bool grow(vf_scratch *s, size_t n) {
    if (s->cap >= n) return true;
    unsigned char *b = realloc(s->buf, n ? n : 1);
    if (!b) return false;
    s->buf = b;
    s->cap = n;
    return true;
}

/* pread of exactly n bytes at off; a short file is reported as *short_read. */
static int read_at(int fd, unsigned char *dst, size_t n, uint64_t off, bool *short_read) {
    size_t got = 0;
    *short_read = false;
    while (got < n) {
        ssize_t r = pread(fd, dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        if (r == 0) {
            *short_read = true;
            return 0;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Opens a stored piece through ts_open_regular, as the readers do (a FIFO
 * is a problem, not a hang). Returns the fd; -1 when absent; -2 when it
 * cannot be read, with the reason in why. */
static int open_piece(const char *file, uint64_t *size, char *why, size_t nwhy) {
    int fd;
    bool found;
    ts_error e;
    if (ts_open_regular(file, &fd, size, &found, &e) != TS_OK) {
        snprintf(why, nwhy, "%s", e.message);
        return -2;
    }
    return found ? fd : -1;
}

static ts_status check_chunk(vf_ctx *c, const vf_array *a, vf_where at, int fd, uint64_t fsize, const char *key,
                             vf_scratch *s, ts_error *err) {
    const uint64_t bound = tz_stored_chunk_bound(a->arr);
    const size_t raw = tz_stored_chunk_bytes(a->arr);
    if (fsize > bound)
        return vf_report(c, at, TS_VERIFY_CORRUPT, a->rel, key, -1,
                         "%llu bytes: larger than any encoding of its %zu-byte chunk", (unsigned long long)fsize, raw);
    if (!grow(s, (size_t)fsize)) return ts_fail(err, TS_ERR_NOMEM, "out of memory reading %s/%s", a->rel, key);
    bool short_read;
    int e = read_at(fd, s->buf, (size_t)fsize, 0, &short_read);
    if (e) return vf_report(c, at, TS_VERIFY_IO, a->rel, key, -1, "cannot read: %s", strerror(e));
    if (short_read) return vf_report(c, at, TS_VERIFY_TRUNCATED, a->rel, key, -1, "shrank while being read");
    atomic_fetch_add(&c->blocks, 1);
    atomic_fetch_add(&c->bytes_read, (long long)fsize);
    ts_error de;
    ts_status st = tz_decode_stored_chunk(a->arr, s->buf, (size_t)fsize, s->dec, &de);
    if (st == TS_ERR_NOMEM) return ts_fail(err, st, "%s/%s: %s", a->rel, key, de.message);
    if (st) return vf_report(c, at, vf_kind_of(st), a->rel, key, -1, "%s", de.message);
    atomic_fetch_add(&c->chunks, 1);
    atomic_fetch_add(&c->bytes_decoded, (long long)raw);
    return TS_OK;
}

static bool index_room(vf_scratch *s, int64_t n) {
    if (s->index_cap >= n) return true;
    uint64_t *ix = realloc(s->index, (size_t)n * 2 * sizeof *ix);
    if (!ix) return false;
    s->index = ix;
    vf_entry_pos *o = realloc(s->order, (size_t)n * sizeof *o);
    if (!o) return false;
    s->order = o;
    s->index_cap = n;
    return true;
}

/* qsort has no user pointer: entries are sorted as (offset, lin) pairs. */
static int cmp_entry(const void *x, const void *y) {
    const vf_entry_pos *a = x, *b = y;
    if (a->off != b->off) return a->off < b->off ? -1 : 1;
    return a->lin < b->lin ? -1 : a->lin > b->lin;
}

/* Part 0's checks of the whole index: every entry in range (or the empty
 * sentinel), no two chunks sharing bytes. */
static ts_status check_index(vf_ctx *c, const vf_array *a, vf_where at, uint64_t fsize, const char *key,
                             vf_scratch *s, ts_error *err) {
    const int64_t n = tz_shard_inner_count(a->arr);
    const uint64_t *ix = s->index;
    vf_entry_pos *pos = s->order; /* index_room made room for n */
    int64_t np = 0;
    ts_status st = TS_OK;
    for (int64_t lin = 0; lin < n && !st; lin++) {
        char why[256];
        int r = tz_shard_entry_check(a->arr, fsize, ix[2 * lin], ix[2 * lin + 1], why, sizeof why);
        if (r < 0) {
            at.inner = lin;
            st = vf_report(c, at, TS_VERIFY_CORRUPT, a->rel, key, lin, "%s", why);
        } else if (r == 0 && ix[2 * lin + 1] > 0) {
            pos[np++] = (vf_entry_pos){ix[2 * lin], lin};
        }
    }
    if (!st && np > 1) {
        qsort(pos, (size_t)np, sizeof *pos, cmp_entry);
        for (int64_t j = 1; j < np && !st; j++) {
            const vf_entry_pos *p = &pos[j - 1], *q = &pos[j];
            if (q->off < p->off + ix[2 * p->lin + 1]) {
                at.inner = q->lin;
                st = vf_report(c, at, TS_VERIFY_CORRUPT, a->rel, key, q->lin,
                               "bytes [%llu, +%llu) overlap those of inner chunk %lld", (unsigned long long)q->off,
                               (unsigned long long)ix[2 * q->lin + 1], (long long)p->lin);
            }
        }
    }
    return st;
}

static ts_status check_shard(vf_ctx *c, const vf_array *a, vf_where at, int fd, uint64_t fsize, const char *key,
                             int64_t part, vf_scratch *s, ts_error *err) {
    const int64_t n = tz_shard_inner_count(a->arr);
    ts_error ie;
    ts_status st;
    /* A file shorter than its index is reported before the index is
     * allocated: the metadata alone do not size memory. */
    if (fsize < tz_shard_index_size(a->arr)) {
        st = tz_shard_index_read(a->arr, fd, fsize, NULL, &ie);
    } else {
        if (!index_room(s, n)) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the index of %s/%s", a->rel, key);
        st = tz_shard_index_read(a->arr, fd, fsize, s->index, &ie);
    }
    if (st == TS_ERR_NOMEM) return ts_fail(err, st, "%s/%s: %s", a->rel, key, ie.message);
    if (st) {
        if (part != 0) return TS_OK;
        bool short_file = fsize < tz_shard_index_size(a->arr);
        /* with the index at the end, a lost tail reads as a bad CRC */
        return vf_report(c, at, short_file ? TS_VERIFY_TRUNCATED : vf_kind_of(st), a->rel, key, -1, "%s%s", ie.message,
                         short_file || st != TS_ERR_CORRUPT ? "" : " (the shard is damaged or truncated)");
    }
    if (part == 0) {
        /* the index counts once, however many parts read it */
        atomic_fetch_add(&c->bytes_read, (long long)tz_shard_index_size(a->arr));
        atomic_fetch_add(&c->blocks, 1);
        if ((st = check_index(c, a, at, fsize, key, s, err)) != TS_OK) return st;
    }
    const int64_t lo = n * part / a->parts, hi = n * (part + 1) / a->parts;
    const uint64_t bound = tz_stored_chunk_bound(a->arr);
    const size_t raw = tz_stored_chunk_bytes(a->arr);
    int64_t empty = 0, chunks = 0, bytes = 0;
    for (int64_t lin = lo; lin < hi && !st; lin++) {
        uint64_t off = s->index[2 * lin], nb = s->index[2 * lin + 1];
        char why[256];
        int r = tz_shard_entry_check(a->arr, fsize, off, nb, why, sizeof why);
        if (r == 1) empty++;
        if (r != 0) continue; /* a bad entry is part 0's report */
        at.inner = lin;
        if (nb > bound) {
            st = vf_report(c, at, TS_VERIFY_CORRUPT, a->rel, key, lin,
                           "%llu bytes: larger than any encoding of its %zu-byte chunk", (unsigned long long)nb, raw);
            continue;
        }
        if (!grow(s, (size_t)nb)) return ts_fail(err, TS_ERR_NOMEM, "out of memory reading %s/%s", a->rel, key);
        bool short_read;
        int e = read_at(fd, s->buf, (size_t)nb, off, &short_read);
        if (e || short_read) {
            st = e ? vf_report(c, at, TS_VERIFY_IO, a->rel, key, lin, "cannot read: %s", strerror(e))
                   : vf_report(c, at, TS_VERIFY_TRUNCATED, a->rel, key, lin, "shrank while being read");
            continue;
        }
        bytes += (int64_t)nb;
        ts_error de;
        ts_status ds = tz_decode_stored_chunk(a->arr, s->buf, (size_t)nb, s->dec, &de);
        if (ds == TS_ERR_NOMEM) return ts_fail(err, ds, "%s/%s, inner chunk %lld: %s", a->rel, key, (long long)lin,
                                               de.message);
        if (ds) st = vf_report(c, at, vf_kind_of(ds), a->rel, key, lin, "%s", de.message);
        else chunks++;
    }
    atomic_fetch_add(&c->empty, empty);
    atomic_fetch_add(&c->chunks, chunks);
    atomic_fetch_add(&c->bytes_read, bytes);
    atomic_fetch_add(&c->bytes_decoded, chunks * (int64_t)raw);
    return st;
}

ts_status vf_check_block(vf_ctx *c, const vf_array *a, int64_t block, int64_t part, int worker, ts_error *err) {
    vf_scratch *s = &c->scratch[worker];
    if (!s->dec && !(s->dec = tz_decoder_new())) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    const tz_array_meta *m = tz_array_get_meta(a->arr);
    int64_t idx[TZ_MAX_DIM], rest = block;
    for (int d = m->ndim - 1; d >= 0; d--) {
        idx[d] = rest % a->grid[d];
        rest /= a->grid[d];
    }
    char key[256], file[4600];
    tz_chunk_key(m, idx, key, sizeof key);
    snprintf(file, sizeof file, "%s/%s", tz_array_path(a->arr), key);
    vf_where at = {a->unit, a->level, block, -1};
    uint64_t fsize = 0;
    char why[1024];
    int fd = open_piece(file, &fsize, why, sizeof why);
    if (fd == -2) return part == 0 ? vf_report(c, at, TS_VERIFY_IO, a->rel, key, -1, "%s", why) : TS_OK;
    if (fd == -1) {
        if (part != 0) return TS_OK;
        atomic_fetch_add(&c->absent, 1);
        if (!c->opt->require_chunks) return TS_OK;
        return vf_report(c, at, TS_VERIFY_MISSING, a->rel, key, -1, "%s file is absent (reads as the fill value)",
                         m->sharded ? "the shard" : "the chunk");
    }
    ts_status st = m->sharded ? check_shard(c, a, at, fd, fsize, key, part, s, err)
                    : check_chunk(c, a, at, fd, fsize, key, s, err);
    close(fd);
    return st;
}

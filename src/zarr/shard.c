/* v3 sharding_indexed: a shard is the encoded inner chunks followed (or
 * preceded) by an index of (offset, nbytes) little-endian uint64 pairs in C
 * order of the inner chunk grid, encoded by the index codecs (bytes + crc32c:
 * the CRC32C of the index appended). All-fill inner chunks are the empty
 * sentinel (2^64-1, 2^64-1). Reads fetch the index and then only the inner
 * chunks they need, with pread. */
#include "zarr/zarr_internal.h"
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMPTY UINT64_MAX

static ts_status read_range(int fd, const char *file, const char *key, uint64_t off, size_t n,
                            unsigned char *dst, ts_error *err) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ts_fail(err, TS_ERR_IO, "cannot read '%s' (shard '%s'): %s", file, key, strerror(errno));
        if (r == 0) return ts_fail(err, TS_ERR_CORRUPT, "'%s' (shard '%s') is truncated", file, key);
        got += (size_t)r;
    }
    return TS_OK;
}

static void index_shape(const tz_array *arr, int64_t *shape) {
    for (int d = 0; d < arr->meta.ndim; d++) shape[d] = arr->chunks_per_shard[d];
    shape[arr->meta.ndim] = 2;
}

ts_status tz_shard_read(const tz_array *arr, const char *file, const char *key, const int64_t *box_off,
                        const int64_t *extent, void *dst, const int64_t *dst_shape, const int64_t *dst_off,
                        ts_error *err) {
    const tz_array_meta *m = &arr->meta;
    int nd = m->ndim;
    int fd;
    uint64_t fsize;
    bool found;
    ts_status st = ts_open_regular(file, &fd, &fsize, &found, err);
    if (st) return st;
    if (!found) {
        tz_fill_box(nd, arr->esize, arr->fill, dst, dst_shape, dst_off, extent);
        return TS_OK;
    }
    const int64_t *ic = m->sharding.inner_chunk;
    size_t inner_bytes = (size_t)tz_prod(nd, ic) * arr->esize;
    /* No inner chunk is larger than any encoding of it, and no shard larger
     * than its index and all of them: what the index or the file's size say
     * beyond that is damage, refused before it is allocated or read. */
    const uint64_t inner_max = tz_chain_max_encoded(&m->sharding.codecs, inner_bytes);
    const uint64_t shard_max = inner_max > (UINT64_MAX - arr->index_bytes) / (uint64_t)arr->inner_per_shard
                                   ? UINT64_MAX
                                   : inner_max * (uint64_t)arr->inner_per_shard + arr->index_bytes;
    if (fsize > shard_max) {
        close(fd);
        return ts_fail(err, TS_ERR_CORRUPT, "'%s' (shard '%s') is %llu bytes, more than the %llu bytes any "
                       "encoding of its %lld inner chunks and index can be", file, key, (unsigned long long)fsize,
                       (unsigned long long)shard_max, (long long)arr->inner_per_shard);
    }
    size_t nidx = (size_t)arr->inner_per_shard * 2;
    uint64_t *index = malloc(nidx * 8);
    unsigned char *raw = malloc(arr->index_bytes);
    unsigned char *chunk = malloc(inner_bytes ? inner_bytes : 1);
    unsigned char *enc = NULL;
    size_t enc_cap = 0;
    tz_codec_ctx ctx = {0};
    if (!index || !raw || !chunk) { st = ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s'", file); goto done; }
    if (fsize < arr->index_bytes) {
        st = ts_fail(err, TS_ERR_CORRUPT, "'%s' (shard '%s') is truncated: %llu bytes, the index alone needs %zu",
                     file, key, (unsigned long long)fsize, arr->index_bytes);
        goto done;
    }
    st = read_range(fd, file, key, m->sharding.index_at_start ? 0 : fsize - arr->index_bytes, arr->index_bytes, raw, err);
    if (st) goto done;
    int64_t ishape[TZ_MAX_DIM + 1];
    index_shape(arr, ishape);
    st = tz_decode_chunk(&m->sharding.index_codecs, TS_UINT64, false, nd + 1, ishape, raw, arr->index_bytes, index, err);
    if (st) {
        st = ts_fail_context(err, TS_ERR_CORRUPT, "'%s' (shard '%s'): shard index", file, key);
        goto done;
    }
    /* Inner chunks overlapping the box. */
    int64_t lo[TZ_MAX_DIM], hi[TZ_MAX_DIM], c[TZ_MAX_DIM];
    for (int d = 0; d < nd; d++) {
        if (extent[d] <= 0) goto done;
        lo[d] = box_off[d] / ic[d];
        hi[d] = (box_off[d] + extent[d] - 1) / ic[d];
        c[d] = lo[d];
    }
    for (;;) {
        int64_t lin = 0;
        for (int d = 0; d < nd; d++) lin = lin * arr->chunks_per_shard[d] + c[d];
        uint64_t off = index[2 * lin], nb = index[2 * lin + 1];
        int64_t coff[TZ_MAX_DIM], cext[TZ_MAX_DIM], doff[TZ_MAX_DIM];
        for (int d = 0; d < nd; d++) {
            int64_t b0 = c[d] * ic[d];
            int64_t a = box_off[d] > b0 ? box_off[d] : b0;
            int64_t e = box_off[d] + extent[d] < b0 + ic[d] ? box_off[d] + extent[d] : b0 + ic[d];
            coff[d] = a - b0;
            cext[d] = e - a;
            doff[d] = dst_off[d] + (a - box_off[d]);
        }
        /* One rule for an entry, the readers' and verify's: the empty
         * sentinel, or a range of the chunk data (not over the index, not
         * past the end). */
        char why[256];
        int entry = tz_shard_entry_check(arr, fsize, off, nb, why, sizeof why);
        if (entry == 1) {
            tz_fill_box(nd, arr->esize, arr->fill, dst, dst_shape, doff, cext);
        } else {
            if (entry < 0) {
                st = ts_fail(err, TS_ERR_CORRUPT, "'%s' (shard '%s'): inner chunk %lld: %s", file, key, (long long)lin,
                             why);
                goto done;
            }
            if (nb > inner_max) {
                st = ts_fail(err, TS_ERR_CORRUPT,
                             "'%s' (shard '%s'): inner chunk %lld is %llu bytes, more than the %llu bytes any "
                             "encoding of its %zu can be", file, key, (long long)lin, (unsigned long long)nb,
                             (unsigned long long)inner_max, inner_bytes);
                goto done;
            }
            if (nb > enc_cap) {
                free(enc);
                enc = malloc(nb);
                enc_cap = nb;
                if (!enc) { enc_cap = 0; st = ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s'", file); goto done; }
            }
            st = read_range(fd, file, key, off, nb, enc, err);
            if (st) goto done;
            st = tz_decode_chunk_ctx(&m->sharding.codecs, m->dtype, m->big_endian, nd, ic, enc, nb, chunk, &ctx, err);
            if (st) {
                if (st != TS_ERR_NOMEM && st != TS_ERR_UNSUPPORTED) st = TS_ERR_CORRUPT;
                ts_fail_context(err, st, "'%s' (shard '%s'), inner chunk %lld", file, key, (long long)lin);
                goto done;
            }
            tz_copy_box(nd, arr->esize, chunk, ic, coff, dst, dst_shape, doff, cext);
        }
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++c[d] <= hi[d]) break;
            c[d] = lo[d];
        }
        if (d < 0) break;
    }
done:
    close(fd);
    free(index);
    free(raw);
    free(chunk);
    free(enc);
    tz_codec_ctx_free(&ctx);
    return st;
}

/* Encoding a shard: item `lin` encodes inner chunk lin (C order over the
 * shard's chunk grid) into its own buffer, on whichever thread runs it;
 * the file is then laid out in lin order, so the bytes do not depend on
 * the threads. */
typedef struct shard_job {
    const tz_array *arr;
    const void *shard;
    const char *key;
    int64_t inner_elems;
    unsigned char **chunk;   /* per worker: one raw inner chunk */
    tz_codec_ctx *ctx;       /* per worker */
    unsigned char **enc;     /* per inner chunk: encoded bytes (NULL = empty) */
    size_t *size;
} shard_job;

static ts_status encode_inner(void *user, int64_t lin, int worker, ts_error *err) {
    shard_job *J = user;
    const tz_array *arr = J->arr;
    const tz_array_meta *m = &arr->meta;
    const int nd = m->ndim;
    const int64_t *ic = m->sharding.inner_chunk;
    int64_t c[TZ_MAX_DIM], soff[TZ_MAX_DIM], zero[TZ_MAX_DIM] = {0}, rest = lin;
    for (int d = nd - 1; d >= 0; d--) {
        c[d] = rest % arr->chunks_per_shard[d];
        rest /= arr->chunks_per_shard[d];
        soff[d] = c[d] * ic[d];
    }
    if (!J->chunk[worker] && !(J->chunk[worker] = malloc((size_t)J->inner_elems * arr->esize + 1)))
        return ts_fail(err, TS_ERR_NOMEM, "out of memory encoding shard '%s' of '%s'", J->key, arr->path);
    unsigned char *chunk = J->chunk[worker];
    tz_copy_box(nd, arr->esize, J->shard, m->chunk, soff, chunk, ic, zero, ic);
    if (tz_all_fill(arr, chunk, (size_t)J->inner_elems)) return TS_OK;
    const void *enc;
    size_t n;
    ts_status st = tz_encode_chunk_ctx(&m->sharding.codecs, m->dtype, m->big_endian, nd, ic, chunk, &enc, &n,
                                       &J->ctx[worker], err);
    if (st) return ts_fail_context(err, st, "zarr array '%s', shard '%s', inner chunk %lld", arr->path, J->key,
                                   (long long)lin);
    if (!(J->enc[lin] = malloc(n ? n : 1)))
        return ts_fail(err, TS_ERR_NOMEM, "out of memory encoding shard '%s' of '%s'", J->key, arr->path);
    memcpy(J->enc[lin], enc, n);
    J->size[lin] = n;
    return TS_OK;
}

/* Runs the items on the calling thread (no tz_parallel given). */
static ts_status run_serial(void *user, int64_t n, tz_item_fn fn, void *fn_user, ts_error *err) {
    (void)user;
    for (int64_t i = 0; i < n; i++) {
        ts_status st = fn(fn_user, i, 0, err);
        if (st) return st;
    }
    return TS_OK;
}

ts_status tz_shard_write(const tz_array *arr, const void *shard, const char *key, const tz_parallel *par,
                         const char *file_path, ts_error *err) {
    static const tz_parallel serial = {1, run_serial, NULL};
    if (!par || par->nworkers < 1) par = &serial;
    const tz_array_meta *m = &arr->meta;
    const int nd = m->ndim;
    const size_t n_inner = (size_t)arr->inner_per_shard;
    const size_t base = m->sharding.index_at_start ? arr->index_bytes : 0;
    const size_t nw = (size_t)par->nworkers;
    shard_job J = {arr, shard, key, tz_prod(nd, m->sharding.inner_chunk), calloc(nw, sizeof *J.chunk),
                   calloc(nw, sizeof *J.ctx), calloc(n_inner, sizeof *J.enc), calloc(n_inner, sizeof *J.size)};
    uint64_t *index = malloc(n_inner * 16);
    ts_file_part *parts = malloc((n_inner + 1) * sizeof *parts);
    ts_status st = TS_OK;
    bool empty = true;
    if (!J.chunk || !J.ctx || !J.enc || !J.size || !index || !parts) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory encoding shard '%s' of '%s'", key, arr->path);
        goto done;
    }
    st = par->run(par->user, (int64_t)n_inner, encode_inner, &J, err);
    if (st) goto done;
    size_t pos = base;
    for (size_t lin = 0; lin < n_inner; lin++) {
        if (!J.enc[lin]) {
            index[2 * lin] = index[2 * lin + 1] = EMPTY;
            continue;
        }
        index[2 * lin] = pos;
        index[2 * lin + 1] = J.size[lin];
        pos += J.size[lin];
        empty = false;
    }
    if (empty) { /* (tz_remove_fill_block) */
        st = tz_remove_fill_block(file_path, err);
        goto done;
    }
    int64_t ishape[TZ_MAX_DIM + 1];
    for (int d = 0; d < nd; d++) ishape[d] = arr->chunks_per_shard[d];
    ishape[nd] = 2;
    const void *enc_index;
    size_t isize = 0;
    /* The index is little-endian uint64 whatever the host: the index codecs'
     * bytes codec says little, and tz_encode_chunk converts from native. */
    st = tz_encode_chunk_ctx(&m->sharding.index_codecs, TS_UINT64, false, nd + 1, ishape, index, &enc_index, &isize,
                             &J.ctx[0], err);
    if (st) goto done;
    if (isize != arr->index_bytes) {
        st = ts_fail(err, TS_ERR_INTERNAL, "shard index encoded to %zu bytes, expected %zu", isize, arr->index_bytes);
        goto done;
    }
    /* Index at the start: [index][chunks]; at the end: [chunks][index],
     * written from the chunks' own buffers: a joined copy of the whole
     * encoded shard was a second one per shard being written (~4 MB of
     * heap each for 2048 px uint16 shards, two at a time at 2 threads). */
    size_t np = 0;
    if (m->sharding.index_at_start) parts[np++] = (ts_file_part){enc_index, isize};
    for (size_t lin = 0; lin < n_inner; lin++)
        if (J.enc[lin]) parts[np++] = (ts_file_part){J.enc[lin], J.size[lin]};
    if (!m->sharding.index_at_start) parts[np++] = (ts_file_part){enc_index, isize};
    st = ts_write_file_atomic_parts(file_path, parts, np, err);
done:
    if (J.enc)
        for (size_t lin = 0; lin < n_inner; lin++) free(J.enc[lin]);
    if (J.chunk)
        for (size_t w = 0; w < nw; w++) free(J.chunk[w]);
    if (J.ctx)
        for (size_t w = 0; w < nw; w++) tz_codec_ctx_free(&J.ctx[w]);
    free(J.chunk);
    free(J.ctx);
    free(J.enc);
    free(J.size);
    free(index);
    free(parts);
    return st;
}

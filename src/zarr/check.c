/* Primitives for checking stored data piece by piece (tessera verify): the
 * decoded and largest encoded size of one stored chunk, its decode through
 * the array's chain with per-thread scratch, and a shard's index read and
 * CRC-checked on its own, plus the placement rules its entries must follow.
 * Readers fetch the same things inside tz_array_read; here they are
 * separate so a checker can report each bad piece instead of stopping at
 * the first. */
#include "zarr/zarr_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMPTY UINT64_MAX

struct tz_decoder {
    tz_codec_ctx ctx;
    unsigned char *out;
    size_t cap;
};

tz_decoder *tz_decoder_new(void) { return calloc(1, sizeof(tz_decoder)); }

void tz_decoder_free(tz_decoder *dec) {
    if (!dec) return;
    tz_codec_ctx_free(&dec->ctx);
    free(dec->out);
    free(dec);
}

/* The codec chain and shape of one stored chunk: the inner chunk of a
 * shard, else the chunk itself. */
static const tz_codec_chain *stored_chain(const tz_array *arr, const int64_t **shape) {
    const tz_array_meta *m = &arr->meta;
    *shape = m->sharded ? m->sharding.inner_chunk : m->chunk;
    return m->sharded ? &m->sharding.codecs : &m->codecs;
}

size_t tz_stored_chunk_bytes(const tz_array *arr) {
    const int64_t *shape;
    stored_chain(arr, &shape);
    return (size_t)tz_prod(arr->meta.ndim, shape) * arr->esize;
}

uint64_t tz_stored_chunk_bound(const tz_array *arr) {
    /* the readers' bound (codec.c), so verify refuses exactly what they do */
    const int64_t *shape;
    const tz_codec_chain *chain = stored_chain(arr, &shape);
    return tz_chain_max_encoded(chain, tz_stored_chunk_bytes(arr));
}

ts_status tz_decode_stored_chunk(const tz_array *arr, const void *in, size_t n, tz_decoder *dec,
                                 ts_error *err) {
    const int64_t *shape;
    const tz_codec_chain *chain = stored_chain(arr, &shape);
    size_t need = tz_stored_chunk_bytes(arr);
    if (dec->cap < need) {
        unsigned char *b = realloc(dec->out, need ? need : 1);
        if (!b) return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %zu-byte chunk", need);
        dec->out = b;
        dec->cap = need;
    }
    return tz_decode_chunk_ctx(chain, arr->meta.dtype, arr->meta.big_endian, arr->meta.ndim, shape, in, n,
                               dec->out, &dec->ctx, err);
}

int64_t tz_shard_inner_count(const tz_array *arr) { return arr->meta.sharded ? arr->inner_per_shard : 0; }

size_t tz_shard_index_size(const tz_array *arr) { return arr->meta.sharded ? arr->index_bytes : 0; }

ts_status tz_shard_index_read(const tz_array *arr, int fd, uint64_t fsize, uint64_t *index, ts_error *err) {
    const tz_array_meta *m = &arr->meta;
    const size_t nb = arr->index_bytes;
    if (fsize < nb)
        return ts_fail(err, TS_ERR_CORRUPT, "truncated: %llu bytes, the shard index alone needs %zu",
                       (unsigned long long)fsize, nb);
    unsigned char *raw = malloc(nb ? nb : 1);
    if (!raw) return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %zu-byte shard index", nb);
    const uint64_t at = m->sharding.index_at_start ? 0 : fsize - nb;
    size_t got = 0;
    ts_status st = TS_OK;
    while (got < nb && !st) {
        ssize_t r = pread(fd, raw + got, nb - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) st = ts_fail(err, TS_ERR_IO, "cannot read the shard index: %s", strerror(errno));
        else if (r == 0) st = ts_fail(err, TS_ERR_CORRUPT, "truncated while reading the shard index");
        else got += (size_t)r;
    }
    if (!st) {
        int64_t ishape[TZ_MAX_DIM + 1];
        for (int d = 0; d < m->ndim; d++) ishape[d] = arr->chunks_per_shard[d];
        ishape[m->ndim] = 2;
        st = tz_decode_chunk(&m->sharding.index_codecs, TS_UINT64, false, m->ndim + 1, ishape, raw, nb, index, err);
        if (st) st = ts_fail_context(err, st == TS_ERR_NOMEM ? st : TS_ERR_CORRUPT, "shard index");
    }
    free(raw);
    return st;
}

int tz_shard_entry_check(const tz_array *arr, uint64_t fsize, uint64_t off, uint64_t nbytes, char *why,
                         size_t n) {
    if (off == EMPTY && nbytes == EMPTY) return 1;
    if (off == EMPTY || nbytes == EMPTY) {
        snprintf(why, n, "index entry (%llu, %llu) is half an empty sentinel", (unsigned long long)off,
                 (unsigned long long)nbytes);
        return -1;
    }
    /* The inner chunks lie between the index and the end of the file, or
     * before the index when it sits at the end. */
    const uint64_t ib = arr->index_bytes;
    const uint64_t lo = arr->meta.sharding.index_at_start ? ib : 0;
    const uint64_t hi = arr->meta.sharding.index_at_start ? fsize : (fsize >= ib ? fsize - ib : 0);
    if (off < lo || off > hi || nbytes > hi - off) {
        snprintf(why, n, "index entry [%llu, +%llu) lies outside the chunk data [%llu, %llu) of the %llu-byte file%s",
                 (unsigned long long)off, (unsigned long long)nbytes, (unsigned long long)lo,
                 (unsigned long long)hi, (unsigned long long)fsize,
                 off > fsize || nbytes > fsize - off ? " (past its end)" : " (over the index)");
        return -1;
    }
    return 0;
}

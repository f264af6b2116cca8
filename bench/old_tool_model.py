"""A model of the old Python/CuPy tool's CPU fusion loop (assemble_streaming
with NumPy where CuPy would be), for bench/old_tool_bench.sh.

The old tool's code is not available; this follows what its pull request
(/work/shared/seed/pr-18-shard-aligned-band-asserts.txt) says the loop does:

- Y bands one after the other; per band full-band float32 numer/denom;
- a loader thread pool reading the tiles of the next bands ahead (prefetch
  depth 2, OPS_PREFETCH_DEPTH), into a per-band tile cache that is cleared
  after the band (a tile spanning two bands is read twice);
- the tile weight image (scipy EDT of the tile with its outer ring as
  background, + 1e-6, ** exponent, float32), cached per band;
- per tile touch: slice the tile's rows in the band, cast to float32, mask
  zero pixels (the 'ne' of its fused kernel), multiply by the weights,
  iadd into numer and denom;
- normalise: maximum(denom, 1e-12), divide, nan_to_num, astype(uint16) (a
  truncation: tessera rounds half up, so uint16 outputs differ by at most 1);
- 0.4-like output (one file per chunk): each chunk, zero-padded at the
  edges, encoded with numcodecs and written directly to its key by a
  ThreadPoolExecutor (_write_zarr_block_direct; the old tool writes v3 keys
  c/0/{C}/0/{Y}/{X}, here the v2 keys 0/{C}/0/{Y}/{X} of tessera's 0.4
  array, the same bytes and files);
- 0.5 output (sharding_indexed): the band (one shard row) copied into a
  shard-row buffer, then flushed: the inner chunks encoded in parallel,
  all-fill chunks given the empty sentinel, shard = chunks + uint64 index +
  crc32c, one write per shard (_encode_shard_direct; here in the
  background, overlapping the next band, which only helps the model).

The old tool used 32 write workers and 8 loaders for NFS and many cores; on
this 2-core machine --workers 2 --loaders 1 (the defaults) are what the
cores make sense of (more threads only contend for the same two cores).

The array layout (shape, chunks, shards, codec, dtype) is taken from the
tessera output given with --like, so both write the same array; its
metadata files are copied, so OUT is a complete store (`tessera verify`).
--compare reads both arrays back and prints the largest difference.

  old_tool_model.py PLATE SHIFTS OUT --like TESSERA_OUT --band PX
                    [--well A/1] [--exponent 1] [--workers 2] [--loaders 1]
                    [--prefetch 2] [--compare]
Prints one line: seconds (after imports), phases, output MP/s, peak RSS."""
import argparse
import concurrent.futures as cf
import json
import os
import resource
import shutil
import struct
import sys
import time

import numpy as np
import numcodecs
import numcodecs.blosc
import scipy.ndimage
import yaml
import zarr

numcodecs.blosc.use_threads = False  # encodes run in worker threads (one blosc thread each)


# ----------------------------------------------------------- array layout

def _codec_v3(codecs):
    for c in codecs:
        n, cfg = c["name"], c.get("configuration", {})
        if n == "blosc":
            sh = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[cfg.get("shuffle", "shuffle")]
            return numcodecs.Blosc(cname=cfg["cname"], clevel=cfg["clevel"], shuffle=sh,
                                   blocksize=cfg.get("blocksize", 0))
        if n == "zstd":
            return numcodecs.Zstd(level=cfg.get("level", 3))
        if n == "gzip":
            return numcodecs.GZip(level=cfg.get("level", 5))
    return None


def read_layout(arr):
    """The output array of tessera: format, shape, chunk, shard, dtype, codec."""
    p3 = os.path.join(arr, "zarr.json")
    if os.path.exists(p3):
        m = json.load(open(p3))
        shard = tuple(m["chunk_grid"]["configuration"]["chunk_shape"])
        sc = m["codecs"][0]
        assert sc["name"] == "sharding_indexed", "expected tessera's sharded 0.5 array"
        cfg = sc["configuration"]
        assert cfg["index_location"] == "end"
        return dict(fmt="0.5", shape=tuple(m["shape"]), chunk=tuple(cfg["chunk_shape"]), shard=shard,
                    dtype=np.dtype(m["data_type"]), codec=_codec_v3(cfg["codecs"]))
    m = json.load(open(os.path.join(arr, ".zarray")))
    assert m.get("dimension_separator") == "/"
    comp = numcodecs.get_codec(m["compressor"]) if m["compressor"] else None
    return dict(fmt="0.4", shape=tuple(m["shape"]), chunk=tuple(m["chunks"]), shard=None,
                dtype=np.dtype(m["dtype"]), codec=comp)


def copy_metadata(src, dst):
    """Every metadata file of tessera's store (not its chunks): OUT becomes a
    complete store with the same groups and attributes."""
    names = {"zarr.json", ".zarray", ".zattrs", ".zgroup"}
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        dirs[:] = [d for d in dirs if d != "c" and not (os.path.exists(os.path.join(root, ".zarray")))]
        for f in files:
            if f in names:
                os.makedirs(os.path.join(dst, rel), exist_ok=True)
                shutil.copyfile(os.path.join(root, f), os.path.join(dst, rel, f))


# ------------------------------------------------------------------ crc32c

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = _crc32c_table()


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _CRC_T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


EMPTY = 2 ** 64 - 1


# ---------------------------------------------------------------- the loop

def tile_weights(h, w, exponent):
    mask = np.ones((h, w), dtype=bool)
    mask[0, :] = mask[-1, :] = mask[:, 0] = mask[:, -1] = False
    return ((scipy.ndimage.distance_transform_edt(mask) + 1e-6) ** exponent).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plate")
    ap.add_argument("shifts")
    ap.add_argument("out")
    ap.add_argument("--like", required=True, help="tessera's output store of the same plate")
    ap.add_argument("--band", type=int, required=True, help="band height (tessera's block), px")
    ap.add_argument("--well", default="A/1")
    ap.add_argument("--exponent", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--loaders", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--compare", action="store_true")
    a = ap.parse_args()

    like_arr = os.path.join(a.like, a.well, "0", "0")
    L = read_layout(like_arr)
    shutil.rmtree(a.out, ignore_errors=True)
    copy_metadata(a.like, a.out)
    arr = os.path.join(a.out, a.well, "0", "0")
    _, C, Z, H, W = L["shape"]
    ch, cw = L["chunk"][-2:]
    bh = a.band
    if L["fmt"] == "0.5":
        assert L["shard"][-2] == bh, "a band is one shard row"
    codec, out_dtype = L["codec"], L["dtype"]

    t_start = time.perf_counter()
    with open(a.shifts) as f:
        doc = yaml.load(f, Loader=yaml.CSafeLoader)
    names, origins = [], []
    for k, v in doc["total_translation"].items():
        w, n = k.rsplit("/", 1)
        if w == a.well:
            names.append(n)
            origins.append((int(round(v[0])), int(round(v[1]))))
    oy0 = min(o[0] for o in origins)
    ox0 = min(o[1] for o in origins)
    origins = [(y - oy0, x - ox0) for y, x in origins]
    tile_arrays = [zarr.open_array(os.path.join(a.plate, a.well, n, "0"), mode="r") for n in names]
    shapes = [t.shape[-2:] for t in tile_arrays]

    bands = [(y0, min(y0 + bh, H)) for y0 in range(0, H, bh)]
    touches = [[i for i, ((oy, _), (h, _)) in enumerate(zip(origins, shapes)) if oy < y1 and oy + h > y0]
               for y0, y1 in bands]

    loader = cf.ThreadPoolExecutor(a.loaders)
    writer = cf.ThreadPoolExecutor(a.workers)
    flusher = cf.ThreadPoolExecutor(1)

    def load(i):
        return tile_arrays[i][0]  # (C, Z, h, w) of timepoint 0

    pending_loads = {}

    def prefetch(b):
        if b < len(bands) and b not in pending_loads:
            pending_loads[b] = {i: loader.submit(load, i) for i in touches[b]}

    ph = dict(read_wait=0.0, weights=0.0, accumulate=0.0, normalise=0.0, write_wait=0.0)
    weights_first = None  # the first band's weights: what computing them once per run would cost
    band_writes = []  # futures per band, to bound what is queued

    def write_chunk(key, block):
        if block.shape[-2:] != (ch, cw):  # edge chunk: zero-padded to the full chunk shape
            full = np.zeros(block.shape[:-2] + (ch, cw), dtype=block.dtype)
            full[..., :block.shape[-2], :block.shape[-1]] = block
            block = full
        data = codec.encode(np.ascontiguousarray(block)) if codec else block.tobytes()
        path = os.path.join(arr, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def encode_inner(block):
        if not block.any():
            return None
        return codec.encode(np.ascontiguousarray(block)) if codec else block.tobytes()

    def flush_shard_row(sy, buf):
        """Encode every inner chunk of the shard row in parallel, then one
        file per shard: chunks || index || crc32c."""
        sh, sw = L["shard"][-2:]
        scs = L["shard"][1]
        n_sx = -(-W // sw)
        jobs = []
        for sx in range(n_sx):
            for c in range(scs):
                for iy in range(sh // ch):
                    for ix in range(sw // cw):
                        x0 = sx * sw + ix * cw
                        jobs.append((sx, buf[c, 0, iy * ch:(iy + 1) * ch, x0:x0 + cw]))
        encoded = list(writer.map(lambda j: encode_inner(j[1]), jobs))
        per = scs * (sh // ch) * (sw // cw)
        for sx in range(n_sx):
            parts, index, off = [], [], 0
            for e in encoded[sx * per:(sx + 1) * per]:
                if e is None:
                    index += [EMPTY, EMPTY]
                else:
                    parts.append(e)
                    index += [off, len(e)]
                    off += len(e)
            if not parts:
                continue  # an all-fill shard is not written
            ib = struct.pack("<%dQ" % len(index), *index)
            path = os.path.join(arr, "c", "0", "0", "0", str(sy), str(sx))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"".join(parts) + ib + struct.pack("<I", crc32c(ib)))

    for b in range(a.prefetch):
        prefetch(b)
    for b, (y0, y1) in enumerate(bands):
        for k in range(1, a.prefetch + 1):
            prefetch(b + k)
        t = time.perf_counter()
        tiles = {i: f.result() for i, f in pending_loads.pop(b).items()}  # the band's tile cache
        ph["read_wait"] += time.perf_counter() - t

        t = time.perf_counter()
        wcache = {}
        for i in touches[b]:
            if shapes[i] not in wcache:
                wcache[shapes[i]] = tile_weights(*shapes[i], a.exponent)
        ph["weights"] += time.perf_counter() - t
        if weights_first is None:
            weights_first = ph["weights"]

        t = time.perf_counter()
        numer = np.zeros((C, Z, y1 - y0, W), dtype=np.float32)
        denom = np.zeros((C, Z, y1 - y0, W), dtype=np.float32)
        for i in touches[b]:
            (oy, ox), (h, w) = origins[i], shapes[i]
            ty0, ty1 = max(y0, oy) - oy, min(y1, oy + h) - oy
            tw = min(w, W - ox)
            v = tiles[i][:C, :Z, ty0:ty1, :tw].astype(np.float32)
            wm = wcache[(h, w)][ty0:ty1, :tw] * (v != 0)
            dst = (slice(None), slice(None), slice(oy + ty0 - y0, oy + ty1 - y0), slice(ox, ox + tw))
            numer[dst] += v * wm
            denom[dst] += wm
        del tiles
        ph["accumulate"] += time.perf_counter() - t

        t = time.perf_counter()
        norm = numer / np.maximum(denom, 1e-12)
        del numer, denom
        norm = np.nan_to_num(norm)
        if out_dtype == np.uint16:
            norm = norm.astype(np.uint16)
        ph["normalise"] += time.perf_counter() - t

        if L["fmt"] == "0.4":
            futs = []
            for c in range(C):
                for z in range(Z):
                    for cy in range(y0 // ch, -(-y1 // ch)):
                        for cx in range(-(-W // cw)):
                            blk = norm[c, z, cy * ch - y0:(cy + 1) * ch - y0, cx * cw:(cx + 1) * cw]
                            futs.append(writer.submit(write_chunk, "0/%d/%d/%d/%d" % (c, z, cy, cx), blk))
        else:
            # _SHARD_BATCH: the block write copies into the shard-row buffer; then the flush.
            buf = np.zeros((C, Z, bh, -(-W // L["shard"][-1]) * L["shard"][-1]), dtype=out_dtype)
            buf[:, :, :y1 - y0, :W] = norm
            futs = [flusher.submit(flush_shard_row, y0 // bh, buf)]
        del norm
        band_writes.append(futs)
        t = time.perf_counter()
        if len(band_writes) > 2:  # at most two bands queued for writing
            for f in band_writes.pop(0):
                f.result()
        ph["write_wait"] += time.perf_counter() - t

    t = time.perf_counter()
    for futs in band_writes:
        for f in futs:
            f.result()
    writer.shutdown()
    flusher.shutdown()
    loader.shutdown()
    ph["write_wait"] += time.perf_counter() - t
    total = time.perf_counter() - t_start
    mp = C * Z * H * W / 1e6
    print("old-tool model (%s output, %s, band %d px, %d write workers, %d loaders, prefetch %d): %.3f s = %.2f "
          "output MP/s; %s (first band's %.2f s); peak_rss_mb=%.1f" % (
              L["fmt"], codec.codec_id + (":" + codec.cname if hasattr(codec, "cname") else "") if codec else "raw",
              bh, a.workers, a.loaders, a.prefetch, total, mp / total,
              ", ".join("%s %.2f s" % kv for kv in ph.items()), weights_first,
              resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    sys.stdout.flush()

    if a.compare:
        ref = read_array(like_arr, L).astype(np.float64)
        got = read_array(arr, L).astype(np.float64)
        d = np.abs(ref - got)
        print("compare with tessera (%s): max |difference| %.6g (%s), %d of %d pixels differ%s" % (
            out_dtype, d.max(), "grey levels" if out_dtype == np.uint16 else "relative %.3g" % (
                (d / np.maximum(np.abs(ref), 1e-30)).max()), int((d > 0).sum()), d.size,
            ", zero exactly where tessera's is" if np.array_equal(ref == 0, got == 0) else
            ", ZERO PATTERN DIFFERS"))


def read_array(arr, L):
    """The whole array back, both layouts (missing chunks/empty inner chunks
    are the fill value 0)."""
    if L["fmt"] == "0.4":
        return zarr.open_array(arr, mode="r")[...]
    shape, dt = L["shape"], L["dtype"]
    sc, ch = L["shard"], L["chunk"]
    out = np.zeros(shape, dtype=dt)
    per = [sc[d] // ch[d] for d in range(5)]
    n = int(np.prod(per))
    for sy in range(-(-shape[3] // sc[3])):
        for sx in range(-(-shape[4] // sc[4])):
            for scc in range(-(-shape[1] // sc[1])):
                p = os.path.join(arr, "c", "0", str(scc), "0", str(sy), str(sx))
                if not os.path.exists(p):
                    continue
                b = open(p, "rb").read()
                ib = b[-(16 * n + 4):-4]
                assert struct.unpack("<I", b[-4:])[0] == crc32c(ib), p + ": index crc32c"
                idx = struct.unpack("<%dQ" % (2 * n), ib)
                for k, pos in enumerate(np.ndindex(*per)):
                    off, nb = idx[2 * k], idx[2 * k + 1]
                    if off == EMPTY:
                        continue
                    raw = L["codec"].decode(b[off:off + nb]) if L["codec"] else b[off:off + nb]
                    blk = np.frombuffer(raw, dtype=dt).reshape(ch)
                    y0, x0 = sy * sc[3] + pos[3] * ch[3], sx * sc[4] + pos[4] * ch[4]
                    c0 = scc * sc[1] + pos[1]
                    if y0 >= shape[3] or x0 >= shape[4] or c0 >= shape[1]:
                        continue
                    hh, ww = min(ch[3], shape[3] - y0), min(ch[4], shape[4] - x0)
                    out[0, c0, 0, y0:y0 + hh, x0:x0 + ww] = blk[0, 0, 0, :hh, :ww]
    return out


if __name__ == "__main__":
    main()

// Writes v3 arrays with zarrita for tessera to read:
//   node zarr_write.mjs STORE_DIR
// prints [{name, dtype, shape, values}] for the arrays it managed to write.
// zarrita 0.7.5 writes chunks through its codec pipeline; it cannot encode
// sharding_indexed ("set on sharded arrays"), gzip or crc32c, so those are
// attempted and reported on stderr as skipped.
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";
import { mkdirSync } from "node:fs";

const dir = process.argv[2];
mkdirSync(dir, { recursive: true });
const store = new FileSystemStore(dir);
const root = await zarr.create(store);

const cases = [
  { name: "u16_blosc_zstd_bit", dtype: "uint16", shape: [37, 50], chunk: [16, 16], fill: 0,
    codecs: [{ name: "bytes", configuration: { endian: "little" } },
             { name: "blosc", configuration: { cname: "zstd", clevel: 3, shuffle: "bitshuffle", typesize: 2, blocksize: 0 } }] },
  { name: "i32_be_zstd", dtype: "int32", shape: [20, 9], chunk: [8, 4], fill: -1,
    codecs: [{ name: "bytes", configuration: { endian: "big" } }, { name: "zstd", configuration: { level: 1, checksum: false } }] },
  { name: "f32_transpose_zstd", dtype: "float32", shape: [13, 17, 3], chunk: [5, 8, 3], fill: 0,
    codecs: [{ name: "transpose", configuration: { order: [2, 0, 1] } },
             { name: "bytes", configuration: { endian: "little" } },
             { name: "zstd", configuration: { level: 3, checksum: false } }] },
  { name: "u8_blosc", dtype: "uint8", shape: [40], chunk: [16], fill: 9,
    codecs: [{ name: "bytes" }, { name: "blosc", configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 1, blocksize: 0 } }] },
  { name: "u16_sharded", dtype: "uint16", shape: [20, 20], chunk: [16, 16], fill: 0,
    codecs: [{ name: "sharding_indexed", configuration: { chunk_shape: [8, 8],
              codecs: [{ name: "bytes", configuration: { endian: "little" } }],
              index_codecs: [{ name: "bytes", configuration: { endian: "little" } }, { name: "crc32c" }],
              index_location: "end" } }] },
];

const out = [];
const Ctor = { uint16: Uint16Array, int32: Int32Array, float32: Float32Array, uint8: Uint8Array };
for (const c of cases) {
  const n = c.shape.reduce((a, b) => a * b, 1);
  const values = new Ctor[c.dtype](n);
  for (let i = 0; i < n; i++) {
    values[i] = c.dtype === "float32" ? (i * 0.37 - 20.5) : (i * 7919) % 251 + (c.dtype === "int32" ? -100 : 0);
  }
  try {
    const arr = await zarr.create(root.resolve(c.name), {
      shape: c.shape, chunkShape: c.chunk, dtype: c.dtype, codecs: c.codecs, fillValue: c.fill,
    });
    const stride = c.shape.map((_, k) => c.shape.slice(k + 1).reduce((a, b) => a * b, 1));
    await zarr.set(arr, null, { data: values, shape: c.shape, stride });
    out.push({ name: c.name, dtype: c.dtype, shape: c.shape, values: Array.from(values) });
  } catch (e) {
    console.error(`zarrita cannot write ${c.name}: ${e && e.message || e}`);
  }
}
console.log(JSON.stringify(out));

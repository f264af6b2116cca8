// Reads zarr arrays with zarrita (an implementation nobody here wrote) and
// dumps each as raw little-endian C-order bytes plus a JSON line:
//   node zarr_dump.mjs ARRAY_DIR OUT.bin [ARRAY_DIR OUT.bin ...]
// prints, per array, {"path", "shape", "dtype", "ok"} or {"path", "ok": false, "error"}.
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";
import { writeFileSync } from "node:fs";

// zarrita may hand back F-ordered strides (transpose codec, v2 order F).
function toCOrder(bytes, es, shape, stride) {
  const n = shape.reduce((a, b) => a * b, 1);
  let c = 1, isC = true;
  for (let k = shape.length - 1; k >= 0; k--) {
    if (shape[k] > 1 && stride[k] !== c) isC = false;
    c *= shape[k];
  }
  if (isC) return bytes;
  const out = new Uint8Array(n * es);
  const idx = new Array(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let k = 0; k < shape.length; k++) off += idx[k] * stride[k];
    out.set(bytes.subarray(off * es, off * es + es), i * es);
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

const args = process.argv.slice(2);
for (let i = 0; i + 1 < args.length; i += 2) {
  const [dir, out] = [args[i], args[i + 1]];
  try {
    const store = new FileSystemStore(dir);
    const arr = await zarr.open(store, { kind: "array" });
    const chunk = await zarr.get(arr);
    const d = chunk.data;
    let bytes;
    if (Array.isArray(d)) throw new Error(`non-numeric data type ${arr.dtype}`);
    bytes = toCOrder(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), d.BYTES_PER_ELEMENT,
                     chunk.shape, chunk.stride);
    // zarrita returns native (little-endian on every machine we run) typed arrays.
    writeFileSync(out, bytes);
    console.log(JSON.stringify({ path: dir, ok: true, shape: arr.shape, dtype: arr.dtype,
                                 stride: chunk.stride }));
  } catch (e) {
    console.log(JSON.stringify({ path: dir, ok: false, error: String(e && e.message || e) }));
  }
}

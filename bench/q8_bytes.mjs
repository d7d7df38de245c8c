// Hash of the output bytes of int8 bundles under given .wasm builds, 3 random inputs each (bit-exactness check).
//   node --experimental-wasm-relaxed-simd bench/q8_bytes.mjs BUNDLE[,BUNDLE...] A.wasm [B.wasm ...]
import { readFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { Session } from '../web/src/index.js';
const [bundles, ...wasms] = process.argv.slice(2);
let bad = 0;
for (const bundle of bundles.split(',')) {
  const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
  const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
  const hashes = [];
  for (const w of wasms) {
    const { instance } = await WebAssembly.instantiate(await readFile(w), {});
    const s = new Session(instance, plan, manifest, path.basename(w));
    const h = createHash('sha256');
    let seed = 12345;
    const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 2 ** 32; };
    for (let t = 0; t < 3; t++) {
      const feeds = {};
      for (const i of manifest.inputs) { const n = i.shape.reduce((a, d) => a * d, 1); feeds[i.name] = { data: Float32Array.from({ length: n }, () => (rnd() + rnd() + rnd() - 1.5) * 2), dims: i.shape }; }
      const out = s.runSync(feeds);
      for (const k of Object.keys(out).sort()) h.update(new Uint8Array(out[k].data.buffer));
    }
    hashes.push(h.digest('hex').slice(0, 16));
  }
  const same = hashes.every((x) => x === hashes[0]);
  if (!same) bad++;
  console.log(`${path.basename(bundle).padEnd(20)} ${hashes.join(' ')} ${same ? 'SAME' : 'DIFFERENT'}`);
}
process.exit(bad ? 1 : 0);

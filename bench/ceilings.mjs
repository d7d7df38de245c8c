// The ceilings of one wasm thread (bench/fma_peak.c, built by bench/fma_peak.py) as probes that node_bench.mjs
// interleaves with the runtimes it times (--ceilings DIR): a bound and the time it bounds are then measured in one
// process, with the same flags, in the same rounds, under the same load. Each probe's `work` per run (FLOPs or
// bytes) over its CPU time per run is its rate.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const PEAK_ITERS = 1_000_000;        // 12 chains x 4 lanes x 2 FLOPs per iteration: 96 MFLOP per run
const PAGE = 65536;

async function instantiate(dir, variant) {
  const { instance } = await WebAssembly.instantiate(await readFile(path.join(dir, `${variant}.wasm`)), {});
  return instance.exports;
}

/** peak-simd (mul + add), peak-relaxed (FMA; where `relaxed` validates) and stream (a pass over streamMB MB). */
export async function ceilingProbes(dir, { streamMB = 256, relaxed = true } = {}) {
  const probes = [];
  for (const v of relaxed ? ['simd', 'relaxed'] : ['simd']) {
    const ex = await instantiate(dir, v);
    probes.push({ name: `peak-${v}`, unit: 'FLOP', work: PEAK_ITERS * 96, run: () => ex.peak(PEAK_ITERS, 0.5) });
  }
  const ex = await instantiate(dir, 'simd');
  const bytes = Math.ceil((streamMB * 1048576) / PAGE) * PAGE;
  const base = ex.memory.buffer.byteLength;   // past the module's data and stack: the pages grown here are ours
  ex.memory.grow(bytes / PAGE);
  // written once: pages never written read as the kernel's one shared zero page, from cache
  new Float32Array(ex.memory.buffer, base, bytes / 4).fill(1);
  probes.push({ name: 'stream', unit: 'byte', work: bytes, run: () => ex.stream(base, bytes / 4) });
  return probes;
}

#!/usr/bin/env node
// edgepack vs onnxruntime-web (wasm, 1 thread, SIMD) vs native onnxruntime (onnxruntime-node, 1 thread),
// in ONE Node process on the same random input. Outputs are checked to agree before anything is timed.
//
//   node node_bench.mjs MODEL.onnx BUNDLE_DIR [--seconds 3] [--rounds 10] [--slice 0.5]
//        [--variants simd,relaxed] [--no-ort-web] [--no-native] [--atol 1e-4] [--rtol 1e-3] [--json OUT]
//        [--save-io DIR]   (writes the inputs and edgepack's outputs as raw files + io.json, for bench/run.py)
//        [--inputs DIR]    (the inputs from DIR/io.json, as --save-io writes them, instead of seeded random ones)
//        [--threads N]     (adds edgepack-threads.wasm with N threads; onnxruntime-web and native then use N threads
//                           too: ort-web reads numThreads once per process, so 1- and N-thread ort-web cannot be mixed)
//        [--ort-spin on|off] (off: onnxruntime-web's and native's intra-op threads do not spin-wait after their runs,
//                           session option session.intra_op.allow_spinning = 0; default on, onnxruntime's default)
//        [--pause MS]      (an idle pause of MS before each runtime's slice: another runtime's spinning threads stop)
//        [--ceilings DIR] [--stream-mb 256]   (adds the machine's ceilings, bench/ceilings.mjs, to every round: the
//                           FMA peak and the memory streaming rate of one wasm thread; DIR holds fma_peak.py's builds)
//
// Warm-up is by time (V8 tiers wasm up late), then the runtimes are interleaved A B C A B C ... for
// --rounds rounds of --slice seconds each, so a machine-wide slowdown burst hits all of them alike.
// Relaxed SIMD needs --experimental-wasm-relaxed-simd on Node 20: without it the script re-runs itself with it.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { detectVariant, load } from '../web/src/index.js';
import { ceilingProbes } from './ceilings.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RELAXED_FLAG = '--experimental-wasm-relaxed-simd';

function parseArgs(argv) {
  const a = { seconds: 3, rounds: 10, slice: 0.5, variants: 'simd,relaxed', ortWeb: true, native: true,
    atol: 1e-4, rtol: 1e-3, json: null, saveIo: null, inputs: null, seed: 1, threads: 0, ceilings: null, streamMB: 256, ortSpin: true, pauseMs: 0, pos: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const val = () => { if (i + 1 >= argv.length) throw new Error(`${k} needs a value`); return argv[++i]; };
    if (k === '--seconds') a.seconds = Number(val());
    else if (k === '--rounds') a.rounds = Number(val());
    else if (k === '--slice') a.slice = Number(val());
    else if (k === '--variants') a.variants = val();
    else if (k === '--atol') a.atol = Number(val());
    else if (k === '--rtol') a.rtol = Number(val());
    else if (k === '--seed') a.seed = Number(val());
    else if (k === '--threads') a.threads = Number(val());
    else if (k === '--json') a.json = val();
    else if (k === '--save-io') a.saveIo = val();
    else if (k === '--inputs') a.inputs = val();
    else if (k === '--ceilings') a.ceilings = val();
    else if (k === '--stream-mb') a.streamMB = Number(val());
    else if (k === '--ort-spin') {
      const v = val();
      if (v !== 'on' && v !== 'off') throw new Error(`--ort-spin takes on or off, not ${v}`);
      a.ortSpin = v === 'on';
    } else if (k === '--pause') a.pauseMs = Number(val());
    else if (k === '--no-ort-web') a.ortWeb = false;
    else if (k === '--no-native') a.native = false;
    else if (k === '-h' || k === '--help') { console.log(usage()); process.exit(0); }
    else if (k.startsWith('--')) throw new Error(`unknown option ${k}\n${usage()}`);
    else a.pos.push(k);
  }
  if (a.pos.length !== 2) throw new Error(usage());
  if (!(Number.isFinite(a.pauseMs) && a.pauseMs >= 0)) throw new Error(`--pause takes milliseconds >= 0`);
  return a;
}
const usage = () => 'usage: node node_bench.mjs MODEL.onnx BUNDLE_DIR [--seconds S] [--rounds R] [--slice S] ' +
  '[--variants simd,relaxed,scalar] [--no-ort-web] [--no-native] [--atol A] [--rtol R] [--seed N] [--json OUT] [--save-io DIR] [--inputs DIR] [--threads N] ' +
  '[--ort-spin on|off] [--pause MS] [--ceilings DIR] [--stream-mb MB]';

/** Node 20 hides relaxed SIMD behind a flag: re-run this script once with it (not if the flag is unknown). */
function maybeReexec() {
  if (detectVariant() === 'relaxed' || process.execArgv.includes(RELAXED_FLAG) || process.env.EDGEPACK_BENCH_CHILD) return;
  const r = spawnSync(process.execPath, [RELAXED_FLAG, ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    { stdio: 'inherit', env: { ...process.env, EDGEPACK_BENCH_CHILD: '1' } });
  if (r.status === 9 && r.signal === null) return;   // node: bad option -> run here without relaxed
  process.exit(r.status ?? 1);
}

// Seeded inputs (mulberry32 + Box-Muller): normal floats, small non-negative ints (valid indices), 0/1 bools.
function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s + 0x6d2b79f5) >>> 0; let t = s; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}
function makeInputs(specs, seed) {
  const r = rng(seed);
  const out = {};
  for (const s of specs) {
    const n = s.shape.reduce((a, d) => a * d, 1);
    let data;
    if (s.dtype === 'float32') data = Float32Array.from({ length: n }, () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r()));
    else if (s.dtype === 'int64') data = BigInt64Array.from({ length: n }, () => BigInt(Math.floor(r() * 8)));
    else if (s.dtype === 'int32') data = Int32Array.from({ length: n }, () => Math.floor(r() * 8));
    else if (s.dtype === 'bool') data = Uint8Array.from({ length: n }, () => (r() < 0.5 ? 1 : 0));
    else throw new Error(`input '${s.name}': dtype ${s.dtype} not supported by the benchmark`);
    out[s.name] = { data, dims: s.shape.slice(), dtype: s.dtype };
  }
  return out;
}

const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array };

/** Inputs saved as saveIo writes them (bench/run.py writes a model's realistic inputs so): DIR/io.json + raw files.
 * Every input there goes to onnxruntime; edgepack takes those its manifest lists (one bound at package time, as
 * silero_vad's `sr` by --const, is not an input of the bundle). */
async function readInputs(dir, specs) {
  const fs = await import('node:fs/promises');
  const index = JSON.parse(await fs.readFile(path.join(dir, 'io.json'), 'utf8')).inputs;
  const out = {};
  for (const [name, m] of Object.entries(index)) {
    if (!ARRAYS[m.dtype]) throw new Error(`input '${name}': dtype ${m.dtype} not supported by the benchmark`);
    const b = await fs.readFile(path.join(dir, m.file));
    out[name] = { data: new ARRAYS[m.dtype](b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), dims: m.dims, dtype: m.dtype };
  }
  for (const s of specs) if (!out[s.name]) throw new Error(`${dir}/io.json has no input '${s.name}'`);
  return out;
}

/** The model bytes for onnxruntime, with ir_version lowered to ORT_MAX_IR like packager/reference.py's reference run:
 * onnx writes newer IR versions than onnxruntime 1.30 reads. ir_version is ModelProto field 1 (a varint), written first. */
const ORT_MAX_IR = 10;
async function ortModelBytes(modelPath) {
  const b = new Uint8Array(await (await import('node:fs/promises')).readFile(modelPath));
  if (b[0] === 0x08 && b[1] > ORT_MAX_IR && b[1] < 0x80) b[1] = ORT_MAX_IR;
  return b;
}

const ORT_TYPES = { float32: 'float32', int64: 'int64', int32: 'int32', bool: 'bool' };

/** onnxruntime's session config entry that stops its intra-op pool spin-waiting for work after a run (both runtimes
 * read `extra` as config entries); absent = onnxruntime's default, spinning. */
const noSpin = (spin) => (spin ? {} : { extra: { session: { intra_op: { allow_spinning: '0' } } } });

async function ortWebRunner(modelPath, inputs, threads, spin = true) {
  const ort = await import('onnxruntime-web').catch((e) => {
    throw new Error(`onnxruntime-web not installed (run \`npm install\` in bench/): ${e.message}`);
  });
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = pathToFileURL(path.join(HERE, 'node_modules/onnxruntime-web/dist/')).href;
  ort.env.logLevel = 'error';
  const sess = await ort.InferenceSession.create(await ortModelBytes(modelPath), { executionProviders: ['wasm'], graphOptimizationLevel: 'all', ...noSpin(spin) });
  const feeds = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, new ort.Tensor(ORT_TYPES[t.dtype], t.data, t.dims)]));
  return { name: 'ort-web', version: ort.env.versions?.web, detail: `wasm backend, numThreads=${threads}, SIMD${spin ? '' : ', no spinning'}`,
    run: () => sess.run(feeds), close: () => sess.release() };
}

async function nativeRunner(modelPath, inputs, threads, spin = true) {
  let ort;
  try {
    ort = createRequire(import.meta.url)('onnxruntime-node');
  } catch (e) {
    return { unavailable: `onnxruntime-node not loadable: ${String(e.message).split('\n')[0]}` };
  }
  const sess = await ort.InferenceSession.create(await ortModelBytes(modelPath), { executionProviders: ['cpu'], intraOpNumThreads: threads,
    interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all', ...noSpin(spin) });
  const feeds = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, new ort.Tensor(ORT_TYPES[t.dtype], t.data, t.dims)]));
  return { name: 'native', version: ort.env?.versions?.node, detail: `onnxruntime-node CPU, intraOpNumThreads=${threads}${spin ? '' : ', no spinning'}`,
    run: () => sess.run(feeds), close: () => sess.release() };
}

async function edgepackRunner(bundle, variant, inputs, threads = 0) {
  const sess = await load(bundle, threads ? { threads } : { variant });
  const feeds = Object.fromEntries(sess.inputs.map(({ name }) => [name, { data: inputs[name].data, dims: inputs[name].dims }]));
  return { name: `edgepack-${variant}`, detail: `variant ${sess.variant}, vec ${sess.vec}${threads ? `, ${threads} threads` : ''}`,
    run: () => sess.run(feeds), close: () => sess.close() };
}

/** Raw little-endian files + io.json {inputs|outputs: {name: {file, dtype, dims}}}: lets another process
 * (bench/run.py's Python onnxruntime) time the same inputs and check it gets the same answer. */
async function saveIo(dir, inputs, outputs) {
  const fs = await import('node:fs/promises');
  await fs.mkdir(dir, { recursive: true });
  const index = { inputs: {}, outputs: {} };
  const put = async (kind, name, t, dtype) => {
    const file = `${kind}_${Object.keys(index[kind]).length}.bin`;
    await fs.writeFile(path.join(dir, file), new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    index[kind][name] = { file, dtype, dims: t.dims };
  };
  for (const [n, t] of Object.entries(inputs)) await put('inputs', n, t, t.dtype);
  const dtypes = { Float32Array: 'float32', BigInt64Array: 'int64', Int32Array: 'int32', Uint8Array: 'bool' };
  for (const [n, t] of Object.entries(outputs || {})) await put('outputs', n, t, dtypes[t.data.constructor.name] || 'uint8');
  await fs.writeFile(path.join(dir, 'io.json'), JSON.stringify(index, null, 1));
}

const toNumbers = (d) => (d instanceof BigInt64Array ? Array.from(d, Number) : d);

/** Max abs diff of every output against the reference; throws when beyond atol + rtol * max|ref|. */
function compareOutputs(ref, got, names, atol, rtol) {
  const res = {};
  for (const n of names) {
    const a = ref[n], b = got[n];
    if (!b) throw new Error(`output '${n}' missing`);
    const dims = Array.from(b.dims, Number);
    if (a.dims.length !== dims.length || a.dims.some((d, i) => d !== dims[i])) throw new Error(`output '${n}': dims [${dims}] vs [${a.dims}]`);
    const x = toNumbers(a.data), y = toNumbers(b.data);
    let diff = 0, mag = 0;
    for (let i = 0; i < x.length; i++) {
      const d = Math.abs(x[i] - y[i]);
      diff = Number.isNaN(d) ? (Number.isNaN(x[i]) && Number.isNaN(y[i]) ? diff : Infinity) : Math.max(diff, d);
      mag = Math.max(mag, Math.abs(x[i]));
    }
    res[n] = diff;
    if (!(diff <= atol + rtol * mag)) throw new Error(`output '${n}': max abs diff ${diff.toExponential(3)} (max |ref| ${mag.toPrecision(4)}) exceeds tolerance`);
  }
  return res;
}

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => { const i = p * (s.length - 1), lo = Math.floor(i); return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (i - lo); };
  return { n: s.length, median_ms: q(0.5), p10_ms: q(0.1), p90_ms: q(0.9), min_ms: s[0] };
}
const median = (xs) => stats(xs).median_ms;

/** Runs r for `seconds`; per run, pushes the wall-clock ms to sink and this process's CPU ms to cpuSink. */
async function timeFor(r, seconds, sink, cpuSink) {
  const end = performance.now() + seconds * 1000;
  let n = 0;
  do {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await r.run();
    const dt = performance.now() - t0;
    const c = process.cpuUsage(c0);
    if (sink) sink.push(dt);
    if (cpuSink) cpuSink.push((c.user + c.system) / 1000);
    n++;
  } while (performance.now() < end);
  return n;
}

async function main() {
  maybeReexec();
  const a = parseArgs(process.argv.slice(2));
  const [modelPath, bundle] = a.pos.map((p) => path.resolve(p));
  const manifest = JSON.parse(await (await import('node:fs/promises')).readFile(path.join(bundle, 'manifest.json'), 'utf8'));
  const inputs = a.inputs ? await readInputs(path.resolve(a.inputs), manifest.inputs) : makeInputs(manifest.inputs, a.seed);
  const outNames = manifest.outputs.map((o) => o.name);
  const best = detectVariant();
  const runners = [];
  const skipped = {};
  for (const v of a.variants.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (v === 'relaxed' && best !== 'relaxed') { skipped[`edgepack-${v}`] = 'relaxed SIMD does not validate in this engine'; continue; }
    runners.push(await edgepackRunner(bundle, v, inputs));
  }
  if (a.threads > 0) runners.push(await edgepackRunner(bundle, 'threads', inputs, a.threads));
  const others = Math.max(1, a.threads);
  if (a.ortWeb) runners.push(await ortWebRunner(modelPath, inputs, others, a.ortSpin));
  if (a.native) {
    const r = await nativeRunner(modelPath, inputs, others, a.ortSpin);
    if (r.unavailable) skipped.native = r.unavailable; else runners.push(r);
  }

  // Correctness first: every runtime against the first (onnxruntime native if present, else ort-web, else edgepack-simd).
  const norm = (o) => Object.fromEntries(outNames.map((n) => [n, o[n] && { data: o[n].data, dims: Array.from(o[n].dims, Number) }]));
  const results = new Map();
  for (const r of runners) results.set(r.name, norm(await r.run()));
  const ref = ['native', 'ort-web'].find((n) => results.has(n)) || runners[0].name;
  const agreement = {};
  for (const r of runners) {
    if (r.name === ref) continue;
    try {
      agreement[r.name] = compareOutputs(results.get(ref), results.get(r.name), outNames, a.atol, a.rtol);
    } catch (e) {
      console.error(`REFUSING TO BENCHMARK: ${r.name} disagrees with ${ref}: ${e.message}`);
      process.exit(2);
    }
  }
  if (a.saveIo) await saveIo(a.saveIo, inputs, results.get(runners.find((r) => r.name.startsWith('edgepack-'))?.name));
  const maxDiff = Object.fromEntries(Object.entries(agreement).map(([k, v]) => [k, Math.max(...Object.values(v))]));
  console.log(`outputs agree with ${ref}: ` + Object.entries(maxDiff).map(([k, v]) => `${k} max abs diff ${v.toExponential(2)}`).join(', '));

  // not runtimes: no outputs to check, and no ratios against ort-web; timed in the same rounds as the runtimes
  const probes = a.ceilings ? await ceilingProbes(path.resolve(a.ceilings), { streamMB: a.streamMB, relaxed: best === 'relaxed' }) : [];
  for (const r of [...runners, ...probes]) {
    const s = probes.includes(r) ? Math.min(a.seconds, 1) : a.seconds;
    const n = await timeFor(r, s);
    console.log(`warm-up ${r.name}: ${n} runs in ${s}s`);
  }
  const timed = [...runners, ...probes];
  const samples = Object.fromEntries(timed.map((r) => [r.name, []]));
  const roundMedians = Object.fromEntries(timed.map((r) => [r.name, []]));
  // CPU time of this process per run: on a machine shared with other jobs it measures the runtime's own work
  // (wall time also measures the others). Meaningless for multi-threaded runs (it sums the threads).
  const cpuSamples = Object.fromEntries(timed.map((r) => [r.name, []]));
  const cpuRoundMedians = Object.fromEntries(timed.map((r) => [r.name, []]));
  for (let round = 0; round < a.rounds; round++) {
    for (const r of timed) {
      const xs = [];
      const cs = [];
      if (a.pauseMs) await new Promise((res) => setTimeout(res, a.pauseMs));
      await timeFor(r, a.slice, xs, cs);
      for (const x of xs) samples[r.name].push(x);
      for (const x of cs) cpuSamples[r.name].push(x);
      roundMedians[r.name].push(median(xs));
      cpuRoundMedians[r.name].push(median(cs));
    }
  }
  const per = {};
  for (const r of runners) {
    per[r.name] = { ...stats(samples[r.name]), cpu_median_ms: median(cpuSamples[r.name]), detail: r.detail, ...(r.version ? { version: r.version } : {}) };
  }
  const single = (name) => name !== 'edgepack-threads' && !(a.threads > 1 && (name === 'ort-web' || name === 'native'));
  const ratios = {};
  for (const ep of runners.filter((r) => r.name.startsWith('edgepack-'))) {
    for (const other of ['ort-web', 'native']) {
      if (!per[other]) continue;
      // paired: within a round the two ran back to back, so a slowdown burst mostly cancels
      const paired = roundMedians[ep.name].map((x, i) => x / roundMedians[other][i]);
      ratios[`${ep.name}/${other}`] = { of_medians: per[ep.name].median_ms / per[other].median_ms, paired_median: median(paired) };
      if (single(ep.name) && single(other)) {
        ratios[`${ep.name}/${other}`].cpu_paired_median = median(cpuRoundMedians[ep.name].map((x, i) => x / cpuRoundMedians[other][i]));
      }
    }
  }
  // speed-up of the threaded build over each single-threaded edgepack build
  for (const ep of runners.filter((r) => r.name.startsWith('edgepack-') && r.name !== 'edgepack-threads')) {
    if (!per['edgepack-threads']) continue;
    const paired = roundMedians[ep.name].map((x, i) => x / roundMedians['edgepack-threads'][i]);
    // the rounds' spread too: the threaded time can switch between a fast and a slow mode within one process
    // (docs/benchmarks.md, "Session 17 (helper thr5)"); the median is what a user gets, min-max shows the modes
    ratios[`${ep.name}/edgepack-threads`] = { of_medians: per[ep.name].median_ms / per['edgepack-threads'].median_ms, paired_median: median(paired),
      paired_min: Math.min(...paired), paired_max: Math.max(...paired) };
  }
  for (const r of runners) await r.close();
  // rates per round from the median CPU time per run of that round (the runtimes' cpu_round_ms pair with them)
  const ceilings = Object.fromEntries(probes.map((p) => {
    const rates = cpuRoundMedians[p.name].map((ms) => p.work / (ms / 1000));
    return [p.name, { unit: `${p.unit}/s`, work: p.work, median: median(rates), max: Math.max(...rates), per_round: rates }];
  }));

  const fmt = (x) => x.toFixed(x < 1 ? 4 : x < 10 ? 3 : 2);
  console.log(`\n${manifest.name}: ${a.rounds} rounds x ${a.slice}s interleaved, ${a.seconds}s warm-up each`);
  console.log('runtime'.padEnd(20) + 'median ms'.padStart(12) + 'p10'.padStart(10) + 'p90'.padStart(10) + 'runs'.padStart(8) + 'CPU ms/run'.padStart(12));
  for (const [k, s] of Object.entries(per)) console.log(k.padEnd(20) + fmt(s.median_ms).padStart(12) + fmt(s.p10_ms).padStart(10) + fmt(s.p90_ms).padStart(10) + String(s.n).padStart(8) + fmt(s.cpu_median_ms).padStart(12));
  for (const [k, v] of Object.entries(ratios)) {
    console.log(`${k}: ${v.of_medians.toFixed(3)} (paired per round: ${v.paired_median.toFixed(3)}${v.cpu_paired_median ? `; CPU time: ${v.cpu_paired_median.toFixed(3)}` : ''})`);
  }
  for (const [k, v] of Object.entries(skipped)) console.log(`skipped ${k}: ${v}`);
  if (probes.length) {
    console.log('ceilings (one thread, CPU time, median of rounds): ' + Object.entries(ceilings).map(([k, c]) =>
      `${k} ${(c.median / 1e9).toFixed(1)} G${c.unit}`).join(', '));
  }

  const report = {
    model: manifest.name, model_path: modelPath, bundle, inputs: manifest.inputs.map(({ name, dtype, shape }) => ({ name, dtype, shape })),
    reference: ref, max_abs_diff: maxDiff, runtimes: per, ratios, skipped,
    cpu_round_ms: Object.fromEntries(runners.map((r) => [r.name, cpuRoundMedians[r.name]])), ceilings,
    settings: { warmup_s: a.seconds, rounds: a.rounds, slice_s: a.slice, seed: a.seed, threads: a.threads, ort_spin: a.ortSpin, pause_ms: a.pauseMs,
      runtimes: runners.map((r) => r.name), ...(a.ceilings ? { stream_mb: a.streamMB } : {}) },
    machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, platform: `${os.platform()}-${os.arch()}`,
      wasm_best_variant: best },
  };
  if (a.json) await (await import('node:fs/promises')).writeFile(a.json, JSON.stringify(report, null, 1) + '\n');
}

main().catch((e) => { console.error(e?.stack || String(e)); process.exit(1); });

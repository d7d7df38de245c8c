#!/usr/bin/env node
// Streaming cost of a voice-activity model: one call per 32 ms frame, the recurrent state carried from call to
// call, edgepack (Node, each wasm build asked for) against onnxruntime-web (wasm, 1 thread, SIMD), in one process.
//
//   node vad_stream.mjs MODEL.onnx BUNDLE_DIR [--calls 300] [--rounds 7] [--variants simd,relaxed] [--json OUT]
//
// Inputs: `input` [1, n] (a 200 Hz tone in noise), `sr` (int64, 16000) where the model or bundle has it, and the state inputs
// (`state`, or `h` and `c`) fed back from the outputs named in STATE_OUT. Rounds interleave the runtimes (A B C A B
// C ...) so that a slowdown of the machine hits all of them; the figure is the median time of one call over all
// rounds (a busy machine's stalls land in the tail, reported as p90). Relaxed SIMD needs --experimental-wasm-relaxed-simd on Node 20: the script re-runs itself with it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { detectVariant, load } from '../web/src/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FLAG = '--experimental-wasm-relaxed-simd';
const STATE_OUT = { state: 'stateN', h: 'hn', c: 'cn' };

if (detectVariant() !== 'relaxed' && !process.execArgv.includes(FLAG) && !process.env.VAD_CHILD) {
  const r = spawnSync(process.execPath, [FLAG, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    { stdio: 'inherit', env: { ...process.env, VAD_CHILD: '1' } });
  if (!(r.status === 9 && r.signal === null)) process.exit(r.status ?? 1);
}

const args = { calls: 300, rounds: 7, variants: 'simd,relaxed', json: null, pos: [] };
for (let i = 2; i < process.argv.length; i++) {
  const k = process.argv[i];
  if (k === '--calls') args.calls = Number(process.argv[++i]);
  else if (k === '--rounds') args.rounds = Number(process.argv[++i]);
  else if (k === '--variants') args.variants = process.argv[++i];
  else if (k === '--json') args.json = process.argv[++i];
  else args.pos.push(k);
}
const [modelPath, bundle] = args.pos;
const manifest = JSON.parse(await fs.readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const n = manifest.inputs.find((s) => s.name === 'input').shape[1];
const audio = Float32Array.from({ length: n }, (_, k) => 0.3 * Math.sin(2 * Math.PI * 200 * k / 16000) + 0.01 * Math.sin(k * 12.9898));
const stateSpecs = manifest.inputs.filter((s) => s.name in STATE_OUT);
const bundleSr = manifest.inputs.some((s) => s.name === 'sr');   // else bound at package time (--const sr=16000)

function runner(name, makeTensor, call, hasSr) {
  let state = Object.fromEntries(stateSpecs.map((s) => [s.name, makeTensor(new Float32Array(s.shape.reduce((a, d) => a * d, 1)), s.shape)]));
  const fixed = { input: makeTensor(audio, [1, n]) };
  if (hasSr) fixed.sr = makeTensor(BigInt64Array.from([16000n]), [], 'int64');
  return { name, step: async () => {
    const out = await call({ ...fixed, ...state });
    state = Object.fromEntries(stateSpecs.map((s) => [s.name, out[STATE_OUT[s.name]]]));
  } };
}

const runners = [];
for (const v of args.variants.split(',')) {
  const sess = await load(bundle, { variant: v });
  runners.push(runner(`edgepack-${sess.variant}`, (data, dims) => ({ data, dims }), (f) => sess.run(f), bundleSr));
}
const ort = await import('onnxruntime-web');
ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;
ort.env.wasm.proxy = false;
ort.env.wasm.wasmPaths = pathToFileURL(path.join(HERE, 'node_modules/onnxruntime-web/dist/')).href;
ort.env.logLevel = 'error';
const osess = await ort.InferenceSession.create(new Uint8Array(await fs.readFile(modelPath)), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
runners.push(runner(`onnxruntime-web ${ort.env.versions?.web ?? ''}`.trim(),
  (data, dims, type = 'float32') => new ort.Tensor(type, data, dims), (f) => osess.run(f), osess.inputNames.includes('sr')));

for (const r of runners) for (let k = 0; k < args.calls; k++) await r.step();   // warm-up: V8 tiers wasm up late
const per = Object.fromEntries(runners.map((r) => [r.name, []]));
for (let round = 0; round < args.rounds; round++) {
  for (const r of runners) {
    for (let k = 0; k < args.calls; k++) {
      const t0 = performance.now();
      await r.step();
      per[r.name].push(performance.now() - t0);
    }
  }
}
const q = (xs, f) => xs.slice().sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))];
const result = Object.fromEntries(Object.entries(per).map(([k, xs]) => [k, { ms_per_call: q(xs, 0.5), p90: q(xs, 0.9), calls: xs.length }]));
for (const [k, v] of Object.entries(result)) console.log(`${k.padEnd(28)} ${v.ms_per_call.toFixed(4)} ms/call (median; p90 ${v.p90.toFixed(4)})`);
if (args.json) await fs.writeFile(args.json, JSON.stringify({ model: modelPath, frame_samples: n, ...result }, null, 1));

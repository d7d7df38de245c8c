// edgepack demo page: every model of models.json on each edgepack backend and on onnxruntime-web, side by side.
// Results also go to window.demoResults (the Playwright test reads them); body[data-state] is 'done' or 'error'.
import { load } from './edgepack/index.js';

const WARMUP_MS = 1500;   // V8 tiers wasm up after the first runs: time only after this
const TIMED_RUNS = 15;

const $ = (/** @type {string} */ tag, /** @type {Record<string, any>} */ props = {}, /** @type {any[]} */ kids = []) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
};
const argmax = (/** @type {ArrayLike<number>} */ a) => { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; };
const fmt = (/** @type {number} */ ms) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));

/** The runtimes a model is tried on: each opens a session and runs one sample -> logits. */
function runtimes(ort, m) {
  const edgepack = (label, options) => ({
    label,
    async open() {
      const s = await load(m.bundle, options);
      if (options.threads !== 1 && s.features.threads < 2) { s.destroy(); throw new Error(s.notes.join('; ') || 'single-threaded'); }
      const f = s.features;
      return {
        features: `${s.backend}${s.backend === 'wasm' ? ` ${s.variant}` : ` (${s.adapter || 'adapter'}${f.f16 ? ', f16' : ''})`}${f.threads > 1 ? `, ${f.threads} threads` : ''}`,
        run: async (/** @type {Float32Array} */ x) => (await s.run({ [m.input]: { data: x, dims: m.dims } }))[m.output].data,
        close: () => s.destroy(),
      };
    },
  });
  return [
    edgepack('edgepack wasm', { backend: 'wasm', threads: 1 }),
    edgepack('edgepack wasm threads', { backend: 'wasm', threads: 'auto' }),
    edgepack('edgepack WebGPU', { backend: 'webgpu', threads: 1 }),
    {
      label: 'onnxruntime-web wasm',
      async open() {
        const s = await ort.InferenceSession.create(m.onnx, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
        return {
          features: `wasm SIMD, ${ort.env.wasm.numThreads} thread`,
          run: async (/** @type {Float32Array} */ x) => (await s.run({ [m.input]: new ort.Tensor('float32', x, m.dims) }))[m.output].data,
          close: () => s.release(),
        };
      },
    },
  ];
}

function drawSample(/** @type {Float32Array} */ x, m) {
  const [, c, h, w] = m.dims;
  const cv = $('canvas', { width: w, height: h });
  const ctx = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d'));
  const img = ctx.createImageData(w, h);
  let lo = Infinity, hi = -Infinity;
  for (const v of x) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const px = (/** @type {number} */ ch, /** @type {number} */ i) => Math.round(255 * (x[ch * h * w + i] - lo) / (hi - lo || 1));
  for (let i = 0; i < h * w; i++) {
    const g = m.display === 'gray' ? 255 - px(0, i) : 0;   // digits: dark ink on white
    img.data.set(m.display === 'gray' ? [g, g, g, 255] : [px(0, i), px(Math.min(1, c - 1), i), px(Math.min(2, c - 1), i), 255], i * 4);
  }
  ctx.putImageData(img, 0, 0);
  return cv;
}

async function runModel(ort, m, root) {
  const per = m.dims.reduce((a, d) => a * d, 1);
  const buf = await (await fetch(m.samples)).arrayBuffer();
  const samples = Array.from({ length: m.count }, (_, i) => new Float32Array(buf, i * per * 4, per));
  const section = $('section', {}, [$('h2', { textContent: m.title }), $('p', { className: 'muted', textContent: m.note })]);
  root.append(section);
  const pred = $('div', { className: 'pred', textContent: '' });
  const tbody = $('tbody');
  section.append($('table', {}, [$('thead', {}, [$('tr', {}, ['runtime', 'features', 'load (ms)', 'latency (ms)',
    m.labels ? 'accuracy' : 'agrees with onnxruntime-web', 'max |Δ| vs onnxruntime-web'].map((t) => $('th', { textContent: t })))]), tbody]));
  const strip = $('div', { className: 'samples' });
  section.append(pred, strip);

  const results = [];
  for (const rt of runtimes(ort, m)) {
    const row = { runtime: rt.label };
    results.push(row);
    const tr = $('tr');
    tbody.append(tr);
    try {
      const t0 = performance.now();
      const s = await rt.open();
      await s.run(samples[0]);
      row.loadMs = performance.now() - t0;   // open + first result
      row.features = s.features;
      row.predictions = [];
      row.logits = [];
      for (const x of samples) { const y = await s.run(x); row.logits.push(Array.from(y)); row.predictions.push(argmax(y)); }
      for (const end = performance.now() + WARMUP_MS; performance.now() < end;) await s.run(samples[0]);
      const times = [];
      for (let i = 0; i < TIMED_RUNS; i++) { const a = performance.now(); await s.run(samples[i % samples.length]); times.push(performance.now() - a); }
      times.sort((a, b) => a - b);
      row.latencyMs = times[times.length >> 1];
      row.run = s.run;
      row.close = s.close;
    } catch (e) {
      row.error = String(/** @type {Error} */ (e).message || e);
    }
  }
  const ref = results.find((r) => r.runtime.startsWith('onnxruntime') && !r.error);
  for (const r of results) {
    if (r.error) continue;
    if (m.labels) r.accuracy = r.predictions.filter((p, i) => p === m.labels[i]).length / m.labels.length;
    if (ref) {
      r.agreement = r.predictions.filter((p, i) => p === ref.predictions[i]).length / r.predictions.length;
      r.maxAbsDiff = Math.max(...r.logits.flatMap((l, i) => l.map((v, j) => Math.abs(v - ref.logits[i][j]))));
    }
  }
  tbody.replaceChildren(...results.map((r) => $('tr', {}, r.error
    ? [$('td', { textContent: r.runtime }), $('td', { className: 'na', colSpan: 5, textContent: `not available: ${r.error}` })]
    : [r.runtime, r.features, fmt(r.loadMs), fmt(r.latencyMs),
      m.labels ? `${(100 * r.accuracy).toFixed(1)}% of ${m.labels.length}` : `${(100 * r.agreement).toFixed(0)}% of ${samples.length}`,
      r.maxAbsDiff === undefined ? '–' : r.maxAbsDiff.toExponential(1)].map((t) => $('td', { textContent: String(t) })))));

  const main = results.find((r) => !r.error && r.runtime.startsWith('edgepack'));
  const show = async (/** @type {number} */ i) => {
    strip.querySelectorAll('.sample').forEach((e, j) => e.classList.toggle('selected', i === j));
    const parts = [];
    for (const r of results.filter((x) => !x.error)) {
      const a = performance.now();
      const y = await r.run(samples[i]);
      parts.push(`${r.runtime}: ${m.classes[argmax(y)]} (${fmt(performance.now() - a)} ms)`);
    }
    pred.textContent = `sample ${i}${m.labels ? ` (label ${m.classes[m.labels[i]]})` : ''} → ${parts.join(' · ')}`;
  };
  samples.forEach((x, i) => {
    const p = main ? main.predictions[i] : -1;
    const wrong = m.labels && p !== m.labels[i];
    const cell = $('div', { className: 'sample', title: `sample ${i}` }, [drawSample(x, m),
      $('span', { className: wrong ? 'wrong' : '', textContent: p >= 0 ? m.classes[p] : '?' })]);
    cell.addEventListener('click', () => show(i));
    strip.append(cell);
  });
  if (main) await show(0);
  return { name: m.name, results: results.map(({ logits, run, close, ...r }) => r) };
}

async function main() {
  const status = /** @type {HTMLElement} */ (document.getElementById('status'));
  try {
    const ort = await import('./ort/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = new URL('./ort/', import.meta.url).href;
    ort.env.wasm.numThreads = 1;
    const models = await (await fetch('models.json')).json();
    const out = [];
    for (const m of models) {
      status.textContent = `running ${m.name}…`;
      out.push(await runModel(ort, m, document.getElementById('models')));
    }
    status.textContent = `crossOriginIsolated: ${globalThis.crossOriginIsolated}; WebGPU: ${'gpu' in navigator ? 'present' : 'absent'}; ${navigator.hardwareConcurrency} cores.`;
    Object.assign(window, { demoResults: out });
    document.body.dataset.state = 'done';
  } catch (e) {
    status.textContent = `error: ${/** @type {Error} */ (e).message}`;
    status.className = 'err';
    Object.assign(window, { demoError: String(/** @type {Error} */ (e).message) });
    document.body.dataset.state = 'error';
  }
}

main();

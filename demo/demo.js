// edgepack demo page: three real models on the visitor's own input (a drawn digit, speech, an image), each run by
// edgepack (wasm; WebGPU where an adapter exists) and by onnxruntime-web on the same input, with their latencies.
// State for the Playwright test: window.demo (what each runtime answered), body[data-state] 'ready' or 'error',
// each panel's [data-runs] (how many inputs it has finished).
import { load, imageToTensor } from './edgepack/index.js';

const $ = (/** @type {string} */ tag, /** @type {Record<string, any>} */ props = {}, /** @type {any[]} */ kids = []) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
};
const byId = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const argmax = (/** @type {ArrayLike<number>} */ a) => { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; };
const fmt = (/** @type {number} */ ms) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const median = (/** @type {number[]} */ a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const COLORS = ['#0a66c2', '#2e7d32', '#e65100'];   // one per runtime, in row order

/** @typedef {{data: Float32Array | BigInt64Array, dims: number[]}} Feed */
/** @typedef {{label: string, features: string, run: (feeds: Record<string, Feed>) => Promise<Record<string, Float32Array>>}} Runtime */

/** What this browser offers, probed once: the status line and every panel's runtimes say the same. */
async function probe() {
  const gpu = /** @type {any} */ (navigator).gpu;
  let adapter = null, why = 'this browser has no navigator.gpu';
  if (gpu) {
    try {
      const a = await gpu.requestAdapter();
      if (a) adapter = [a.info?.vendor, a.info?.architecture, a.info?.description].filter(Boolean).join(' ') || 'adapter';
      else why = 'navigator.gpu is there but requestAdapter() found no adapter';
    } catch (e) { why = `requestAdapter() failed: ${/** @type {Error} */ (e).message}`; }
  }
  const threads = globalThis.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
  return { webgpu: adapter !== null, adapter, webgpuWhy: adapter ? '' : why, threads, isolated: !!globalThis.crossOriginIsolated };
}

/** edgepack (wasm, and WebGPU when the probe found an adapter) and onnxruntime-web on one model; each opened and run
 * once on `warm` (the first run compiles and allocates: not what a visitor's input should be timed with). A runtime
 * that cannot open is a row saying why. */
async function openRuntimes(ort, env, m, /** @type {Record<string, Feed>} */ warm) {
  /** @type {Array<Runtime | {label: string, error: string}>} */
  const out = [];
  const edgepack = async (/** @type {string} */ label, /** @type {any} */ options) => {
    const s = await load(m.bundle, options);
    const f = s.features, takes = new Set(s.inputs.map((i) => i.name));   // inputs a bundle binds (--const) are not fed
    return {
      label,
      features: s.backend === 'webgpu' ? `WebGPU (${s.adapter || env.adapter})` : `wasm ${s.variant}, ${f.threads} thread${f.threads > 1 ? 's' : ''}`,
      run: async (/** @type {Record<string, Feed>} */ feeds) => {
        const y = await s.run(Object.fromEntries(Object.entries(feeds).filter(([k]) => takes.has(k))));
        return Object.fromEntries(Object.entries(y).map(([k, v]) => [k, /** @type {Float32Array} */ (v.data)]));
      },
    };
  };
  const tries = [['edgepack wasm', () => edgepack('edgepack wasm', { backend: 'wasm', threads: env.threads })]];
  if (env.webgpu) tries.push(['edgepack WebGPU', () => edgepack('edgepack WebGPU', { backend: 'webgpu', threads: 1 })]);
  tries.push(['onnxruntime-web wasm', async () => {
    const s = await ort.InferenceSession.create(m.onnx, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    const n = ort.env.wasm.numThreads;
    return {
      label: 'onnxruntime-web wasm',
      features: `wasm SIMD, ${n} thread${n > 1 ? 's' : ''}`,
      run: async (/** @type {Record<string, Feed>} */ feeds) => {
        const y = await s.run(Object.fromEntries(Object.entries(feeds).map(([k, v]) =>
          [k, new ort.Tensor(v.data instanceof BigInt64Array ? 'int64' : 'float32', v.data, v.dims)])));
        return Object.fromEntries(Object.entries(y).map(([k, v]) => [k, /** @type {any} */ (v).data]));
      },
    };
  }]);
  for (const [label, open] of /** @type {Array<[string, () => Promise<Runtime>]>} */ (tries)) {
    try {
      const rt = await open();
      await rt.run(warm);
      out.push(rt);
    } catch (e) {
      const msg = String(/** @type {Error} */ (e).message || e);
      out.push({ label, error: label.includes('WebGPU') ? `WebGPU is present (${env.adapter}), but edgepack's WebGPU backend cannot run this model: ${msg}` : msg });
    }
  }
  return out;
}

/** A panel's runtime table: one row per runtime, latency of the last input and median over all inputs so far
 * (`per`: what one timed run is, e.g. one 32 ms frame). */
function runtimeTable(/** @type {HTMLElement} */ host, /** @type {any[]} */ rts, /** @type {string} */ what, per = 'run') {
  const rows = new Map();
  const tbody = $('tbody');
  rts.forEach((rt, i) => {
    const cells = rt.error ? [$('td', { className: 'na', colSpan: 4, textContent: `not available: ${rt.error}` })]
      : [$('td', { textContent: rt.features }), $('td', { className: 'out' }), $('td', { className: 'ms' }), $('td', { className: 'ms' })];
    const tr = $('tr', {}, [$('td', {}, [$('span', { className: 'dot', style: `background:${COLORS[i % COLORS.length]}` }), rt.label]), ...cells]);
    tbody.append(tr);
    rows.set(rt.label, { tr, times: /** @type {number[]} */ ([]) });
  });
  host.append($('table', {}, [$('thead', {}, [$('tr', {}, ['runtime', 'runs on', what, `last input (ms per ${per})`, `median so far (ms per ${per})`].map((t) => $('th', { textContent: t })))]), tbody]));
  return {
    /** @param {string} label @param {number[]} times this input's run times @param {string} answer */
    record(label, times, answer) {
      const r = rows.get(label);
      r.times.push(...times);
      const td = r.tr.querySelectorAll('td');
      td[2].textContent = answer;
      td[3].textContent = fmt(times.length === 1 ? times[0] : median(times));
      td[4].textContent = fmt(median(r.times));
    },
  };
}

/** Runs `feeds` on every runtime that opened; returns [label, outputs, ms] per runtime. */
async function runAll(/** @type {any[]} */ rts, /** @type {Record<string, Feed>} */ feeds) {
  const res = [];
  for (const rt of rts.filter((r) => !r.error)) {
    const t = performance.now();
    const y = await rt.run(feeds);
    res.push({ label: rt.label, y, ms: performance.now() - t });
  }
  return res;
}

const maxAbsDiff = (/** @type {ArrayLike<number>} */ a, /** @type {ArrayLike<number>} */ b) => {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
};

// ---- digits: draw on a canvas ---------------------------------------------------------------------------------

/** The drawing as the model's input: the ink cropped to its bounding box, scaled (aspect kept) so its longer side
 * spans 32 px, centred on 32x32, averaged over 4x4 blocks to 8x8 in [0, 1] (how scikit-learn's digits were made). */
function digitInput(/** @type {HTMLCanvasElement} */ cv) {
  const { width: w, height: h } = cv;
  const px = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d', { willReadFrequently: true })).getImageData(0, 0, w, h).data;
  let x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    if (px[4 * (y * w + x)] < 230) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
  }
  if (x1 < 0) return null;
  const bw = x1 - x0 + 1, bh = y1 - y0 + 1, s = 32 / Math.max(bw, bh);
  const small = $('canvas', { width: 32, height: 32 });
  const ctx = /** @type {CanvasRenderingContext2D} */ (small.getContext('2d', { willReadFrequently: true }));
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, 32, 32);
  ctx.imageSmoothingQuality = 'high';
  const dw = Math.max(1, Math.round(bw * s)), dh = Math.max(1, Math.round(bh * s));
  ctx.drawImage(cv, x0, y0, bw, bh, (32 - dw) >> 1, (32 - dh) >> 1, dw, dh);
  const g = ctx.getImageData(0, 0, 32, 32).data;
  const x = new Float32Array(64);
  for (let i = 0; i < 32 * 32; i++) x[((i >> 7) << 3) + ((i & 31) >> 2)] += (1 - g[4 * i] / 255) / 16;
  return x;
}

async function digitsPanel(ort, env, m) {
  const root = byId('digits');
  const cv = /** @type {HTMLCanvasElement} */ (byId('pad'));
  const ctx = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d', { willReadFrequently: true }));
  const clear = () => { ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, cv.width, cv.height); };
  clear();
  byId('digits-note').textContent = `A CNN trained by demo/models.py on scikit-learn's 8x8 digits (with rotation, scale and stroke augmentation): ${(100 * m.testAccuracy).toFixed(1)}% on ${m.testImages} held-out images. Draw one digit, large, like the dataset's (a 7 with a bar, a 1 with a base).`;
  const rts = await openRuntimes(ort, env, m, { [m.input]: { data: new Float32Array(64), dims: m.dims } });
  const table = runtimeTable(byId('digits-runtimes'), rts, 'digit (confidence)');
  const bars = byId('digit-bars'), seen = /** @type {HTMLCanvasElement} */ (byId('digit-seen'));
  const state = { runs: 0, answers: /** @type {any[]} */ ([]) };
  window.demo.digits = state;

  const classify = async () => {
    const x = digitInput(cv);
    if (!x) return;
    const sctx = /** @type {CanvasRenderingContext2D} */ (seen.getContext('2d'));
    const img = sctx.createImageData(8, 8);
    x.forEach((v, i) => { const g = 255 - Math.round(255 * Math.min(1, v)); img.data.set([g, g, g, 255], 4 * i); });
    sctx.putImageData(img, 0, 0);
    const res = await runAll(rts, { [m.input]: { data: x, dims: m.dims } });
    const answers = res.map(({ label, y, ms }) => {
      const logits = y[m.output];
      const e = Array.from(logits, (v) => Math.exp(v - Math.max(...logits)));
      const sum = e.reduce((a, b) => a + b, 0);
      const probs = e.map((v) => v / sum), digit = argmax(logits);
      table.record(label, [ms], `${digit} (${(100 * probs[digit]).toFixed(0)}%)`);
      return { label, digit, probs, logits: Array.from(logits), ms };
    });
    const main = answers[0];
    byId('digit-answer').textContent = String(main.digit);
    bars.replaceChildren(...main.probs.map((p, d) => $('div', { className: 'bar' }, [
      $('span', { textContent: String(d) }), $('i', { style: `width:${(100 * p).toFixed(1)}%` })])));
    state.answers = answers;
    state.runs += 1;
    root.dataset.runs = String(state.runs);
  };

  let drawing = false, last = [0, 0];
  const at = (/** @type {PointerEvent} */ e) => { const r = cv.getBoundingClientRect(); return [(e.clientX - r.left) * cv.width / r.width, (e.clientY - r.top) * cv.height / r.height]; };
  cv.addEventListener('pointerdown', (e) => { drawing = true; last = at(e); cv.setPointerCapture(e.pointerId); });
  cv.addEventListener('pointermove', (e) => {
    if (!drawing) return;
    const p = at(e);
    Object.assign(ctx, { strokeStyle: '#000', lineWidth: 20, lineCap: 'round', lineJoin: 'round' });
    ctx.beginPath(); ctx.moveTo(last[0], last[1]); ctx.lineTo(p[0], p[1]); ctx.stroke();
    last = p;
  });
  cv.addEventListener('pointerup', () => { if (drawing) { drawing = false; classify(); } });
  byId('digits-clear').addEventListener('click', () => { clear(); bars.replaceChildren(); byId('digit-answer').textContent = '–'; });
}

// ---- voice activity: microphone or an audio file ----------------------------------------------------------------

/** Mono PCM at `rate` Hz from an encoded audio file (any the browser decodes), resampled by an OfflineAudioContext. */
async function decodeAudio(/** @type {ArrayBuffer} */ bytes, /** @type {number} */ rate) {
  const decoded = await new AudioContext().decodeAudioData(bytes);
  const off = new OfflineAudioContext(1, Math.max(1, Math.ceil(decoded.duration * rate)), rate);
  const src = off.createBufferSource();
  src.buffer = decoded;
  src.connect(off.destination);
  src.start();
  return (await off.startRendering()).getChannelData(0);
}

async function vadPanel(ort, env, m) {
  const root = byId('vad');
  const stateLen = m.stateDims.reduce((a, b) => a * b, 1);
  const [AUDIO, STATE] = m.inputs, [PROB, STATE_OUT] = m.outputs;   // silero: input, state -> output, stateN
  const feeds = (/** @type {Float32Array} */ x, /** @type {Float32Array} */ st) => ({
    [AUDIO]: { data: x, dims: [1, m.frame + m.context] }, [STATE]: { data: st, dims: m.stateDims },
    sr: { data: BigInt64Array.of(BigInt(m.sampleRate)), dims: [] } });   // sr: only onnxruntime-web takes it
  const rts = await openRuntimes(ort, env, { bundle: m.bundle, onnx: m.onnx },
    feeds(new Float32Array(m.frame + m.context), new Float32Array(stateLen)));
  const live = rts.filter((r) => !r.error).map((r) => ({ rt: r, state: new Float32Array(stateLen), trace: /** @type {number[]} */ ([]), times: /** @type {number[]} */ ([]) }));
  const table = runtimeTable(byId('vad-runtimes'), rts, 'speech found (p > 0.5)', 'frame');
  const cv = /** @type {HTMLCanvasElement} */ (byId('vad-trace'));
  const result = { runs: 0, traces: /** @type {Record<string, number[]>} */ ({}), frameMs: m.frame * 1000 / m.sampleRate };
  window.demo.vad = result;
  let pcmShown = new Float32Array(0);

  const draw = () => {
    const ctx = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d'));
    const { width: W, height: H } = cv;
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
    const n = Math.max(1, live[0]?.trace.length || 1);
    ctx.fillStyle = '#ddd';   // the waveform's envelope per frame, behind the traces
    for (let f = 0; f < n && f * m.frame < pcmShown.length; f++) {
      let a = 0;
      for (let k = f * m.frame; k < Math.min(pcmShown.length, (f + 1) * m.frame); k++) a = Math.max(a, Math.abs(pcmShown[k]));
      const hgt = Math.min(1, a) * (H - 10);
      ctx.fillRect(f * W / n, (H - hgt) / 2, Math.max(1, W / n), hgt);
    }
    ctx.strokeStyle = '#aaa'; ctx.setLineDash([4, 4]);
    ctx.beginPath(); ctx.moveTo(0, H / 2); ctx.lineTo(W, H / 2); ctx.stroke();
    live.forEach((l, i) => {
      ctx.strokeStyle = COLORS[i % COLORS.length]; ctx.lineWidth = 2; ctx.setLineDash(i ? [6, 3] : []);
      ctx.beginPath();
      l.trace.forEach((p, f) => { const x = (f + 0.5) * W / n, y = H - 4 - p * (H - 8); f ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
      ctx.stroke();
    });
    ctx.setLineDash([]);
  };

  /** One frame through every runtime, each carrying its own state; `context`: the samples just before it. */
  const step = async (/** @type {Float32Array} */ frame, /** @type {Float32Array} */ context) => {
    const x = new Float32Array(m.context + m.frame);
    x.set(context, 0);
    x.set(frame, m.context);
    for (const l of live) {
      const t = performance.now();
      const y = await l.rt.run(feeds(x, l.state));
      l.times.push(performance.now() - t);
      l.state = new Float32Array(y[STATE_OUT]);
      l.trace.push(y[PROB][0]);
    }
  };
  const finish = (/** @type {number} */ seconds) => {
    live.forEach((l) => {
      const speech = l.trace.filter((p) => p > 0.5).length * result.frameMs / 1000;
      table.record(l.rt.label, l.times.splice(0), `${speech.toFixed(1)} s of ${seconds.toFixed(1)} s`);
      result.traces[l.rt.label] = [...l.trace];
    });
    result.runs += 1;
    root.dataset.runs = String(result.runs);
  };
  const reset = () => live.forEach((l) => { l.state.fill(0); l.trace = []; });

  let stopMic = async () => {};
  const runFile = async (/** @type {ArrayBuffer} */ bytes, /** @type {string} */ name) => {
    await stopMic();
    byId('vad-source').textContent = `${name}: decoding…`;
    const pcm = await decodeAudio(bytes, m.sampleRate).catch((e) => { throw new Error(`${name}: not audio this browser decodes (${e.message})`); });
    byId('vad-source').textContent = `${name}: ${(pcm.length / m.sampleRate).toFixed(1)} s, ${Math.ceil(pcm.length / m.frame)} frames of ${result.frameMs} ms`;
    reset();
    pcmShown = pcm;
    let ctxSamples = new Float32Array(m.context);
    for (let k = 0; k < pcm.length; k += m.frame) {
      const frame = new Float32Array(m.frame);
      frame.set(pcm.subarray(k, Math.min(pcm.length, k + m.frame)));
      await step(frame, ctxSamples);
      ctxSamples = frame.slice(m.frame - m.context);
    }
    draw();
    finish(pcm.length / m.sampleRate);
  };

  byId('vad-mic').addEventListener('click', async () => {
    await stopMic();
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false } });
      const ac = new AudioContext({ sampleRate: m.sampleRate });   // the browser resamples the microphone to 16 kHz
      const src = ac.createMediaStreamSource(stream);
      const proc = ac.createScriptProcessor(m.frame, 1, 1);
      reset();
      const keep = Math.round(10 * m.sampleRate / m.frame);   // the trace shows the last 10 s
      /** @type {Float32Array[]} */
      const heard = [];
      let ctxSamples = new Float32Array(m.context), busy = Promise.resolve();
      proc.onaudioprocess = (ev) => {
        const frame = new Float32Array(ev.inputBuffer.getChannelData(0));
        const c = ctxSamples;
        ctxSamples = frame.slice(m.frame - m.context);
        busy = busy.then(async () => {   // frames in order, each after the one before (the state)
          await step(frame, c);
          heard.push(frame);
          if (heard.length > keep) { heard.shift(); live.forEach((l) => l.trace.shift()); }
          if (heard.length % 4 === 0) {
            pcmShown = new Float32Array(heard.length * m.frame);
            heard.forEach((f, i) => pcmShown.set(f, i * m.frame));
            draw();
          }
        });
      };
      src.connect(proc);
      proc.connect(ac.destination);
      byId('vad-source').textContent = 'microphone: listening (16 kHz)…';
      byId('vad-stop').hidden = false;
      stopMic = async () => {
        stopMic = async () => {};
        proc.disconnect();
        src.disconnect();
        stream.getTracks().forEach((t) => t.stop());
        await ac.close();
        await busy;
        byId('vad-stop').hidden = true;
        byId('vad-source').textContent = `microphone: stopped after ${heard.length} frames (the last 10 s are shown)`;
        draw();
        finish(heard.length * result.frameMs / 1000);
      };
    } catch (e) {
      byId('vad-source').textContent = `microphone: ${/** @type {Error} */ (e).message}`;
    }
  });
  byId('vad-stop').addEventListener('click', () => stopMic());
  const said = byId('vad-source');
  dropTarget(byId('vad-drop'), /** @type {HTMLInputElement} */ (byId('vad-file')), said, async (f) => runFile(await f.arrayBuffer(), f.name));
  byId('vad-sample').addEventListener('click', guarded(said, async () => runFile(await (await fetch(window.demoConfig.samples.speech)).arrayBuffer(), 'sample speech (espeak-ng)')));
}

// ---- detector: drop an image -------------------------------------------------------------------------------

/** YOLOv8 output [1, 4 + classes, anchors] -> boxes in the original image's pixels (the image was padded right and
 * bottom to a square, then scaled to size x size, like nudenet does): score >= 0.25, class-agnostic NMS at IoU 0.45. */
function decodeBoxes(/** @type {Float32Array} */ y, /** @type {number} */ classes, /** @type {number} */ scale) {
  const n = y.length / (4 + classes);
  const cand = [];
  for (let i = 0; i < n; i++) {
    let c = 0;
    for (let k = 1; k < classes; k++) if (y[(4 + k) * n + i] > y[(4 + c) * n + i]) c = k;
    const score = y[(4 + c) * n + i];
    if (score < 0.25) continue;
    const [cx, cy, w, h] = [0, 1, 2, 3].map((k) => y[k * n + i] * scale);
    cand.push({ x: cx - w / 2, y: cy - h / 2, w, h, score, cls: c });
  }
  cand.sort((a, b) => b.score - a.score);
  const iou = (/** @type {any} */ a, /** @type {any} */ b) => {
    const iw = Math.max(0, Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x)), ih = Math.max(0, Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y));
    return (iw * ih) / (a.w * a.h + b.w * b.h - iw * ih);
  };
  const keep = [];
  for (const b of cand) if (keep.every((k) => iou(k, b) <= 0.45)) keep.push(b);
  return keep;
}

async function detectorPanel(ort, env, m) {
  const root = byId('detector');
  const S = m.size;
  const rts = await openRuntimes(ort, env, m, { [m.input]: { data: new Float32Array(3 * S * S), dims: [1, 3, S, S] } });
  const table = runtimeTable(byId('detector-runtimes'), rts, 'boxes');
  const cv = /** @type {HTMLCanvasElement} */ (byId('detector-view'));
  const result = { runs: 0, boxes: /** @type {Record<string, any[]>} */ ({}) };
  window.demo.detector = result;

  const detect = async (/** @type {Blob} */ blob, /** @type {string} */ name) => {
    const img = await createImageBitmap(blob).catch((e) => { throw new Error(`${name}: not an image this browser decodes (${e.message})`); });
    const side = Math.max(img.width, img.height);
    const sq = $('canvas', { width: S, height: S });
    const sctx = /** @type {CanvasRenderingContext2D} */ (sq.getContext('2d'));
    sctx.fillStyle = '#000'; sctx.fillRect(0, 0, S, S);
    sctx.drawImage(img, 0, 0, img.width * S / side, img.height * S / side);
    const x = imageToTensor(sq, { channels: 3 });
    const res = await runAll(rts, { [m.input]: x });
    const found = res.map(({ label, y, ms }) => {
      const boxes = decodeBoxes(y[m.output], m.labels.length, side / S);
      table.record(label, [ms], boxes.length ? boxes.map((b) => `${m.labels[b.cls]} ${(100 * b.score).toFixed(0)}%`).join(', ') : 'none');
      result.boxes[label] = boxes.map((b) => ({ ...b, label: m.labels[b.cls] }));
      return boxes;
    });
    const k = Math.min(1, 640 / img.width);
    cv.width = Math.round(img.width * k); cv.height = Math.round(img.height * k);
    const ctx = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d'));
    ctx.drawImage(img, 0, 0, cv.width, cv.height);
    ctx.lineWidth = 3; ctx.font = '14px system-ui, sans-serif';
    for (const b of found[0] || []) {
      ctx.strokeStyle = COLORS[0]; ctx.strokeRect(b.x * k, b.y * k, b.w * k, b.h * k);
      const t = `${m.labels[b.cls]} ${(100 * b.score).toFixed(0)}%`;
      ctx.fillStyle = COLORS[0]; ctx.fillRect(b.x * k, Math.max(0, b.y * k - 18), ctx.measureText(t).width + 8, 18);
      ctx.fillStyle = '#fff'; ctx.fillText(t, b.x * k + 4, Math.max(14, b.y * k - 4));
    }
    byId('detector-source').textContent = `${name}: ${img.width}x${img.height}`;
    result.runs += 1;
    root.dataset.runs = String(result.runs);
  };
  const said = byId('detector-source');
  dropTarget(byId('detector-drop'), /** @type {HTMLInputElement} */ (byId('detector-file')), said, (f) => detect(f, f.name));
  byId('detector-sample').addEventListener('click', guarded(said, async () => detect(await (await fetch(window.demoConfig.samples.image)).blob(), 'sample image (Grace Hopper, matplotlib)')));
}

/** `action` with its failure (a file the browser cannot decode, ...) shown as one `error:` line in `said`. */
const guarded = (/** @type {HTMLElement} */ said, /** @type {() => Promise<any>} */ action) => async () => {
  try {
    said.classList.remove('err');
    await action();
  } catch (e) {
    said.textContent = `error: ${/** @type {Error} */ (e).message || e}`;
    said.classList.add('err');
  }
};

/** A drop zone with a file input inside: a dropped or chosen file goes to `use` (its failure shown in `said`). */
function dropTarget(/** @type {HTMLElement} */ zone, /** @type {HTMLInputElement} */ input, /** @type {HTMLElement} */ said, /** @type {(f: File) => any} */ use) {
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    const f = e.dataTransfer?.files[0];
    if (f) guarded(said, () => use(f))();
  });
  input.addEventListener('change', () => { const f = input.files?.[0]; if (f) guarded(said, () => use(f))(); });
}

async function main() {
  const status = byId('status');
  window.demo = {};
  try {
    const env = await probe();
    window.demo.env = env;
    const ort = await import('./ort/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = new URL('./ort/', import.meta.url).href;
    ort.env.wasm.numThreads = env.threads;
    const cfg = await (await fetch('models.json')).json();
    window.demoConfig = cfg;
    status.textContent = `Threads: ${env.isolated ? `${env.threads} (cross-origin isolated)` : '1 (the page is not cross-origin isolated)'}. `
      + (env.webgpu ? `WebGPU: present (${env.adapter}); edgepack's WebGPU rows run on it.` : `WebGPU: not available (${env.webgpuWhy}); no WebGPU rows.`);
    await digitsPanel(ort, env, cfg.digits);
    await vadPanel(ort, env, cfg.vad);
    await detectorPanel(ort, env, cfg.detector);
    document.body.dataset.state = 'ready';
  } catch (e) {
    status.textContent = `error: ${/** @type {Error} */ (e).message}`;
    status.className = 'err';
    window.demo.error = String(/** @type {Error} */ (e).message);
    document.body.dataset.state = 'error';
  }
}

main();

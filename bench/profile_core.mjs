// The same measurement in Node and in a browser page (bench/page_profile.py runs both): edgepack builds on one
// bundle, wall time per whole run (performance.now) interleaved A B A B ..., then per-node time (ep_run_node
// repeated), so a slowdown of one engine can be pinned to kernels (code generation) or to the JS around them.
//   profile({Session, plan, manifest, wasms: [{name, bytes}], seconds, rounds, nodeReps, feeds})
export async function profile({ Session, plan, manifest, wasms, seconds = 2, rounds = 10, nodeReps = 5, feeds }) {
  const sessions = [];
  for (const w of wasms) {
    const { instance } = await WebAssembly.instantiate(w.bytes, {});
    sessions.push(new Session(instance, plan, manifest, w.name));
  }
  const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
  for (const s of sessions) { const end = performance.now() + seconds * 1000; while (performance.now() < end) s.runSync(feeds); }
  // Inputs written as runSync does (a run overwrites them: the arena reuses their bytes).
  const write = (s) => { for (const x of s.inputs) { const [ptr, n] = s._span(x.tensor); const d = feeds[x.name].data; new Uint8Array(s.memory.buffer, ptr, n).set(new Uint8Array(d.buffer, d.byteOffset, n)); } };
  const whole = sessions.map(() => []), bare = sessions.map(() => []);
  for (let r = 0; r < rounds; r++) {
    sessions.forEach((s, i) => {
      s.runSync(feeds);
      let t0 = performance.now();
      for (let j = 0; j < 4; j++) s.runSync(feeds);
      whole[i].push((performance.now() - t0) / 4);
      t0 = performance.now();   // ep_run alone: no input copy, no output copy, no checks
      for (let j = 0; j < 4; j++) { write(s); s.ex.ep_run(); }
      bare[i].push((performance.now() - t0) / 4);
    });
  }
  const nodes = sessions[0].ex.ep_num_nodes();
  const per = sessions.map(() => Array.from({ length: nodes }, () => []));
  // Per node, two ways: in a whole pass (each node once, in order: what a run costs, cold weights included),
  // and repeated nodeReps times (warm: the node's operands in cache).
  const warm = sessions.map(() => Array.from({ length: nodes }, () => []));
  for (let r = 0; r < Math.max(3, rounds >> 1); r++) {
    sessions.forEach((s, i) => {
      s.runSync(feeds);
      write(s);
      for (let k = 0; k < nodes; k++) { const t0 = performance.now(); s.ex.ep_run_node(k); per[i][k].push(performance.now() - t0); }
      for (let k = 0; k < nodes; k++) {
        s.ex.ep_run_node(k);
        const t0 = performance.now();
        for (let j = 0; j < nodeReps; j++) s.ex.ep_run_node(k);
        warm[i][k].push((performance.now() - t0) / nodeReps);
      }
    });
  }
  return wasms.map((w, i) => ({ name: w.name, run_ms: med(whole[i]), ep_run_ms: med(bare[i]), nodes_ms: per[i].map(med), warm_ms: warm[i].map(med) }));
}

/** Deterministic inputs at the manifest's shapes; a symbolic dim (a version-2 plan) at its example value, else 1. */
export function seededFeeds(manifest) {
  const feeds = {};
  for (const s of manifest.inputs) {
    const dims = s.shape.map((d) => (typeof d === 'number' ? d : manifest.dims?.[d]?.example ?? 1));
    const n = dims.reduce((a, d) => a * d, 1);
    feeds[s.name] = { data: s.dtype === 'int64' ? BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 7)) : Float32Array.from({ length: n }, (_, i) => Math.sin(i)), dims };
  }
  return feeds;
}

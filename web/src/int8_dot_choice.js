// The relaxed-SIMD build's int8 dot, chosen per engine at load (the same in Node and the browser): the pair form
// (i16x8.relaxed_dot + i32x4.dot_i16x8, 3 instructions on x86 without VNNI) or the fused
// i32x4.relaxed_dot_i8x16_i7x16_add (one vpdpbusd / sdot where the engine maps it). Exact engines give both the same
// sums; which is faster depends on the engine (docs/int8.md). No user-agent strings: the core runs both here, and
// the fused form is taken only where it is faster and gave the pair form's sums on every call (Node 20's baseline
// compiler doubles its sums).

/** @typedef {'pair'|'fused'} Int8Dot */

/** @type {{form: Int8Dot, exact: boolean, ms: number[]} | null} what was measured in this engine (one per process / page) */
let cached = null;

const REPS = 8192;     // 4 x 8 tiles of 128 depths per timed call: 34 M multiply-adds, ~0.6 ms (timer steps: 0.1 ms)
const ROUNDS = 10;     // interleaved calls per form; the fastest of each counts (after the engine's tier-up)

/** Runs both forms ROUNDS times, interleaved (the same load and tier for both): the faster, whether the fused
 * form's sums equalled the pair form's on every call, the first (before any tier-up) included, and each form's
 * fastest call in ms ([pair, fused]; not timed when the first calls already differ).
 * @param {any} ex the instance's exports @param {() => number} now
 * @returns {{form: Int8Dot, exact: boolean, ms: number[]}} */
export function measureInt8Dot(ex, now = () => performance.now()) {
  const best = [Infinity, Infinity], sums = [0, 0];
  // first two short calls, in the engine's first tier (each new module starts there): its sums count too
  let exact = ex.ep_qdot_probe(0, 2) === ex.ep_qdot_probe(1, 2);
  if (!exact) return { form: 'pair', exact, ms: [NaN, NaN] };   // nothing to time (Node 20: ~50 ms saved)
  for (let r = 0; r < ROUNDS; r++) {
    for (const f of r & 1 ? [1, 0] : [0, 1]) {
      const t0 = now();
      sums[f] = ex.ep_qdot_probe(f, REPS);
      best[f] = Math.min(best[f], now() - t0);
    }
    exact &&= sums[0] === sums[1];
  }
  return { form: exact && best[1] < best[0] ? 'fused' : 'pair', exact, ms: best };
}

/** Sets the instance's int8 dot form and returns it: 'auto' the faster on this engine (measured once, cached),
 * 'pair' or 'fused' as asked, except that the fused form is never used where it was not exact (a note says so).
 * Null where the build has no relaxed dot (SIMD128 and scalar builds).
 * @param {any} ex @param {Int8Dot | 'auto'} choice @param {string[]} notes @returns {Int8Dot | null} */
export function chooseInt8Dot(ex, choice, notes) {
  if (typeof ex.ep_qdot_use !== 'function' || typeof ex.ep_qdot_probe !== 'function') return null;
  cached ??= measureInt8Dot(ex);
  let form = choice === 'auto' ? cached.form : choice;
  if (form === 'fused' && !cached.exact) {
    notes.push("int8Dot: 'fused' not used, this engine's i32x4.relaxed_dot_i8x16_i7x16_add was not exact: 'pair'");
    form = 'pair';
  }
  ex.ep_qdot_use(form === 'fused' ? 1 : 0);
  return form;
}

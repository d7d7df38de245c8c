// Byte ranges of the wasm arena whose contents are current (equal to the GPU arena's), so a node that
// falls back to the wasm core downloads only the inputs the wasm side does not already hold.

export class Ranges {
  constructor() {
    /** @type {[number, number][]} sorted, disjoint, non-adjacent [lo, hi) */
    this.r = [];
  }

  clear() { this.r = []; }

  /** @param {number} lo @param {number} hi */
  add(lo, hi) {
    if (hi <= lo) return;
    const out = [];
    for (const [a, b] of this.r) {
      if (b < lo || a > hi) out.push([a, b]);
      else { lo = Math.min(lo, a); hi = Math.max(hi, b); }
    }
    out.push([lo, hi]);
    this.r = /** @type {[number, number][]} */ (out.sort((x, y) => x[0] - y[0]));
  }

  /** @param {number} lo @param {number} hi */
  remove(lo, hi) {
    if (hi <= lo) return;
    /** @type {[number, number][]} */
    const out = [];
    for (const [a, b] of this.r) {
      if (b <= lo || a >= hi) { out.push([a, b]); continue; }
      if (a < lo) out.push([a, lo]);
      if (b > hi) out.push([hi, b]);
    }
    this.r = out;
  }

  /** @param {number} lo @param {number} hi */
  covers(lo, hi) {
    return hi <= lo || this.r.some(([a, b]) => a <= lo && hi <= b);
  }
}

/** [lo, hi) widened to 4-byte boundaries (every arena block is 64-byte aligned and padded, so the
 * widening stays inside the tensor's own block). @param {number} lo @param {number} hi @returns {[number, number]} */
export const words = (lo, hi) => [lo & ~3, (hi + 3) & ~3];

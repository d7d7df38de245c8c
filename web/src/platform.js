// @ts-check
// Where the runtime runs, and Node's built-ins when that is Node. Nothing here names a Node module: a page built by a
// bundler (Vite, webpack, esbuild) for the browser gets no `node:` import to resolve, shim or warn about
// ("Module node:os has been externalized for browser compatibility"). Node's built-ins live in node.js, the package's
// "node" entry (package.json exports), which registers them; when the runtime is loaded some other way in Node (a
// bundle's runtime/ folder), node.js is imported from next to this file on first use.

export const isNode = typeof process !== 'undefined' && !!process.versions?.node;

/** @typedef {{readFile: (p: string|URL) => Promise<Uint8Array>, readdir: (p: string|URL, o: any) => Promise<any[]>,
 *   createHash: (alg: string) => any, cores: () => number, Worker: any}} NodeBuiltins */

/** @type {Promise<NodeBuiltins> | null} */
let builtins = null;

/** Called by node.js with what it imported. @param {NodeBuiltins} b */
export function registerNode(b) {
  builtins = Promise.resolve(b);
}

// A variable, not a literal: bundlers neither follow import() of it nor treat new URL() of it as an asset.
const NODE_ENTRY = './node.js';

/** Node's built-ins (Node only). @returns {Promise<NodeBuiltins>} */
export function node() {
  builtins ??= import(/* @vite-ignore */ /* webpackIgnore: true */ new URL(NODE_ENTRY, import.meta.url).href).then(
    () => /** @type {Promise<NodeBuiltins>} */ (builtins),
    (e) => {   // bundled into one file for Node without the "node" entry: node.js is not next to this code
      builtins = null;
      throw new Error(`edgepack in Node needs its Node entry (import 'edgepack', the "node" export, or its src/node.js) before loading: ${e.message}`);
    });
  return builtins;
}

// @ts-check
// edgepack's entry in Node (package.json exports, condition "node"): the runtime (index.js) with the Node built-ins it
// uses there: reading a bundle directory, SHA-256, the core count, worker threads. Browser builds never import this.
import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { Worker } from 'node:worker_threads';
import { registerNode } from './platform.js';

registerNode({
  readFile: async (p) => new Uint8Array(await readFile(p)),
  readdir: (p, o) => readdir(p, o),
  createHash,
  cores: () => availableParallelism?.() ?? cpus().length,
  Worker,
});

export * from './index.js';

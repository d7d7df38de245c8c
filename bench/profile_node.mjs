// Node side of bench/page_profile.py: node profile_node.mjs BUNDLE SECONDS ROUNDS A.wasm [B.wasm ...] -> JSON on stdout.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Session } from '../web/src/index.js';
import { profile, seededFeeds } from './profile_core.mjs';

const [bundle, seconds, rounds, ...files] = process.argv.slice(2);
const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
const wasms = [];
for (const f of files) wasms.push({ name: path.basename(f), bytes: await readFile(f) });
const res = await profile({ Session, plan, manifest, wasms, seconds: Number(seconds), rounds: Number(rounds), feeds: seededFeeds(manifest) });
console.log(JSON.stringify(res));

// Helpers for the end-to-end server tests: start `rocmforge serve` on the
// real stories260K model or another one (CPU, a free port), wait until
// /health says ready, stop it with SIGTERM and check its exit code; read /metrics; make an
// OpenAI or Anthropic client for it; read a raw SSE stream as events. Paths come from ROCMFORGE_BIN (the built binary)
// and ROCMFORGE_TESTDATA (the shared test data).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

export const BIN = path.resolve(repo, process.env.ROCMFORGE_BIN ?? 'build/cpu/src/rocmforge');
export const TESTDATA = path.resolve(repo, process.env.ROCMFORGE_TESTDATA ?? '../shared/testdata');
export const MODEL = path.join(TESTDATA, 'stories260K.gguf');

if (!existsSync(BIN)) throw new Error(`rocmforge binary not found: ${BIN} (set ROCMFORGE_BIN)`);
if (!existsSync(MODEL)) throw new Error(`test model not found: ${MODEL} (set ROCMFORGE_TESTDATA)`);

export function goldenCases() {
  return readFileSync(path.join(TESTDATA, 'stories260K.golden.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A running server: { url, port, proc, log(), stop() }. `model`: another GGUF
// than stories260K.
export async function startServer(extraArgs = [], { ready = true, model = MODEL } = {}) {
  const args = ['serve', '-m', model, '--device', 'cpu', '--port', '0', '--threads', '2', ...extraArgs];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));

  const deadline = Date.now() + 20000;
  let port = 0;
  while (!port) {
    const m = /listening on http:\/\/[^:\s]+:(\d+)/.exec(output);
    if (m) port = Number(m[1]);
    else if (proc.exitCode !== null) throw new Error(`server exited early:\n${output}`);
    else if (Date.now() > deadline) throw new Error(`server did not start:\n${output}`);
    else await sleep(20);
  }
  const url = `http://127.0.0.1:${port}`;
  const server = {
    url,
    port,
    proc,
    exited,
    signalled: false,
    log: () => output,
    kill(sig) {
      this.signalled = true;
      proc.kill(sig);
    },
    // SIGTERM (unless a signal was sent already), then the exit status ({code, signal}).
    async stop(timeoutMs = 20000) {
      if (!this.signalled && proc.exitCode === null && proc.signalCode === null) this.kill('SIGTERM');
      let timer;
      const timeout = new Promise((resolve) => {
        timer = setTimeout(() => {
          proc.kill('SIGKILL');
          resolve({ code: null, signal: 'timeout' });
        }, timeoutMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
  if (ready) {
    while ((await fetch(`${url}/health`).catch(() => null))?.status !== 200) {
      if (proc.exitCode !== null) throw new Error(`server exited:\n${output}`);
      if (Date.now() > deadline) throw new Error(`server never became ready:\n${output}`);
      await sleep(20);
    }
  }
  return server;
}

export function client(server, options = {}) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000, ...options });
}

export function anthropicClient(server, options = {}) {
  return new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0, timeout: 60000, ...options });
}

// The test data's tiny models and this repository's test chat templates.
export const TINY_QWEN3 = path.join(TESTDATA, 'arch', 'tiny-qwen3.gguf');
export const TEMPLATES = path.resolve(here, '..', 'templates');

// POSTs a streamed request and reads the whole SSE body: [{event, data}]
// (data parsed as JSON where it is JSON; event null when not named), and the status.
export async function sseEvents(server, route, body, headers = {}) {
  const res = await fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim() || block.startsWith(':')) continue;
    let event = null;
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    let parsed = data;
    try {
      parsed = JSON.parse(data);
    } catch {}
    events.push({ event, data: parsed });
  }
  return { status: res.status, events, text };
}

// /metrics as {name or name{labels}: value}.
export async function metrics(server) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// Polls /metrics until `pred(metrics)` holds and returns those metrics;
// throws, naming the predicate and the last gauges, if it never held
// within the timeout.
export async function waitForMetrics(server, pred, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  let m = await metrics(server);
  while (!pred(m)) {
    if (Date.now() >= deadline) {
      const gauges = ['rocmforge_running_sequences', 'rocmforge_queue_depth', 'rocmforge_kv_blocks_used']
        .map((k) => `${k}=${m[k]}`).join(' ');
      throw new Error(`metrics never satisfied ${pred} within ${timeoutMs} ms (${gauges})`);
    }
    await sleep(50);
    m = await metrics(server);
  }
  return m;
}

// POST raw bytes; returns {status, headers, json, text}.
export async function post(server, route, body, headers = {}) {
  const res = await fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, json, text };
}

// Asserts the OpenAI error shape {"error": {message, type, param, code}}.
export function assertOpenAIError(assert, r, status) {
  assert.equal(r.status, status, `status for ${r.text}`);
  assert.ok(r.json && typeof r.json.error === 'object', `error body: ${r.text}`);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, `param and code present: ${r.text}`);
}

// Lifecycle: SIGTERM stops new work (503 with Retry-After, /health 503),
// lets in-flight streams finish, and exits with code 0; a stream still
// running after --shutdown-timeout is cut with an error event; a second
// signal exits at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertOpenAIError, client, post, sleep, startServer, waitForMetrics } from './helpers.mjs';

async function readStream(stream) {
  let text = '';
  let finish = null;
  let tokens = 0;
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      text += c.text;
      tokens++;
      if (c.finish_reason) finish = c.finish_reason;
    }
  return { text, finish, tokens };
}

test('SIGTERM lets in-flight streams finish, refuses new requests, exits 0', async () => {
  const server = await startServer(['--shutdown-timeout', '30']);
  const openai = client(server);
  const stream = await openai.completions.create({
    prompt: 'Once upon a time', max_tokens: 1500, ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  const reading = (async () => {
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) if (c.finish_reason) finish = c.finish_reason;
    }
    return { usage, finish };
  })();
  await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 1);
  server.kill('SIGTERM');
  // Draining: health and new requests get 503.
  let health;
  for (let i = 0; i < 100; i++) {
    health = await fetch(`${server.url}/health`);
    if (health.status === 503) break;
    await sleep(10);
  }
  assert.equal(health.status, 503);
  const refused = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2 });
  assertOpenAIError(assert, refused, 503);
  assert.equal(refused.json.error.code, 'shutting_down');
  assert.ok(refused.headers.get('retry-after'));
  const { usage, finish } = await reading;
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 1500);
  const { code, signal } = await server.stop();
  assert.equal(signal, null);
  assert.equal(code, 0, server.log());
  assert.match(server.log(), /stopped/);
});

test('a stream still running after --shutdown-timeout is cut with an error, and the server exits 0', async () => {
  const server = await startServer(['--shutdown-timeout', '0.2']);
  const openai = client(server);
  const stream = await openai.completions.create({ prompt: 'Once upon a time', max_tokens: 2000, ignore_eos: true, stream: true });
  const reading = readStream(stream).then(
    (r) => ({ ok: r }),
    (e) => ({ error: e }),
  );
  await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 1);
  const t0 = Date.now();
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
  const r = await reading;
  assert.ok(r.error, `the stream did not end with an error: ${JSON.stringify(r.ok)}`);
  assert.match(String(r.error.message), /shutting down|stopped before the request finished/);
  assert.match(server.log(), /cancelling/);
  assert.ok(Date.now() - t0 < 15000);
});

test('a second signal exits at once', async () => {
  const server = await startServer(['--shutdown-timeout', '60']);
  const openai = client(server);
  const stream = await openai.completions.create({ prompt: 'Once', max_tokens: 2000, ignore_eos: true, stream: true });
  const reading = readStream(stream).catch((e) => e);
  await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 1);
  server.kill('SIGTERM');
  await sleep(100);
  server.kill('SIGINT');
  const { code } = await server.stop(5000);
  assert.equal(code, 130, server.log());
  await reading;
});

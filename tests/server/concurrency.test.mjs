// Concurrency: 64 parallel streams all complete and /metrics adds up to what
// the clients received; clients that disconnect mid-stream are cancelled
// and leave no KV blocks held; with the engine full, hundreds of waiting
// streams do not keep the server from answering other requests.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, metrics, startServer, waitForMetrics } from './helpers.mjs';

const idle = (m) => m.rocmforge_running_sequences === 0 && m.rocmforge_queue_depth === 0 && m.rocmforge_kv_blocks_used === 0;

describe('a server with 64 sequences', () => {
  let server;
  let openai;
  before(async () => {
    server = await startServer(['--max-num-seqs', '64']);
    openai = client(server);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('64 parallel streams complete and the metrics add up', async () => {
    const before = await metrics(server);
    const N = 64;
    let open = 0;
    let maxOpen = 0;
    const results = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        // Streams of 160+ tokens (no early end) last hundreds of engine
        // steps, far longer than the client takes to open all 64 of them,
        // even on a loaded machine: a server that batches them has them
        // open together; one that serves them one by one never does.
        const stream = await openai.completions.create({
          prompt: `Once upon a time, story number ${i},`,
          max_tokens: 160 + (i % 8),
          ignore_eos: true,
          temperature: 0.8,
          seed: i,
          stream: true,
          stream_options: { include_usage: true },
        });
        open++;
        maxOpen = Math.max(maxOpen, open);
        let text = '';
        let finish = null;
        let usage = null;
        for await (const chunk of stream) {
          if (chunk.usage) usage = chunk.usage;
          for (const c of chunk.choices) {
            text += c.text;
            if (c.finish_reason) finish = c.finish_reason;
          }
        }
        open--;
        return { text, finish, usage };
      }),
    );
    assert.ok(maxOpen > 16, `streams were open together (at most ${maxOpen})`);
    let prompt = 0;
    let completion = 0;
    for (const r of results) {
      assert.equal(r.finish, 'length');
      assert.ok(r.usage, 'usage chunk');
      assert.ok(r.usage.completion_tokens >= 1);
      prompt += r.usage.prompt_tokens;
      completion += r.usage.completion_tokens;
    }
    const m = await waitForMetrics(server, idle);
    const delta = (k) => m[k] - before[k];
    assert.equal(delta('rocmforge_requests_total'), N);
    assert.equal(delta('rocmforge_requests_finished_total'), N);
    assert.equal(delta('rocmforge_requests_cancelled_total'), 0);
    assert.equal(delta('rocmforge_prompt_tokens_total'), prompt);
    assert.equal(delta('rocmforge_generation_tokens_total'), completion);
    assert.ok(delta('rocmforge_http_responses_total{code="200"}') >= N);
    assert.equal(m.rocmforge_kv_blocks_used, 0);
    assert.equal(m.rocmforge_kv_blocks_free, m.rocmforge_kv_blocks_total);
    assert.equal(m.rocmforge_http_requests_in_flight, 0);
  });

  test('20 clients that leave mid-stream are cancelled and hold no KV blocks', async () => {
    const before = await metrics(server);
    const N = 20;
    await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const stream = await openai.completions.create({
          prompt: `The little dog ${i}`,
          max_tokens: 1500,
          ignore_eos: true,
          stream: true,
        });
        let chunks = 0;
        for await (const chunk of stream) {
          assert.equal(chunk.choices.length, 1);
          if (++chunks === 3 + (i % 5)) break; // leaving the loop aborts the HTTP request
        }
      }),
    );
    const m = await waitForMetrics(server, (x) => idle(x) && x.rocmforge_requests_cancelled_total - before.rocmforge_requests_cancelled_total >= N);
    assert.equal(m.rocmforge_kv_blocks_used, 0, 'no KV blocks held');
    assert.equal(m.rocmforge_kv_blocks_free, m.rocmforge_kv_blocks_total);
    assert.equal(m.rocmforge_requests_cancelled_total - before.rocmforge_requests_cancelled_total, N);
    assert.equal(m.rocmforge_http_client_disconnects_total - before.rocmforge_http_client_disconnects_total, N);
    // Far fewer tokens than asked for were generated: the requests really stopped.
    assert.ok(m.rocmforge_generation_tokens_total - before.rocmforge_generation_tokens_total < (N * 1500) / 2);
    // The server goes on serving.
    const r = await openai.completions.create({ prompt: 'Once', max_tokens: 4 });
    assert.equal(r.usage.completion_tokens, 4);
  });
});

describe('a server whose engine is full', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-num-seqs', '2', '--max-queue', '1000']);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('200 waiting streams do not block other requests, and all finish', async () => {
    // Two long streams fill the engine; 200 more wait in its queue, each holding a connection.
    const hogs = Array.from({ length: 2 }, () => new AbortController());
    const hogDone = hogs.map((ctl, i) =>
      fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: `Hog ${i}`, max_tokens: 1800, ignore_eos: true, stream: true }),
        signal: ctl.signal,
      }).then((res) => res.text()).catch(() => 'aborted'),
    );
    let m = await waitForMetrics(server, (x) => x.rocmforge_running_sequences === 2);
    assert.equal(m.rocmforge_running_sequences, 2);
    const N = 200;
    const streams = Array.from({ length: N }, async (_, i) => {
      const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: `Story ${i}`, max_tokens: 2, stream: true }),
      });
      assert.equal(res.status, 200);
      return res.text();
    });
    m = await waitForMetrics(server, (x) => x.rocmforge_http_requests_in_flight >= N + 2, 15000);
    assert.equal(m.rocmforge_http_requests_in_flight, N + 2, 'every stream is connected and waiting');
    assert.ok(m.rocmforge_http_connections >= N + 2, `connections: ${m.rocmforge_http_connections}`);
    // With every stream held open, the server still answers at once.
    const t0 = Date.now();
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 200);
    const elapsed = Date.now() - t0;
    assert.ok(elapsed < 2000, `answered in ${elapsed} ms`);
    for (const ctl of hogs) ctl.abort();
    await Promise.all(hogDone);
    const texts = await Promise.all(streams);
    for (const t of texts) assert.ok(t.endsWith('data: [DONE]\n\n'), t.slice(-200));
    m = await waitForMetrics(server, idle);
    assert.equal(m.rocmforge_kv_blocks_used, 0);
  });
});

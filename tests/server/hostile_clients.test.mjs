// Hostile clients, each a test: clients that leave, trickle, pipeline,
// flood headers, half-close, send ambiguous framing, or skip the API key.
// Raw sockets (raw_http.mjs) write what fetch() cannot.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertOpenAIError, metrics, startServer, waitForMetrics } from './helpers.mjs';
import { connect, postJson, request, rssBytes, sleep } from './raw_http.mjs';

const idle = (m) => m.rocmforge_running_sequences === 0 && m.rocmforge_queue_depth === 0 && m.rocmforge_kv_blocks_used === 0;

async function stopOk(server) {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
}

describe('a request is cancelled when its client leaves, streamed or not', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-num-seqs', '64']);
  });
  after(() => stopOk(server));

  test('a batch of 256 prompts × 400 tokens, dropped after 1 s, frees its 64 slots at once', async () => {
    const before = await metrics(server);
    const c = await connect(server);
    await c.write(postJson('/v1/completions', { prompt: Array(256).fill('Once upon a time'), max_tokens: 400, ignore_eos: true }));
    const m1 = await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 64);
    assert.equal(m1.rocmforge_running_sequences, 64);
    await sleep(1000);
    c.destroy();
    const t0 = Date.now();
    const m = await waitForMetrics(server, idle, 15000);
    const took = Date.now() - t0;
    assert.ok(idle(m), 'the engine went idle');
    assert.ok(took < 2000, `the slots stayed busy ${took} ms after the client left`);
    assert.equal(m.rocmforge_requests_cancelled_total - before.rocmforge_requests_cancelled_total, 256);
    assert.equal(m.rocmforge_requests_finished_total - before.rocmforge_requests_finished_total, 256, 'none ran to its end');
  });

  test('50 non-streamed clients that leave at once hold no KV blocks a moment later', async () => {
    const before = await metrics(server);
    const N = 50;
    const conns = await Promise.all(Array.from({ length: N }, () => connect(server)));
    await Promise.all(conns.map((c, i) =>
      c.write(postJson('/v1/completions', { prompt: `Story ${i}:`, max_tokens: 1500, ignore_eos: true }))));
    await waitForMetrics(server, (m) => m.rocmforge_running_sequences === N);
    await sleep(300);
    for (const c of conns) c.destroy();
    const t0 = Date.now();
    const m = await waitForMetrics(server, idle, 15000);
    const took = Date.now() - t0;
    assert.ok(idle(m), 'the engine went idle');
    assert.ok(took < 2000, `KV blocks stayed busy ${took} ms after the clients left`);
    assert.equal(m.rocmforge_kv_blocks_used, 0);
    assert.equal(m.rocmforge_requests_cancelled_total - before.rocmforge_requests_cancelled_total, N);
    assert.equal(m.rocmforge_http_client_disconnects_total - before.rocmforge_http_client_disconnects_total, N);
  });

  // The 50 ms target itself is a speed figure, measured by scripts/soak.py
  // (here in CI and on the GPU machine) and reported, not asserted by a timed
  // test on a shared 2-core machine: this test asserts that the routes are not
  // queued behind generation (a stream here runs for seconds).
  test('/health and /metrics answer at once while 64 streams keep the engine full', async () => {
    const ctls = Array.from({ length: 64 }, () => new AbortController());
    const streams = ctls.map((ctl, i) =>
      fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: `Load ${i}`, max_tokens: 1800, ignore_eos: true, stream: true }),
        signal: ctl.signal,
      }).then((r) => r.text()).catch(() => null));
    await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 64);
    const times = [];
    for (let i = 0; i < 20; i++) {
      for (const route of ['/health', '/metrics']) {
        const t0 = performance.now();
        const r = await fetch(`${server.url}${route}`);
        await r.text();
        times.push(performance.now() - t0);
        assert.equal(r.status, 200);
      }
      await sleep(20);
    }
    for (const c of ctls) c.abort();
    await Promise.all(streams);
    times.sort((a, b) => a - b);
    const p90 = times[Math.floor(times.length * 0.9)];
    assert.ok(p90 < 500, `90th percentile ${p90.toFixed(1)} ms (all: ${times.map((t) => t.toFixed(0)).join(' ')})`);
    await waitForMetrics(server, idle);
  });
});

describe('slow clients hold neither a thread nor the shutdown', () => {
  test('SIGTERM ends within --shutdown-timeout + 1 s whatever the clients do', async () => {
    const server = await startServer(['--shutdown-timeout', '1']);
    const head = request('POST', '/v1/completions', { headers: [['Content-Length', '20']] });
    // Five clients sending their head one byte at a time.
    const trickle = await Promise.all(Array.from({ length: 5 }, () => connect(server)));
    let stop = false;
    const dripping = trickle.map(async (c) => {
      for (let i = 0; !stop && i < head.length; i++) {
        await c.write(head[i]).catch(() => {});
        await sleep(200);
      }
    });
    // A body that trickles, a stream nobody reads, a long non-streamed request, an idle keep-alive.
    const slowBody = await connect(server);
    await slowBody.write(request('POST', '/v1/completions', { headers: [['Content-Length', '1000']] }) + '{');
    const unread = await connect(server);
    unread.socket.pause();
    await unread.write(postJson('/v1/completions', { prompt: 'x', max_tokens: 2000, ignore_eos: true, stream: true }));
    const waiting = await connect(server);
    await waiting.write(postJson('/v1/completions', { prompt: 'y', max_tokens: 2000, ignore_eos: true }));
    const keepAlive = await connect(server);
    await keepAlive.write(request('GET', '/health'));
    assert.equal((await keepAlive.response()).status, 200);
    await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 2);
    await sleep(500);

    const t0 = Date.now();
    server.kill('SIGTERM');
    const { code } = await server.stop(20000);
    const took = Date.now() - t0;
    stop = true;
    await Promise.all(dripping);
    for (const c of [...trickle, slowBody, unread, waiting, keepAlive]) c.destroy();
    assert.equal(code, 0, server.log());
    assert.ok(took < 2000, `exit took ${took} ms (limit: 1 s + 1 s)`);
  });

  test('a head that trickles in past --header-timeout gets 408 and the connection closes', async () => {
    const server = await startServer(['--header-timeout', '1']);
    try {
      const c = await connect(server);
      const t0 = Date.now();
      let stop = false;
      const dripping = (async () => {
        await c.write('GET /health HTTP/1.1\r\nHost: localhost\r\n').catch(() => {});
        for (let i = 0; !stop && i < 100; i++) {
          await c.write('X').catch(() => {});
          await sleep(100);
        }
      })();
      const r = await c.response(5000);
      stop = true;
      await dripping;
      assert.ok(r, 'a response came');
      assertOpenAIError(assert, r, 408);
      assert.ok(await c.closedWithin(3000), 'the connection closed');
      assert.ok(Date.now() - t0 < 2500, `after ${Date.now() - t0} ms`);
    } finally {
      await stopOk(server);
    }
  });
});

describe('HTTP/1.1 framing', () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(() => stopOk(server));

  test('two requests in one write get two responses, in order', async () => {
    const c = await connect(server);
    await c.write(postJson('/v1/completions', { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }) +
                  request('GET', '/v1/models'));
    const first = await c.response();
    const second = await c.response();
    assert.equal(first?.status, 200);
    assert.equal(first.json.object, 'text_completion');
    assert.equal(first.json.usage.completion_tokens, 4);
    assert.equal(second?.status, 200, 'the second request was answered');
    assert.equal(second.json.object, 'list');
    c.destroy();
  });

  test('a stream, a completion and /health pipelined are answered in order on one connection', async () => {
    const c = await connect(server);
    await c.write(postJson('/v1/completions', { prompt: 'Once', max_tokens: 6, stream: true }) +
                  postJson('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 }) +
                  request('GET', '/health'));
    const stream = await c.response();
    assert.equal(stream?.status, 200);
    assert.ok(stream.text.endsWith('data: [DONE]\n\n'), stream.text);
    const chat = await c.response();
    assert.equal(chat?.status, 200);
    assert.equal(chat.json.object, 'chat.completion');
    const health = await c.response();
    assert.equal(health?.status, 200);
    c.destroy();
  });

  // Bytes read ahead while a response is written land in a read that is
  // still pending when the pipelined request is parsed; the next request on
  // the connection must arrive intact (seen as a 408 "head did not arrive"
  // after a keep-alive fetch, when the read buffer moved under that read).
  test('after pipelined requests, later requests on the connection arrive intact', async () => {
    const c = await connect(server);
    const long = (target) => request('GET', target, { headers: [['X-Padding', 'p'.repeat(400)]] });
    for (let round = 0; round < 5; ++round) {
      await c.write(long('/v1/models') + long('/health'));
      assert.equal((await c.response())?.status, 200, `round ${round}: the first pipelined request`);
      assert.equal((await c.response())?.status, 200, `round ${round}: the second pipelined request`);
      await c.write(request('GET', '/health'));
      const r = await c.response(3000);
      assert.equal(r?.status, 200, `round ${round}: the request after the pipelined pair (${r?.text})`);
    }
    c.destroy();
  });

  test('a client that half-closes after its request gets the response', async () => {
    const c = await connect(server);
    await c.write(postJson('/v1/completions', { prompt: 'Once upon a time', max_tokens: 16, ignore_eos: true }));
    c.end();
    const r = await c.response();
    assert.equal(r?.status, 200, 'a response came');
    assert.equal(r.json.usage.completion_tokens, 16);
    assert.ok(await c.closedWithin(3000), 'then the server closed');
  });

  test('half-closed, a stream runs to [DONE] and pipelined requests are all answered', async () => {
    const c = await connect(server);
    await c.write(postJson('/v1/completions', { prompt: 'Once', max_tokens: 40, ignore_eos: true, stream: true }) +
                  request('GET', '/v1/models'));
    c.end();
    const stream = await c.response();
    assert.equal(stream?.status, 200);
    assert.ok(stream.text.endsWith('data: [DONE]\n\n'), stream.text.slice(-200));
    assert.equal((stream.text.match(/"finish_reason":"length"/g) ?? []).length, 1);
    const models = await c.response();
    assert.equal(models?.status, 200);
    assert.ok(await c.closedWithin(3000));
  });

  test('chunked request bodies and Expect: 100-continue', async () => {
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 3 });
    const c = await connect(server);
    await c.write(request('POST', '/v1/completions', {
      headers: [['Transfer-Encoding', 'chunked'], ['Expect', '100-continue']],
    }));
    await c.waitForData(2000);
    c.parseOne();
    assert.deepEqual(c.interim, [100], '100 Continue before the body');
    const half = body.length >> 1;
    await c.write(`${half.toString(16)}\r\n${body.slice(0, half)}\r\n`);
    await c.write(`${(body.length - half).toString(16)}\r\n${body.slice(half)}\r\n0\r\n\r\n`);
    const r = await c.response();
    assert.equal(r?.status, 200, r?.text);
    assert.equal(r.json.usage.completion_tokens, 3);
    c.destroy();
  });

  test('ambiguous or malformed framing gets 400 and closes the connection (no smuggled request)', async () => {
    const body = '{"prompt":"x","max_tokens":2}';
    const smuggled = request('GET', '/v1/models');
    const cases = [
      ['conflicting Content-Length', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\nContent-Length: 5\r\n\r\n${body}`, 400],
      ['repeated Content-Length', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 400],
      ['negative Content-Length', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n${body}`, 400],
      ['Content-Length and Transfer-Encoding', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`, 400],
      ['a transfer coding not ending in chunked', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n${body}`, 400],
      ['a header line without a colon', `GET /health HTTP/1.1\r\nHost: a\r\nNoColonHere\r\n\r\n`, 400],
      ['a NUL in a header value', `GET /health HTTP/1.1\r\nHost: a\r\nX-Bad: a\u0000b\r\n\r\n`, 400],
      ['whitespace before the colon', `GET /health HTTP/1.1\r\nHost : a\r\n\r\n`, 400],
      ['HTTP/1.1 without Host', `GET /health HTTP/1.1\r\n\r\n`, 400],
      ['a bad chunk size', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`, 400],
      ['an unknown expectation', `POST /v1/completions HTTP/1.1\r\nHost: a\r\nExpect: magic\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 417],
    ];
    for (const [name, bytes, status] of cases) {
      const c = await connect(server);
      await c.write(bytes + smuggled).catch(() => {});
      const r = await c.response();
      assert.ok(r, `${name}: a response`);
      assertOpenAIError(assert, r, status);
      assert.ok(await c.closedWithin(3000), `${name}: the connection closes`);
      assert.equal(await c.response(100), null, `${name}: nothing after it was answered`);
    }
  });

  test('more than --max-headers header fields get 431', async () => {
    const c = await connect(server);
    const headers = Array.from({ length: 200 }, (_, i) => [`X-H${i}`, 'v']);
    await c.write(request('GET', '/health', { headers }));
    assertOpenAIError(assert, await c.response(), 431);
  });

  test('a URL over --max-url-bytes gets 414', async () => {
    const c = await connect(server);
    await c.write(request('GET', `/health?${'q'.repeat(20000)}`)).catch(() => {});
    assertOpenAIError(assert, await c.response(), 414);
  });

  test('a 64 MB head gets 431 early and leaves no memory behind', async () => {
    const rss0 = rssBytes(server.proc.pid);
    const c = await connect(server);
    const line = `X-Pad: ${'a'.repeat(8000)}\r\n`; // 8 KB lines, 8,192 of them
    let sent = 0;
    try {
      await c.write('GET /health HTTP/1.1\r\nHost: localhost\r\n');
      for (let i = 0; i < 8192 && !c.closed && c.buf.length === 0; i += 64) {
        await c.write(line.repeat(64));
        sent += 64 * line.length;
      }
    } catch {} // the server stopped reading and closed: expected
    const r = await c.response();
    assert.ok(r, 'a response came');
    assertOpenAIError(assert, r, 431);
    assert.ok(sent < 64 << 20, 'refused before the head ended');
    const grew = rssBytes(server.proc.pid) - rss0;
    assert.ok(grew < 32 << 20, `resident memory grew by ${grew >> 20} MB`);
  });
});

describe('authentication before the body', () => {
  let server;
  before(async () => {
    server = await startServer(['--api-key', 'sk-test-123']);
  });
  after(() => stopOk(server));

  test('a missing or wrong key is refused from the headers, before any body byte is sent', async () => {
    for (const auth of [null, 'Bearer sk-wrong', 'Bearer sk-test-12', 'Bearer sk-test-1234', 'Basic sk-test-123']) {
      const c = await connect(server);
      const headers = [['Content-Type', 'application/json'], ['Content-Length', String(8 << 20)]];
      if (auth) headers.push(['Authorization', auth]);
      await c.write(request('POST', '/v1/completions', { headers }));
      const r = await c.response(3000);
      assert.ok(r, `${auth}: answered without the body`);
      assertOpenAIError(assert, r, 401);
      assert.equal(r.headers['www-authenticate'], 'Bearer');
      assert.ok(await c.closedWithin(4000), `${auth}: the connection closes`);
    }
  });

  test('Expect: 100-continue: a wrong key gets 401 and no 100; the right key gets 100, then the answer', async () => {
    const body = JSON.stringify({ prompt: 'Once', max_tokens: 2 });
    const head = (key) => request('POST', '/v1/completions', {
      headers: [['Content-Length', String(body.length)], ['Expect', '100-continue'], ['Authorization', `Bearer ${key}`]],
    });
    const wrong = await connect(server);
    await wrong.write(head('nope'));
    const refused = await wrong.response(3000);
    assertOpenAIError(assert, refused, 401);
    assert.deepEqual(wrong.interim, []);
    const right = await connect(server);
    await right.write(head('sk-test-123'));
    await right.waitForData(3000);
    right.parseOne();
    assert.deepEqual(right.interim, [100]);
    await right.write(body);
    const r = await right.response();
    assert.equal(r?.status, 200, r?.text);
    right.destroy();
  });
});

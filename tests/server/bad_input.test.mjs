// Bad input over raw HTTP (node's fetch): malformed and non-object JSON,
// wrong types, negative and huge numbers, a 10 MB body, unsupported
// parameters, bad logit_bias, a context overflow, unknown routes, a missing
// or wrong API key, a full queue, and broken chat templates. Each gets a 4xx (or 503)
// with the OpenAI error shape, and the server stays healthy afterwards.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertOpenAIError, client, metrics, post, startServer, waitForMetrics } from './helpers.mjs';

const chatBody = (extra = {}) => ({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, ...extra });

async function assertHealthy(server) {
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
  const r = await post(server, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 4 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.usage.completion_tokens, 4);
  const m = await waitForMetrics(server, (x) => x.rocmforge_kv_blocks_used === 0 && x.rocmforge_running_sequences === 0);
  assert.equal(m.rocmforge_kv_blocks_used, 0);
}

describe('bad requests', () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('malformed and non-object JSON', async () => {
    for (const route of ['/v1/completions', '/v1/chat/completions']) {
      for (const body of ['{bad', '', '{"prompt": "x",}', '[1, 2]', '"prompt"', '42', 'null', 'true',
                          '{"prompt":"x"} {"again":1}', '\u0000', '{"a":' + '['.repeat(500) + ']'.repeat(500) + '}']) {
        const r = await post(server, route, body);
        assertOpenAIError(assert, r, 400);
      }
      // Invalid UTF-8 inside a JSON string.
      const bytes = new Uint8Array([...Buffer.from('{"prompt":"'), 0xff, 0xfe, ...Buffer.from('"}')]);
      assertOpenAIError(assert, await post(server, route, bytes), 400);
    }
  });

  test('wrong types name the parameter', async () => {
    const cases = [
      ['/v1/completions', { prompt: 5 }, 'prompt'],
      ['/v1/completions', { prompt: { text: 'x' } }, 'prompt'],
      ['/v1/completions', { prompt: ['a', 1] }, 'prompt'],
      ['/v1/completions', { prompt: [1, 'a'] }, 'prompt'],
      ['/v1/completions', { prompt: [] }, 'prompt'],
      ['/v1/completions', { prompt: 'x', max_tokens: '16' }, 'max_tokens'],
      ['/v1/completions', { prompt: 'x', max_tokens: 2.5 }, 'max_tokens'],
      ['/v1/completions', { prompt: 'x', temperature: 'warm' }, 'temperature'],
      ['/v1/completions', { prompt: 'x', top_p: [1] }, 'top_p'],
      ['/v1/completions', { prompt: 'x', stream: 'yes' }, 'stream'],
      ['/v1/completions', { prompt: 'x', stop: 7 }, 'stop'],
      ['/v1/completions', { prompt: 'x', stop: ['a', null] }, 'stop'],
      ['/v1/completions', { prompt: 'x', seed: 'abc' }, 'seed'],
      ['/v1/completions', { prompt: 'x', logprobs: true }, 'logprobs'],
      ['/v1/completions', { prompt: 'x', model: 3 }, 'model'],
      ['/v1/completions', { prompt: 'x', stream: true, stream_options: 'usage' }, 'stream_options'],
      ['/v1/chat/completions', { messages: 'Hi' }, 'messages'],
      ['/v1/chat/completions', { messages: [] }, 'messages'],
      ['/v1/chat/completions', { messages: [{ content: 'Hi' }] }, 'messages[0].role'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      ['/v1/chat/completions', { messages: ['Hi'] }, 'messages[0]'],
      ['/v1/chat/completions', chatBody({ logprobs: 2 }), 'logprobs'],
      ['/v1/chat/completions', chatBody({ max_completion_tokens: 'many' }), 'max_completion_tokens'],
    ];
    for (const [route, body, param] of cases) {
      const r = await post(server, route, body);
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, `${JSON.stringify(body)} -> ${r.text}`);
    }
  });

  test('negative and huge numbers', async () => {
    const cases = [
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ max_tokens: -1 }, 'max_tokens'],
      [{ max_tokens: 1e20 }, 'max_tokens'],
      [{ max_tokens: 2 ** 53 }, 'max_tokens'],
      [{ temperature: -0.5 }, 'temperature'],
      [{ temperature: 1e308 }, 'temperature'],
      [{ top_p: 0 }, 'top_p'],
      [{ top_p: 1.5 }, 'top_p'],
      [{ top_k: -7 }, 'top_k'],
      [{ min_p: -1 }, 'min_p'],
      [{ presence_penalty: 9 }, 'presence_penalty'],
      [{ frequency_penalty: -9 }, 'frequency_penalty'],
      [{ repetition_penalty: -1 }, 'repetition_penalty'],
      [{ logprobs: -1 }, 'logprobs'],
      [{ logprobs: 1000 }, 'logprobs'],
      [{ min_tokens: -3 }, 'min_tokens'],
      [{ seed: 1e30 }, 'seed'],
      [{ n: 0 }, 'n'],
    ];
    for (const [extra, param] of cases) {
      const r = await post(server, '/v1/completions', { prompt: 'x', ...extra });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, `${JSON.stringify(extra)} -> ${r.text}`);
    }
    for (const ids of [[1, -5], [1, 1e12], [1, 99999], [1, 1.5]]) {
      const r = await post(server, '/v1/completions', { prompt: ids, max_tokens: 2 });
      assertOpenAIError(assert, r, 400);
    }
    const big = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2147483647 });
    assertOpenAIError(assert, big, 400);
    assert.equal(big.json.error.code, 'context_length_exceeded');
  });

  test('prompt plus max_tokens beyond the context gives the token counts', async () => {
    const r = await post(server, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 5000 });
    assertOpenAIError(assert, r, 400);
    assert.match(r.json.error.message, /2048/);
    assert.match(r.json.error.message, /5000/);
    assert.match(r.json.error.message, /\b5\b/); // the prompt's tokens
    const long = await post(server, '/v1/completions', { prompt: 'Once upon a time '.repeat(600), max_tokens: 1 });
    assertOpenAIError(assert, long, 400);
    const chat = await post(server, '/v1/chat/completions', { messages: [{ role: 'user', content: 'dog '.repeat(3000) }] });
    assertOpenAIError(assert, chat, 400);
  });

  test('logit_bias outside the vocabulary or [-100, 100], or not keyed by token ids, is a 400 naming it', async () => {
    for (const bias of [{ 50256: -100 }, { 5: 101 }, { five: 1 }, { '-1': 1 }, [5]]) {
      for (const route of ['/v1/completions', '/v1/chat/completions']) {
        const body = route === '/v1/completions' ? { prompt: 'x', max_tokens: 2 } : chatBody();
        const r = await post(server, route, { ...body, logit_bias: bias });
        assertOpenAIError(assert, r, 400);
        assert.equal(r.json.error.param, 'logit_bias', r.text);
      }
    }
    await assertHealthy(server);
  });

  test('stop_token_ids that are not a list of in-vocabulary ids, and unknown message roles, are 400s naming them', async () => {
    for (const ids of [5, ['a'], [-1], [50256], [1.5], new Array(300).fill(1)]) {
      const r = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2, stop_token_ids: ids });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, 'stop_token_ids', r.text);
    }
    for (const role of ['wizard', 'User', '']) {
      const r = await post(server, '/v1/chat/completions', { messages: [{ role: 'user', content: 'a' }, { role, content: 'b' }] });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, 'messages[1].role', r.text);
    }
    // Both servers' text fields: `prompt` (vLLM's) is the one tokenized; a
    // chat with either is a 400.
    const both = await post(server, '/tokenize', { content: 'a b c', prompt: 'x' });
    assert.equal(both.status, 200, both.text);
    assert.deepEqual(both.json.tokens, (await post(server, '/tokenize', { prompt: 'x' })).json.tokens);
    const chatAndText = await post(server, '/tokenize', { messages: [{ role: 'user', content: 'a' }], content: 'x' });
    assertOpenAIError(assert, chatAndText, 400);
    await assertHealthy(server);
  });

  test('n outside 1..128, or prompts x n above 256 choices, is a 400 naming n', async () => {
    for (const body of [{ prompt: 'x', n: 0 }, { prompt: 'x', n: 129 }, { prompt: new Array(129).fill('x'), n: 2 }]) {
      const r = await post(server, '/v1/completions', { ...body, max_tokens: 2 });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, 'n', r.text);
    }
    await assertHealthy(server);
  });

  test('unsupported parameters are named', async () => {
    const cases = [
      ['/v1/chat/completions', chatBody({ tool_choice: 'required' }), 'tool_choice'],
      ['/v1/chat/completions', chatBody({ functions: [{ name: 'f' }] }), 'functions'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content'],
      ['/v1/completions', { prompt: 'x', best_of: 2 }, 'best_of'],
      ['/v1/completions', { prompt: 'x', echo: true }, 'echo'],
      ['/v1/completions', { prompt: 'x', suffix: 'tail' }, 'suffix'],
    ];
    for (const [route, body, param] of cases) {
      const r = await post(server, route, body);
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
      assert.ok(r.json.error.message.includes(param.split('[')[0]), r.text);
    }
    // Unknown fields are ignored.
    const ok = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2, frobnicate: { deep: [1, 2] } });
    assert.equal(ok.status, 200, ok.text);
  });

  test('a 10 MB body is refused with 413', async () => {
    const body = JSON.stringify({ prompt: 'x'.repeat(10 * 1024 * 1024) });
    const r = await post(server, '/v1/completions', body);
    assertOpenAIError(assert, r, 413);
    const chat = await post(server, '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'y'.repeat(10 << 20) }] }));
    assertOpenAIError(assert, chat, 413);
  });

  test('unknown routes, wrong methods and unknown models', async () => {
    const r = await fetch(`${server.url}/v1/nothing`);
    assert.equal(r.status, 404);
    assert.ok((await r.json()).error.message);
    const get = await fetch(`${server.url}/v1/completions`);
    assert.equal(get.status, 404);
    assert.ok((await get.json()).error);
    const model = await post(server, '/v1/completions', { model: 'no-such-model', prompt: 'x' });
    assertOpenAIError(assert, model, 404);
    assert.equal(model.json.error.code, 'model_not_found');
    const m = await fetch(`${server.url}/v1/models/no-such-model`);
    assert.equal(m.status, 404);
  });

  test('the server is healthy after all of it', async () => {
    await assertHealthy(server);
    const m = await metrics(server);
    assert.equal(m['rocmforge_http_responses_total{code="500"}'], 0, 'no 500 was sent');
    assert.ok(m['rocmforge_http_responses_total{code="400"}'] > 50);
    assert.ok(m['rocmforge_http_responses_total{code="413"}'] >= 2);
  });
});

describe('API key (and a served model name)', () => {
  let server;
  before(async () => {
    server = await startServer(['--api-key', 'sk-test-123', '--served-model-name', 'tiny-stories']);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('a missing or wrong key gets 401; the right one works', async () => {
    const none = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2 });
    assertOpenAIError(assert, none, 401);
    const wrong = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2 }, { authorization: 'Bearer sk-wrong' });
    assertOpenAIError(assert, wrong, 401);
    const prefix = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2 }, { authorization: 'Bearer sk-test-12' });
    assertOpenAIError(assert, prefix, 401);
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 401);
    for (const [route, body] of [['/tokenize', { prompt: 'x' }], ['/detokenize', { tokens: [1] }]]) {
      assertOpenAIError(assert, await post(server, route, body), 401);
      const r = await post(server, route, body, { authorization: 'Bearer sk-test-123' });
      assert.equal(r.status, 200, r.text);
    }
    const otherModel = await post(server, '/tokenize', { prompt: 'x', model: 'gpt-4' }, { authorization: 'Bearer sk-test-123' });
    assertOpenAIError(assert, otherModel, 404);
    await assert.rejects(client(server, { apiKey: 'nope' }).models.list(), (e) => e.status === 401);
    const openai = client(server, { apiKey: 'sk-test-123' });
    const ok = await openai.completions.create({ model: 'tiny-stories', prompt: 'x', max_tokens: 2 });
    assert.equal(ok.usage.completion_tokens, 2);
    assert.equal(ok.model, 'tiny-stories');
    assert.deepEqual((await openai.models.list()).data.map((m) => m.id), ['tiny-stories']);
    // Health and metrics stay open (for load balancers and scrapers).
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 200);
  });
});

describe('a full queue', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-num-seqs', '1', '--max-queue', '1']);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('gets 503 with Retry-After, and nothing leaks', async () => {
    const ctls = [new AbortController(), new AbortController()];
    const body = (i) => JSON.stringify({ prompt: `Story ${i}`, max_tokens: 1800, ignore_eos: true, stream: true });
    const running = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: body(0), signal: ctls[0].signal });
    assert.equal(running.status, 200);
    await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 1);
    const waiting = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: body(1), signal: ctls[1].signal });
    assert.equal(waiting.status, 200);
    const r = await post(server, '/v1/completions', { prompt: 'x', max_tokens: 2 });
    assertOpenAIError(assert, r, 503);
    assert.equal(r.json.error.code, 'queue_full');
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    await assert.rejects(client(server).completions.create({ prompt: 'x', max_tokens: 2 }), (e) => e.status === 503);
    for (const c of ctls) c.abort();
    // The server learns of the aborts when it next writes or polls the
    // connections; until then both requests still hold the slot and the queue.
    await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 0 && m.rocmforge_queue_depth === 0);
    await assertHealthy(server);
  });
});

describe('a burst while sequence slots are free', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-num-seqs', '8', '--max-queue', '1']);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('8 concurrent streams into 8 slots are all admitted; only the queue beyond them is refused', async () => {
    for (let round = 0; round < 5; round++) {
      const ctls = Array.from({ length: 10 }, () => new AbortController());
      const body = (i) => JSON.stringify({ prompt: `Story ${i}`, max_tokens: 1800, ignore_eos: true, stream: true });
      const open = (i) => fetch(`${server.url}/v1/completions`, { method: 'POST', body: body(i), signal: ctls[i].signal });
      const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => open(i)));
      assert.deepEqual(burst.map((r) => r.status), Array(8).fill(200), `round ${round}`);
      const queued = await open(8); // waits for a slot: the queue holds one
      assert.equal(queued.status, 200, `round ${round}`);
      const refused = await open(9);
      assert.equal(refused.status, 503, `round ${round}`);
      assert.equal((await refused.json()).error.code, 'queue_full');
      for (const c of ctls) c.abort();
      await waitForMetrics(server, (m) => m.rocmforge_running_sequences === 0 && m.rocmforge_queue_depth === 0);
    }
    await assertHealthy(server);
  });
});

describe('broken chat templates', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'rf-templates-'));
  const templates = {
    raises: ["{{ raise_exception('Conversation roles must alternate user/assistant') }}", /roles must alternate/],
    syntax: ['{% for m in messages %}{{ m.content }', /template/],
    undefined_call: ['{{ messages[0].content.no_such_method() }}', /template/],
  };
  for (const [name, [source, message]] of Object.entries(templates)) {
    test(`a template that ${name === 'raises' ? 'raises' : 'is broken'} (${name}) gives 400 with its message`, async () => {
      const file = path.join(dir, `${name}.jinja`);
      writeFileSync(file, source);
      const server = await startServer(['--chat-template-file', file]);
      try {
        for (const stream of [false, true]) {
          const r = await post(server, '/v1/chat/completions', chatBody({ stream }));
          assertOpenAIError(assert, r, 400);
          assert.match(r.json.error.message, message);
          assert.equal(r.json.error.code, 'chat_template_error');
        }
        await assert.rejects(
          client(server).chat.completions.create(chatBody()),
          (e) => e.status === 400 && /template/.test(e.message),
        );
        await assertHealthy(server); // completions still work
      } finally {
        const { code } = await server.stop();
        assert.equal(code, 0, server.log());
      }
    });
  }
});

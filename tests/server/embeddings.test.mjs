// /v1/embeddings over the official `openai` client, on the tiny Qwen3
// model: with --embeddings (the model's pooling: qwen3 -> last) and
// --pooling mean, each prompt of arch/tiny-qwen3.embd-last.jsonl and
// .embd-mean.jsonl (token ids, as llama.cpp was given them) gives
// llama.cpp's normalised `embedding`; a batch gives the same vectors as
// single requests; base64 is the same float32 values; dimensions keeps the
// first N renormalised; text inputs are tokenized as prompts; every KV block
// is free again afterwards, also after a client that left; a server without
// --embeddings answers 501; bad inputs are 400s naming the field. Also the
// /tokenize fields of both servers.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TESTDATA, TINY_QWEN3, assertOpenAIError, client, metrics, post, startServer, waitForMetrics } from './helpers.mjs';

const reference = (pooling) =>
  readFileSync(path.join(TESTDATA, 'arch', `tiny-qwen3.embd-${pooling}.jsonl`), 'utf8')
    .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));

const maxDiff = (a, b) => {
  assert.equal(a.length, b.length);
  return Math.max(...a.map((x, i) => Math.abs(x - b[i])));
};
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const idle = (m) => m.rocmforge_running_sequences === 0 && m.rocmforge_kv_blocks_used === 0;

describe('embeddings', () => {
  let last;
  let mean;
  before(async () => {
    [last, mean] = await Promise.all([
      startServer(['--embeddings'], { model: TINY_QWEN3 }),
      startServer(['--embeddings', '--pooling', 'mean'], { model: TINY_QWEN3 }),
    ]);
  });
  after(async () => {
    for (const s of [last, mean]) assert.equal((await s.stop()).code, 0, s.log());
  });

  test("last and mean pooling equal llama.cpp's normalised embeddings; a batch equals single requests", async () => {
    for (const [server, pooling] of [[last, 'last'], [mean, 'mean']]) {
      const openai = client(server);
      const ref = reference(pooling);
      const single = [];
      for (const line of ref) {
        const r = await openai.embeddings.create({ model: 'tiny-qwen3', input: line.prompt_tokens, encoding_format: 'float' });
        assert.equal(r.object, 'list');
        assert.equal(r.data.length, 1);
        assert.equal(r.usage.prompt_tokens, line.prompt_tokens.length);
        const v = r.data[0].embedding;
        assert.ok(Math.abs(norm(v) - 1) < 1e-5);
        assert.ok(maxDiff(v, line.embedding) < 1e-4, `${pooling}, ${line.prompt_tokens.length} tokens: ${maxDiff(v, line.embedding)}`);
        single.push(v);
      }
      const batch = await openai.embeddings.create({ model: 'tiny-qwen3', input: [...ref, ...ref].map((l) => l.prompt_tokens), encoding_format: 'float' });
      assert.equal(batch.data.length, 2 * ref.length);
      batch.data.forEach((d, i) => {
        assert.equal(d.index, i);
        assert.ok(maxDiff(d.embedding, single[i % ref.length]) < 1e-6, `batch item ${i}`);
      });
      assert.equal(batch.usage.prompt_tokens, 2 * ref.reduce((s, l) => s + l.prompt_tokens.length, 0));
      await waitForMetrics(server, idle);
    }
  });

  test('base64, dimensions and text inputs', async () => {
    const ids = reference('last')[2].prompt_tokens;
    const plain = (await post(last, '/v1/embeddings', { input: ids })).json.data[0].embedding;
    const b64 = await post(last, '/v1/embeddings', { input: ids, encoding_format: 'base64' });
    assert.equal(b64.status, 200, b64.text);
    const bytes = Buffer.from(b64.json.data[0].embedding, 'base64');
    const floats = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    assert.equal(floats.length, plain.length);
    assert.ok(maxDiff(floats, plain) < 1e-7);
    // The openai client asks for base64 by default and decodes it.
    const sdk = await client(last).embeddings.create({ model: 'tiny-qwen3', input: ids });
    assert.ok(maxDiff(sdk.data[0].embedding, plain) < 1e-7);
    const cut = (await post(last, '/v1/embeddings', { input: ids, dimensions: 16 })).json.data[0].embedding;
    assert.equal(cut.length, 16);
    assert.ok(Math.abs(norm(cut) - 1) < 1e-5);
    const scale = norm(plain.slice(0, 16));
    cut.forEach((x, i) => assert.ok(Math.abs(x - plain[i] / scale) < 1e-5));
    // A text is tokenized as a completion prompt.
    const text = await post(last, '/v1/embeddings', { input: ['Once upon a time', 'Once upon a time'] });
    const tokens = (await post(last, '/tokenize', { prompt: 'Once upon a time' })).json.tokens;
    const direct = (await post(last, '/v1/embeddings', { input: tokens })).json.data[0].embedding;
    assert.equal(text.json.usage.prompt_tokens, 2 * tokens.length);
    assert.ok(maxDiff(text.json.data[0].embedding, direct) < 1e-6);
    assert.ok(maxDiff(text.json.data[1].embedding, direct) < 1e-6);
  });

  test('a client that leaves mid-batch frees every KV block', async () => {
    // The batch is as large as a request may be, so the abort usually lands
    // mid-batch; the waits are on counters, never on a gauge that a fast
    // machine could raise and drop between two polls.
    const ids = reference('mean')[3].prompt_tokens;
    const inputs = 2048;
    const start = await metrics(last);
    const controller = new AbortController();
    const pending = fetch(`${last.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: new Array(inputs).fill(ids) }),
      signal: controller.signal,
    }).catch(() => null);
    await waitForMetrics(last, (m) => m.rocmforge_requests_total >= start.rocmforge_requests_total + inputs);
    controller.abort();
    await pending;
    // Every input ends, the queued ones cancelled as the engine reaches them.
    await waitForMetrics(last, (m) => idle(m) && m.rocmforge_queue_depth === 0 &&
      m.rocmforge_requests_finished_total === m.rocmforge_requests_total);
  });

  test('bad inputs are 400s naming the field', async () => {
    const cases = [
      [{}, 'input'],
      [{ input: '' }, 'input'],
      [{ input: [] }, 'input'],
      [{ input: ['a', ''] }, 'input[1]'],
      [{ input: ['a', [1]] }, 'input'],
      [{ input: [1, 'a'] }, 'input'],
      [{ input: [100000] }, 'input'],
      [{ input: new Array(600).fill(5) }, 'input'],
      [{ input: new Array(2049).fill('a') }, 'input'],
      [{ input: 'a', encoding_format: 'int8' }, 'encoding_format'],
      [{ input: 'a', dimensions: 0 }, 'dimensions'],
      [{ input: 'a', dimensions: 65 }, 'dimensions'],
    ];
    for (const [body, param] of cases) {
      const r = await post(last, '/v1/embeddings', body);
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
    }
    const model = await post(last, '/v1/embeddings', { input: 'a', model: 'text-embedding-3-small' });
    assertOpenAIError(assert, model, 404);
  });

  test("/tokenize takes either server's fields: prompt or content, with_pieces, parse_special", async () => {
    const a = await post(last, '/tokenize', { prompt: 'Hi there' });
    const b = await post(last, '/tokenize', { content: 'Hi there', add_special: true });
    assert.deepEqual(a.json.tokens, b.json.tokens);
    const both = await post(last, '/tokenize', { prompt: 'Hi there', content: 'other', add_special_tokens: false });
    assert.deepEqual(both.json.tokens, a.json.tokens.slice(1));  // prompt wins; no BOS
    const pieces = await post(last, '/tokenize', { content: 'Hi', with_pieces: true });
    assert.ok(pieces.json.tokens.every((t) => Number.isInteger(t.id) && (typeof t.piece === 'string' || Array.isArray(t.piece))), pieces.text);
    const special = await post(last, '/tokenize', { content: '</s>', parse_special: true });
    const literal = await post(last, '/tokenize', { content: '</s>', parse_special: false });
    assert.deepEqual(special.json.tokens, [2]);
    assert.ok(literal.json.tokens.length > 1);
  });
});

test('a server without --embeddings answers 501', async () => {
  const server = await startServer([], { model: TINY_QWEN3 });
  try {
    const r = await post(server, '/v1/embeddings', { input: 'a' });
    assertOpenAIError(assert, r, 501);
    assert.match(r.json.error.message, /--embeddings/);
  } finally {
    assert.equal((await server.stop()).code, 0, server.log());
  }
});

// End-to-end: the official `openai` client against `rocmforge serve` on
// stories260K (CPU). Completions and chat, streamed and not; greedy text
// equals the llama.cpp golden text; streamed == non-streamed; usage,
// finish_reason, logprobs shapes, batches, n > 1 choices (sharing their
// prompt's KV blocks), stop strings and token ids,
// llama.cpp's /tokenize shape, models.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, goldenCases, metrics, post, startServer } from './helpers.mjs';

let server;
let openai;
before(async () => {
  server = await startServer();
  openai = client(server);
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

async function collectCompletion(stream) {
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

async function collectChat(stream) {
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role };
}

describe('completions', () => {
  test('greedy text equals the llama.cpp golden text, streamed and not', async () => {
    for (const g of goldenCases().slice(0, 2)) {
      const params = { model: 'stories260K', prompt: g.prompt, temperature: 0, max_tokens: g.greedy_tokens.length };
      const r = await openai.completions.create(params);
      assert.equal(r.object, 'text_completion');
      assert.equal(r.model, 'stories260K');
      assert.match(r.id, /^cmpl-/);
      assert.equal(r.choices.length, 1);
      assert.equal(r.choices[0].text, g.greedy_text, `prompt ${JSON.stringify(g.prompt)}`);
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.deepEqual(r.usage, {
        prompt_tokens: g.prompt_tokens.length,
        completion_tokens: g.greedy_tokens.length,
        total_tokens: g.prompt_tokens.length + g.greedy_tokens.length,
        prompt_tokens_details: r.usage.prompt_tokens_details,
      });

      const s = await collectCompletion(
        await openai.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }),
      );
      assert.equal(s.text, g.greedy_text);
      assert.equal(s.finish, 'length');
      assert.ok(s.chunks > 2, 'streamed in several chunks');
      assert.equal(s.usage.completion_tokens, g.greedy_tokens.length);
      assert.equal(s.usage.prompt_tokens, g.prompt_tokens.length);
    }
  });

  test('prompt as token ids gives the same text as the string', async () => {
    const g = goldenCases()[0];
    const r = await openai.completions.create({ prompt: g.prompt_tokens, temperature: 0, max_tokens: 20 });
    const s = await openai.completions.create({ prompt: g.prompt, temperature: 0, max_tokens: 20 });
    assert.equal(r.choices[0].text, s.choices[0].text);
    assert.equal(r.usage.prompt_tokens, g.prompt_tokens.length);
  });

  test('a batch of prompts gives one choice per prompt, with its index', async () => {
    const [a, b] = goldenCases();
    const r = await openai.completions.create({ prompt: [a.prompt, b.prompt], temperature: 0, max_tokens: 12 });
    assert.equal(r.choices.length, 2);
    const byIndex = Object.fromEntries(r.choices.map((c) => [c.index, c.text]));
    const one = await openai.completions.create({ prompt: b.prompt, temperature: 0, max_tokens: 12 });
    assert.equal(byIndex[1], one.choices[0].text);
    assert.equal(r.usage.completion_tokens, 24);

    const ids = await openai.completions.create({ prompt: [a.prompt_tokens, b.prompt_tokens], temperature: 0, max_tokens: 12 });
    assert.deepEqual(ids.choices.map((c) => c.text), r.choices.map((c) => c.text));

    const stream = await openai.completions.create({ prompt: [a.prompt, b.prompt], temperature: 0, max_tokens: 12, stream: true });
    const texts = ['', ''];
    const finishes = [null, null];
    for await (const chunk of stream)
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finishes[c.index] = c.finish_reason;
      }
    assert.deepEqual(texts, r.choices.map((c) => c.text));
    assert.deepEqual(finishes, ['length', 'length']);
  });

  test('n choices: greedy ones equal the golden text, followers share the prompt\'s blocks, usage counts the prompt once', async () => {
    const g = goldenCases()[0];
    // A prompt of several full KV blocks, new to the server (no cached blocks).
    const prompt = (g.prompt + ' and a dog ').repeat(9) + g.prompt;
    const hits0 = (await metrics(server)).rocmforge_prefix_cache_hits_total;
    const r = await openai.completions.create({ prompt, temperature: 0, max_tokens: 12, n: 3 });
    const hits = (await metrics(server)).rocmforge_prefix_cache_hits_total - hits0;
    const alone = await openai.completions.create({ prompt, temperature: 0, max_tokens: 12 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of r.choices) assert.equal(c.text, alone.choices[0].text);
    assert.equal(r.usage.prompt_tokens, alone.usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, 3 * alone.usage.completion_tokens);
    // Both followers found the leader's full prompt blocks (of 16 tokens):
    // they were admitted after its prefill.
    assert.ok(hits >= 2 * Math.floor((alone.usage.prompt_tokens - 1) / 16) * 16, `prefix hits ${hits}`);
    // Two prompts x n = 2: choice p * n + j.
    const b = await openai.completions.create({ prompt: [g.prompt, goldenCases()[1].prompt], temperature: 0, max_tokens: 8, n: 2 });
    assert.deepEqual(b.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.equal(b.choices[0].text, b.choices[1].text);
    assert.equal(b.choices[2].text, b.choices[3].text);
    assert.notEqual(b.choices[0].text, b.choices[2].text);
  });

  test('n sampled choices differ, and a seed makes them repeat; streamed chat gives each choice its index', async () => {
    const body = { prompt: 'Once upon a time', temperature: 1.0, max_tokens: 24, n: 4, seed: 7 };
    const a = await openai.completions.create(body);
    const b = await openai.completions.create(body);
    assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
    assert.ok(new Set(a.choices.map((c) => c.text)).size > 1, JSON.stringify(a.choices));
    const chat = { messages: [{ role: 'user', content: 'Tell me a story' }], temperature: 0, max_tokens: 10, n: 2 };
    const whole = await openai.chat.completions.create(chat);
    assert.equal(whole.choices.length, 2);
    const texts = ['', ''];
    const finish = [null, null];
    for await (const chunk of await openai.chat.completions.create({ ...chat, stream: true })) {
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
    assert.deepEqual(finish, whole.choices.map((c) => c.finish_reason));
  });

  test('stop strings end the text before them with finish_reason "stop"', async () => {
    const g = goldenCases()[0];
    const cut = g.greedy_text.indexOf('Lily');
    assert.ok(cut > 0);
    for (const stop of ['Lily', ['zzz', 'Lily']]) {
      const r = await openai.completions.create({ prompt: g.prompt, temperature: 0, max_tokens: 60, stop });
      assert.equal(r.choices[0].text, g.greedy_text.slice(0, cut));
      assert.equal(r.choices[0].finish_reason, 'stop');
      const s = await collectCompletion(
        await openai.completions.create({ prompt: g.prompt, temperature: 0, max_tokens: 60, stop, stream: true }),
      );
      assert.equal(s.text, r.choices[0].text);
      assert.equal(s.finish, 'stop');
    }
  });

  test('stop_token_ids end the choice at that token, its text left out', async () => {
    const g = goldenCases()[0];
    const ids = g.greedy_tokens;
    const i = ids.findIndex((t, k) => k >= 3 && !ids.slice(0, k).includes(t));
    const before = await post(server, '/detokenize', { tokens: ids.slice(0, i) });
    assert.equal(before.status, 200, before.text);
    for (const stream of [false, true]) {
      const body = { prompt: g.prompt, temperature: 0, max_tokens: 60, stop_token_ids: [ids[i]] };
      if (!stream) {
        const r = await openai.completions.create(body);
        assert.equal(r.choices[0].finish_reason, 'stop');
        assert.equal(r.usage.completion_tokens, i + 1);
        assert.equal(r.choices[0].text, before.json.prompt);
      } else {
        const s = await collectCompletion(await openai.completions.create({ ...body, stream: true }));
        assert.equal(s.finish, 'stop');
        assert.equal(s.text, before.json.prompt);
      }
    }
    // Before min_tokens the stop token cannot be drawn (as EOS).
    const r = await openai.completions.create({
      prompt: g.prompt, temperature: 0, max_tokens: 8, min_tokens: 8, stop_token_ids: [ids[i]],
    });
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test("llama.cpp's /tokenize shape: content, add_special", async () => {
    const g = goldenCases()[0];
    const plain = await post(server, '/tokenize', { content: g.prompt });
    assert.equal(plain.status, 200, plain.text);
    assert.deepEqual(plain.json.tokens, g.prompt_tokens.slice(1)); // no BOS unless add_special
    const bos = await post(server, '/tokenize', { content: g.prompt, add_special: true });
    assert.deepEqual(bos.json.tokens, g.prompt_tokens);
  });

  test('min_tokens and ignore_eos reach the engine', async () => {
    const r = await openai.completions.create({
      prompt: 'Once upon a time', max_tokens: 300, min_tokens: 300, ignore_eos: true, temperature: 0,
    });
    assert.equal(r.usage.completion_tokens, 300);
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test('the same seed gives the same sampled text', async () => {
    const p = { prompt: 'Once upon a time', max_tokens: 24, temperature: 1.0, top_p: 0.9, top_k: 40, seed: 1234 };
    const a = await openai.completions.create(p);
    const b = await openai.completions.create(p);
    assert.equal(a.choices[0].text, b.choices[0].text);
    const s = await collectCompletion(await openai.completions.create({ ...p, stream: true }));
    assert.equal(s.text, a.choices[0].text);
  });

  test('logprobs: tokens, token_logprobs, top_logprobs, text_offset', async () => {
    const r = await openai.completions.create({ prompt: 'Once upon a time', max_tokens: 5, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 5);
    assert.equal(lp.token_logprobs.length, 5);
    assert.equal(lp.top_logprobs.length, 5);
    assert.equal(lp.text_offset.length, 5);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    for (let i = 0; i < 5; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = Object.values(lp.top_logprobs[i]);
      assert.ok(top.length >= 3 && top.length <= 4);
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(Math.max(...top) - lp.token_logprobs[i]) < 1e-4);
    }
  });

  test('penalties are accepted and change greedy text', async () => {
    const base = { prompt: 'Once upon a time', max_tokens: 64, temperature: 0 };
    const plain = await openai.completions.create(base);
    const penalised = await openai.completions.create({ ...base, frequency_penalty: 2, presence_penalty: 2, repetition_penalty: 1.5 });
    assert.notEqual(penalised.choices[0].text, plain.choices[0].text);
  });
});

describe('chat completions', () => {
  const messages = [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Tell me about a dog.' },
  ];

  test('streamed and non-streamed greedy text are identical', async () => {
    const r = await openai.chat.completions.create({ model: 'stories260K', messages, temperature: 0, max_tokens: 40 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);

    const s = await collectChat(
      await openai.chat.completions.create({
        messages, temperature: 0, max_tokens: 40, stream: true, stream_options: { include_usage: true },
      }),
    );
    assert.equal(s.role, 'assistant');
    assert.equal(s.text, r.choices[0].message.content);
    assert.equal(s.finish, r.choices[0].finish_reason);
    assert.equal(s.usage.prompt_tokens, r.usage.prompt_tokens);
    assert.equal(s.usage.completion_tokens, r.usage.completion_tokens);
  });

  test('max_completion_tokens limits the output', async () => {
    const r = await openai.chat.completions.create({ messages, temperature: 0, max_completion_tokens: 3 });
    assert.equal(r.usage.completion_tokens, 3);
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test('content given as text parts renders like a string', async () => {
    const a = await openai.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me about a dog.' }] }], temperature: 0, max_tokens: 10,
    });
    const b = await openai.chat.completions.create({
      messages: [{ role: 'user', content: 'Tell me about a dog.' }], temperature: 0, max_tokens: 10,
    });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    assert.equal(a.usage.prompt_tokens, b.usage.prompt_tokens);
  });

  test('logprobs and top_logprobs follow the chat shape', async () => {
    const r = await openai.chat.completions.create({ messages, temperature: 0, max_tokens: 4, logprobs: true, top_logprobs: 2 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 4);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    }
    const s = await openai.chat.completions.create({ messages, temperature: 0, max_tokens: 4, logprobs: true, stream: true });
    let n = 0;
    for await (const chunk of s) for (const c of chunk.choices) n += c.logprobs?.content?.length ?? 0;
    assert.equal(n, 4);
  });
});

describe('models', () => {
  test('GET /v1/models lists the served model, which a request may name by path too', async () => {
    const list = await openai.models.list();
    const ids = list.data.map((m) => m.id);
    assert.deepEqual(ids, ['stories260K']);
    assert.equal(list.data[0].object, 'model');
    const m = await openai.models.retrieve('stories260K');
    assert.equal(m.id, 'stories260K');
    const r = await openai.completions.create({ model: 'stories260K.gguf', prompt: 'Once', max_tokens: 2 });
    assert.equal(r.choices.length, 1);
    await assert.rejects(openai.models.retrieve('gpt-4'), (e) => e.status === 404);
    await assert.rejects(
      openai.completions.create({ model: 'gpt-4', prompt: 'x', max_tokens: 2 }),
      (e) => e.status === 404 && e.code === 'model_not_found',
    );
  });
});

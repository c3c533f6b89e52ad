// End-to-end: `rocmforge serve --spec-type ngram` on stories260K (CPU). The
// golden prompts' greedy completions are llama.cpp's golden text with
// speculation, streamed and not, and the same with "speculative": false;
// seeded sampled completions equal a server's without speculation; /metrics
// counts the proposals verified and accepted, and opted-out requests add
// none.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, goldenCases, metrics, startServer } from './helpers.mjs';

let spec;
let plain;
before(async () => {
  spec = await startServer(['--spec-type', 'ngram', '--draft-max', '5', '--spec-ngram-min', '1']);
  plain = await startServer();
});
after(async () => {
  for (const s of [spec, plain]) {
    const { code } = await s.stop();
    assert.equal(code, 0, s.log());
  }
});

describe('speculative decoding', () => {
  test('greedy completions are the golden text, streamed or not, opted out or not', async () => {
    const openai = client(spec);
    for (const g of goldenCases()) {
      const n = g.greedy_tokens.length;
      const body = { model: 'stories260K', prompt: g.prompt, max_tokens: n, temperature: 0 };
      const r = await openai.completions.create(body);
      assert.equal(r.choices[0].text, g.greedy_text, g.prompt);
      assert.equal(r.usage.completion_tokens, n);
      const off = await openai.completions.create({ ...body, speculative: false });
      assert.equal(off.choices[0].text, g.greedy_text);
      let text = '';
      for await (const chunk of await openai.completions.create({ ...body, stream: true }))
        for (const c of chunk.choices) text += c.text ?? '';
      assert.equal(text, g.greedy_text);
    }
    const m = await metrics(spec);
    assert.ok(m.rocmforge_spec_decode_num_drafts_total > 0, JSON.stringify(m));
    assert.ok(m.rocmforge_spec_decode_num_accepted_tokens_total > 0);
    assert.ok(m.rocmforge_spec_decode_mean_acceptance_length > 1);
  });

  test('seeded sampling equals a server without speculation', async () => {
    const prompt = goldenCases()[0].prompt;
    for (const seed of [1, 2, 3, 4]) {
      const body = { model: 'stories260K', prompt, max_tokens: 60, temperature: 0.9, top_k: 40, seed };
      const [a, b] = await Promise.all([client(spec).completions.create(body), client(plain).completions.create(body)]);
      assert.equal(a.choices[0].text, b.choices[0].text, `seed ${seed}`);
    }
  });

  test('an opted-out request proposes nothing', async () => {
    const before = await metrics(spec);
    const r = await client(spec).completions.create({
      model: 'stories260K', prompt: goldenCases()[1].prompt, max_tokens: 60, temperature: 0, speculative: false,
    });
    assert.equal(r.usage.completion_tokens, 60);
    const m = await metrics(spec);
    assert.equal(m.rocmforge_spec_decode_num_drafts_total, before.rocmforge_spec_decode_num_drafts_total);
    assert.equal((await metrics(plain)).rocmforge_spec_decode_num_drafts_total, 0);
  });
});

// Serving with tensor parallelism: `rocmforge serve --tensor-parallel-size 2`
// on the CPU (two ranks joined in-process, each with its KV heads and
// vocabulary range) answers concurrent streamed and non-streamed requests —
// greedy and seeded sampling with top-k/top-p and logprobs, a JSON schema
// with n = 2 choices — with exactly the text of the one-rank server, and
// shuts down cleanly.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { client, startServer } from './helpers.mjs';

let one, two;
before(async () => {
  one = await startServer([]);
  two = await startServer(['--tensor-parallel-size', '2']);
});
after(async () => {
  await one?.stop();
  await two?.stop();
});

const requests = [
  { prompt: 'Once upon a time', max_tokens: 40, temperature: 0 },
  { prompt: 'The little dog', max_tokens: 30, temperature: 0.9, top_p: 0.9, seed: 11 },
  { prompt: 'Lily went to the park', max_tokens: 30, temperature: 1.0, top_k: 20, seed: 5, logprobs: 2 },
  { prompt: 'One day', max_tokens: 25, temperature: 0.7, seed: 3, frequency_penalty: 0.5 },
];

async function complete(server, r, stream) {
  const c = client(server);
  if (!stream) {
    const res = await c.completions.create({ model: 'stories260K', ...r });
    return { text: res.choices[0].text, logprobs: res.choices[0].logprobs };
  }
  let text = '';
  for await (const chunk of await c.completions.create({ model: 'stories260K', ...r, stream: true }))
    text += chunk.choices[0]?.text ?? '';
  return { text };
}

test('two ranks give the one-rank text, streamed and not, concurrently', async () => {
  for (const stream of [false, true]) {
    const want = await Promise.all(requests.map((r) => complete(one, r, stream)));
    const got = await Promise.all(requests.map((r) => complete(two, r, stream)));
    for (let i = 0; i < requests.length; ++i) {
      assert.ok(want[i].text.length > 0, `request ${i} produced no text`);
      assert.equal(got[i].text, want[i].text, `request ${i} (stream ${stream})`);
      if (want[i].logprobs)
        assert.deepEqual(got[i].logprobs.tokens, want[i].logprobs.tokens, `request ${i} logprob tokens`);
    }
  }
  assert.match(two.log(), /tensor parallel: 2 CPU ranks/);
});

test('two ranks: a JSON schema and n = 2 sampled choices give the one-rank replies', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, color: { enum: ['red', 'green', 'blue'] } },
    required: ['name', 'color'],
    additionalProperties: false,
  };
  const body = {
    model: 'stories260K',
    messages: [{ role: 'user', content: 'Describe a cat.' }],
    max_tokens: 60,
    temperature: 0.9,
    seed: 4,
    n: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'cat', schema, strict: true } },
  };
  const [want, got] = await Promise.all([one, two].map((s) => client(s).chat.completions.create(body)));
  assert.equal(got.choices.length, 2);
  for (let i = 0; i < 2; ++i) {
    assert.equal(got.choices[i].message.content, want.choices[i].message.content, `choice ${i}`);
    const v = JSON.parse(got.choices[i].message.content);
    assert.ok(['red', 'green', 'blue'].includes(v.color), got.choices[i].message.content);
  }
});

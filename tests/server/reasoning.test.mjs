// Reasoning in chat completions over the official `openai` client, on the
// tiny random-weight Qwen3 model with a Qwen3-style thinking template
// (tests/templates/qwen3_thinking.jinja: the generation prompt opens
// <think>), replies steered by GBNF grammars or bounded by a reasoning
// budget where the random weights would never close the tag:
//  - the thinking is message.reasoning_content / delta.reasoning_content,
//    never in content, streamed equal to non-streamed; usage counts its tokens;
//  - chat_template_kwargs reach the template (enable_thinking false closes the
//    thinking in the prompt; so does a budget of 0); an earlier turn's
//    reasoning_content is shown to the template;
//  - a reasoning budget (per request, or --reasoning-budget) ends the
//    thinking after that many tokens with the closing tag's tokens;
//  - tool calls and response_format after the thinking, forced or parsed;
//  - a template whose model opens <think> itself, harmony's channels and
//    calls, and --reasoning-format none (the thinking stays content);
//  - bad reasoning fields are 400s naming the field.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TEMPLATES, TINY_QWEN3, assertOpenAIError, client, post, startServer } from './helpers.mjs';

const QWEN3 = path.join(TEMPLATES, 'qwen3_thinking.jinja');
const ARGS = ['-c', '2048', '--chat-template-file'];
const user = [{ role: 'user', content: 'What is up?' }];
// Inside the thinking (the prompt opened it): two words, the tag, an answer.
const THINKING = 'root ::= [a-z]{3,8} " " [a-z]{3,8} "\\n</think>\\n\\nAnswer: " [a-z]{2,6}';

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'] },
  },
};

// A streamed chat: the reasoning and content it sent, its tool calls and
// finish, and the order the kinds of delta came in.
async function streamChat(openai, body) {
  const out = { reasoning: '', content: '', calls: [], finish: null, order: [], usage: null };
  for await (const chunk of await openai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const ch of chunk.choices) {
      const d = ch.delta;
      if (d.reasoning_content) {
        out.reasoning += d.reasoning_content;
        if (out.order.at(-1) !== 'reasoning') out.order.push('reasoning');
      }
      if (d.content) {
        out.content += d.content;
        if (out.order.at(-1) !== 'content') out.order.push('content');
      }
      for (const call of d.tool_calls ?? []) {
        out.calls.push(call);
        out.order.push('tool_calls');
      }
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

// The prompt a chat gets, as text. (The tiny vocabulary has no piece for a
// lone space: a space is the bytes of U+2581, which come back as that
// character.)
async function rendered(server, body) {
  const ids = await post(server, '/tokenize', body);
  assert.equal(ids.status, 200, ids.text);
  return (await post(server, '/detokenize', { tokens: ids.json.tokens })).json.prompt.replaceAll('\u2581', ' ');
}

describe('reasoning in chat completions', () => {
  let server;
  let openai;
  before(async () => {
    server = await startServer([...ARGS, QWEN3, '--reasoning-budget', '6'], { model: TINY_QWEN3 });
    openai = client(server);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('the thinking is reasoning_content, never content; streamed as not; usage counts it', async () => {
    const body = { messages: user, grammar: THINKING, temperature: 0, max_tokens: 200 };
    const r = await openai.chat.completions.create(body);
    const m = r.choices[0].message;
    assert.match(m.reasoning_content, /^[a-z]{3,8} [a-z]{3,8}$/);
    assert.match(m.content, /^Answer: [a-z]{2,6}$/);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const details = r.usage.completion_tokens_details;
    assert.ok(details.reasoning_tokens > 0 && details.reasoning_tokens < r.usage.completion_tokens, JSON.stringify(r.usage));
    const s = await streamChat(openai, body);
    assert.equal(s.reasoning, m.reasoning_content);
    assert.equal(s.content, m.content);
    assert.deepEqual(s.order, ['reasoning', 'content']);
    assert.equal(s.finish, 'stop');
    assert.deepEqual(s.usage.completion_tokens_details, details);
  });

  test('chat_template_kwargs reach the template: enable_thinking false (or a budget of 0) closes the thinking', async () => {
    assert.ok((await rendered(server, { messages: user })).endsWith('<|im_start|>assistant\n<think>\n'));
    const closed = await rendered(server, { messages: user, chat_template_kwargs: { enable_thinking: false } });
    assert.ok(closed.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), closed);
    const off = { chat_template_kwargs: { enable_thinking: false } };
    const r = await openai.chat.completions.create({ messages: user, grammar: 'root ::= "Hello " [a-z]{2,5}', temperature: 0, max_tokens: 50, ...off });
    assert.match(r.choices[0].message.content, /^Hello [a-z]{2,5}$/);
    assert.equal(r.choices[0].message.reasoning_content, undefined);
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 0);
    // A budget of 0: the same prompt; the reply, never opening a section, is content.
    const zero = await openai.chat.completions.create({ messages: user, reasoning_budget: 0, temperature: 0, max_tokens: 8 });
    const offPlain = await openai.chat.completions.create({ messages: user, temperature: 0, max_tokens: 8, ...off });
    assert.equal(zero.usage.prompt_tokens, offPlain.usage.prompt_tokens);
    assert.equal(zero.choices[0].message.content, offPlain.choices[0].message.content);
    assert.equal(zero.choices[0].message.reasoning_content, undefined);
  });

  test("an earlier turn's reasoning_content is given to the template", async () => {
    for (const key of ['reasoning_content', 'reasoning']) {
      const messages = [...user, { role: 'assistant', content: 'Not much.', [key]: 'They greet me' }, { role: 'user', content: 'Ok' }];
      const text = await rendered(server, { messages });
      assert.ok(text.includes('<|im_start|>assistant\n<think>\nThey greet me\n</think>\n\nNot much.<|im_end|>'), text);
    }
  });

  test('a reasoning budget ends the thinking with the closing tag (per request, else --reasoning-budget)', async () => {
    for (const [budget, extra] of [[3, { reasoning_budget: 3 }], [6, {}]]) {
      const r = await openai.chat.completions.create({ messages: user, temperature: 0, max_tokens: budget + 20, logprobs: true, ...extra });
      const pieces = r.choices[0].logprobs.content.map((t) => t.token);
      // After `budget` free tokens, the closing tag's tokens, then the answer.
      let k = 0;
      while (pieces.slice(budget, budget + k).join('') !== '</think>\n\n' && k < 20) ++k;
      assert.ok(k < 20, `no closing tag after ${budget} tokens: ${JSON.stringify(pieces)}`);
      assert.equal(r.usage.completion_tokens_details.reasoning_tokens, budget + k);
      const m = r.choices[0].message;
      assert.equal(m.reasoning_content, pieces.slice(0, budget).join('').trim());
      assert.ok(!m.content.includes('</think>') && !m.content.includes(m.reasoning_content), m.content);
    }
  });

  test('tool calls after the thinking: forced (required) and parsed (auto)', async () => {
    const forced = { messages: user, tools: [weather], tool_choice: 'required', parallel_tool_calls: false, reasoning_budget: 4, temperature: 0, max_tokens: 300 };
    const r = await openai.chat.completions.create(forced);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.equal(typeof JSON.parse(c.message.tool_calls[0].function.arguments).city, 'string');
    assert.ok(c.message.reasoning_content.length > 0);
    const s = await streamChat(openai, forced);
    assert.deepEqual(s.order, ['reasoning', 'tool_calls']);
    assert.equal(s.reasoning, c.message.reasoning_content);
    assert.deepEqual(s.calls[0].function, c.message.tool_calls[0].function);
    // A call the model writes after its thinking (tool_choice auto), and one
    // inside the thinking, which is thinking.
    const call = '"<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"" [a-z]{2,5} "\\"}}\\n</tool_call>"';
    const auto = await openai.chat.completions.create({
      messages: user, tools: [weather], temperature: 0, max_tokens: 300, grammar: `root ::= [a-z]{3,6} "\\n</think>\\n\\n" ${call}`,
    });
    assert.equal(auto.choices[0].message.tool_calls.length, 1);
    assert.match(auto.choices[0].message.reasoning_content, /^[a-z]{3,6}$/);
    const inside = await openai.chat.completions.create({
      messages: user, tools: [weather], temperature: 0, max_tokens: 300, grammar: `root ::= ${call} "\\n</think>\\n\\nNo."`,
    });
    assert.equal(inside.choices[0].message.tool_calls, undefined);
    assert.match(inside.choices[0].message.reasoning_content, /^<tool_call>/);
    assert.equal(inside.choices[0].message.content, 'No.');
  });

  test('response_format after the thinking', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['n'], additionalProperties: false };
    const r = await openai.chat.completions.create({
      messages: user, reasoning_budget: 3, temperature: 0, max_tokens: 100,
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema } },
    });
    const m = r.choices[0].message;
    const value = JSON.parse(m.content);
    assert.ok(Number.isInteger(value.n) && value.n >= 0 && value.n <= 9, m.content);
    assert.ok(m.reasoning_content.length > 0);
  });

  test('bad reasoning fields are 400s naming the field', async () => {
    const cases = [
      [{ chat_template_kwargs: 'x' }, 'chat_template_kwargs'],
      [{ chat_template_kwargs: { messages: [] } }, 'chat_template_kwargs'],
      [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
      [{ reasoning_budget: -2 }, 'reasoning_budget'],
      [{ reasoning_budget: 'many' }, 'reasoning_budget'],
      [{ reasoning_budget: 4, grammar: 'root ::= "x"' }, 'reasoning_budget'],
      [{ messages: [{ role: 'assistant', content: 'a', reasoning_content: 5 }] }, 'messages[0].reasoning_content'],
    ];
    for (const [extra, param] of cases) {
      const r = await post(server, '/v1/chat/completions', { messages: user, max_tokens: 2, ...extra });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
    }
  });
});

describe('reasoning formats', () => {
  test('a model that opens <think> itself, and --reasoning-format none', async () => {
    const own = await startServer([...ARGS, path.join(TEMPLATES, 'think_in_reply.jinja')], { model: TINY_QWEN3 });
    const none = await startServer([...ARGS, QWEN3, '--reasoning-format', 'none'], { model: TINY_QWEN3 });
    try {
      const r = await client(own).chat.completions.create({
        messages: user, temperature: 0, max_tokens: 100, grammar: 'root ::= "<think>" [a-z]{3,6} "</think>" "Done " [a-z]{2,4}',
      });
      assert.match(r.choices[0].message.reasoning_content, /^[a-z]{3,6}$/);
      assert.match(r.choices[0].message.content, /^Done [a-z]{2,4}$/);
      const plain = await client(own).chat.completions.create({ messages: user, temperature: 0, max_tokens: 100, grammar: 'root ::= "Hi " [a-z]{2,4}' });
      assert.equal(plain.choices[0].message.reasoning_content, undefined);
      const raw = await client(none).chat.completions.create({ messages: user, grammar: THINKING, temperature: 0, max_tokens: 200 });
      assert.equal(raw.choices[0].message.reasoning_content, undefined);
      assert.match(raw.choices[0].message.content, /^[a-z]{3,8} [a-z]{3,8}\n<\/think>\n\nAnswer: [a-z]{2,6}$/);
    } finally {
      assert.equal((await own.stop()).code, 0, own.log());
      assert.equal((await none.stop()).code, 0, none.log());
    }
  });

  test("harmony: the analysis channel is reasoning, final is content, commentary to=functions.NAME a call", async () => {
    const server = await startServer([...ARGS, path.join(TEMPLATES, 'harmony.jinja')], { model: TINY_QWEN3 });
    try {
      const openai = client(server);
      const prompt = await rendered(server, { messages: user, chat_template_kwargs: { reasoning_effort: 'low' } });
      assert.ok(prompt.startsWith('<s> <|start|>system<|message|>Reasoning: low') && prompt.endsWith('<|start|>assistant'), prompt);
      const body = {
        messages: user, temperature: 0, max_tokens: 200,
        grammar: 'root ::= "<|channel|>analysis<|message|>" [a-z]{3,6} "<|end|><|start|>assistant<|channel|>final<|message|>" [a-z]{2,5}',
      };
      const r = await openai.chat.completions.create(body);
      assert.match(r.choices[0].message.reasoning_content, /^[a-z]{3,6}$/);
      assert.match(r.choices[0].message.content, /^[a-z]{2,5}$/);
      const s = await streamChat(openai, body);
      assert.equal(s.reasoning, r.choices[0].message.reasoning_content);
      assert.equal(s.content, r.choices[0].message.content);
      const call = await openai.chat.completions.create({
        messages: user, tools: [weather], temperature: 0, max_tokens: 200,
        grammar: 'root ::= "<|channel|>analysis<|message|>" [a-z]{3,5} "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\\"city\\": \\"" [a-z]{2,4} "\\"}"',
      });
      const c = call.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
      assert.match(JSON.parse(c.message.tool_calls[0].function.arguments).city, /^[a-z]{2,4}$/);
      assert.match(c.message.reasoning_content, /^[a-z]{3,5}$/);
      // Constraints cannot make harmony's markers: refused by name.
      const refused = await post(server, '/v1/chat/completions', { messages: user, response_format: { type: 'json_object' } });
      assertOpenAIError(assert, refused, 400);
      assert.equal(refused.json.error.param, 'response_format');
    } finally {
      assert.equal((await server.stop()).code, 0, server.log());
    }
  });
});

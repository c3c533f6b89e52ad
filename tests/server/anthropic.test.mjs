// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) over
// the official `@anthropic-ai/sdk` client and raw HTTP, on the tiny Qwen3
// model with the Qwen3-style thinking template, replies steered by grammar
// (this server's extension, passed in the body) or bounded by the thinking
// budget:
//  - thinking and text blocks, streamed as not: the SDK's MessageStream
//    consumes the events (its thinking / text / inputJson events fire) and
//    its final message equals the non-streamed one; the raw events come in
//    Anthropic's order (message_start, ping, per block start / deltas /
//    stop with rising indices, message_delta, message_stop);
//  - tool_use after the thinking (tool_choice tool / any, budget_tokens),
//    a conversation with tool_result and earlier thinking blocks;
//  - stop_reason end_turn, stop_sequence (with the sequence), max_tokens,
//    tool_use; usage input_tokens equals count_tokens;
//  - the key as x-api-key or Bearer; errors in Anthropic's shape, which the
//    SDK raises as its typed errors.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { TEMPLATES, TINY_QWEN3, anthropicClient, post, sseEvents } from './helpers.mjs';
import { startServer } from './helpers.mjs';

const KEY = 'sk-ant-test-7';
const user = [{ role: 'user', content: 'What is up?' }];
const THINKING = 'root ::= [a-z]{3,8} " " [a-z]{3,8} "\\n</think>\\n\\nAnswer: " [a-z]{2,6}';
const weatherTool = {
  name: 'get_weather',
  description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'] },
};

// The raw events are in Anthropic's order; returns the blocks they built.
function checkEventOrder(events) {
  const names = events.map((e) => e.event);
  assert.equal(names[0], 'message_start');
  assert.equal(names.at(-1), 'message_stop');
  assert.equal(names.at(-2), 'message_delta');
  for (const e of events) assert.equal(e.data.type, e.event, JSON.stringify(e));
  const blocks = [];
  let open = -1;
  for (const e of events) {
    if (e.event === 'content_block_start') {
      assert.equal(open, -1, 'a block starts while another is open');
      assert.equal(e.data.index, blocks.length);
      open = e.data.index;
      blocks.push({ ...e.data.content_block });
    } else if (e.event === 'content_block_delta') {
      assert.equal(e.data.index, open);
      const b = blocks[open];
      const d = e.data.delta;
      if (d.type === 'thinking_delta') b.thinking += d.thinking;
      else if (d.type === 'text_delta') b.text += d.text;
      else if (d.type === 'input_json_delta') b.json = (b.json ?? '') + d.partial_json;
      else assert.fail(`unknown delta ${d.type}`);
      assert.equal({ thinking_delta: 'thinking', text_delta: 'text', input_json_delta: 'tool_use' }[d.type], b.type);
    } else if (e.event === 'content_block_stop') {
      assert.equal(e.data.index, open);
      open = -1;
    } else if (e.event === 'message_delta' || e.event === 'message_stop') {
      assert.equal(open, -1, `${e.event} with a block open`);
    }
  }
  return blocks;
}

describe('anthropic messages', () => {
  let server;
  let anthropic;
  before(async () => {
    server = await startServer(['-c', '2048', '--chat-template-file', path.join(TEMPLATES, 'qwen3_thinking.jinja'), '--api-key', KEY],
      { model: TINY_QWEN3 });
    anthropic = anthropicClient(server, { apiKey: KEY });
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('thinking and text blocks, streamed as not; usage input_tokens equals count_tokens', async () => {
    const body = { model: 'tiny-qwen3', max_tokens: 200, temperature: 0, messages: user, system: 'Be brief.', grammar: THINKING };
    const m = await anthropic.messages.create(body);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.match(m.id, /^msg_/);
    assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
    assert.match(m.content[0].thinking, /^[a-z]{3,8} [a-z]{3,8}$/);
    assert.equal(m.content[0].signature, '');
    assert.match(m.content[1].text, /^Answer: [a-z]{2,6}$/);
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.stop_sequence, null);
    const { max_tokens, grammar, temperature, ...countable } = body;
    const counted = await anthropic.messages.countTokens(countable);
    assert.equal(m.usage.input_tokens, counted.input_tokens);
    assert.ok(m.usage.output_tokens > 0);

    // The SDK's stream helper.
    let thinking = '';
    let text = '';
    const stream = anthropic.messages.stream(body);
    stream.on('thinking', (d) => (thinking += d));
    stream.on('text', (d) => (text += d));
    const final = await stream.finalMessage();
    assert.deepEqual(final.content, m.content);
    assert.equal(final.stop_reason, 'end_turn');
    assert.deepEqual(final.usage.input_tokens, m.usage.input_tokens);
    assert.equal(thinking, m.content[0].thinking);
    assert.equal(text, m.content[1].text);
    assert.equal(await stream.finalText(), m.content[1].text);

    // The raw events.
    const raw = await sseEvents(server, '/v1/messages', body, { 'x-api-key': KEY });
    assert.equal(raw.status, 200);
    assert.equal(raw.events[1].event, 'ping');
    const blocks = checkEventOrder(raw.events);
    assert.deepEqual(blocks, m.content);
  });

  test('tool_use after the thinking (tool_choice tool and any, budget_tokens)', async () => {
    for (const tool_choice of [{ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }, { type: 'any', disable_parallel_tool_use: true }]) {
      const body = {
        model: 'tiny-qwen3', max_tokens: 300, temperature: 0, messages: user, tools: [weatherTool], tool_choice,
        thinking: { type: 'enabled', budget_tokens: 4 },
      };
      const m = await anthropic.messages.create(body);
      assert.equal(m.stop_reason, 'tool_use');
      assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'tool_use']);
      const use = m.content[1];
      assert.equal(use.name, 'get_weather');
      assert.match(use.id, /^toolu_/);
      assert.equal(typeof use.input.city, 'string');
      assert.ok(m.content[0].thinking.length > 0);
      let json = '';
      const stream = anthropic.messages.stream(body);
      stream.on('inputJson', (delta) => (json += delta));
      const final = await stream.finalMessage();
      const noIds = (content) => content.map(({ id, ...rest }) => rest);  // (each reply's ids are its own)
      assert.deepEqual(noIds(final.content), noIds(m.content));
      assert.match(final.content[1].id, /^toolu_/);
      assert.deepEqual(JSON.parse(json), use.input);
      checkEventOrder((await sseEvents(server, '/v1/messages', body, { 'x-api-key': KEY })).events);
    }
  });

  test('a conversation with tool_result and earlier thinking blocks', async () => {
    const messages = [
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should call the tool', signature: '' },
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '20 C' }] }, { type: 'text', text: 'And?' }] },
    ];
    const short = await anthropic.messages.countTokens({ model: 'tiny-qwen3', messages: messages.slice(0, 1), tools: [weatherTool] });
    const long = await anthropic.messages.countTokens({ model: 'tiny-qwen3', messages, tools: [weatherTool] });
    assert.ok(long.input_tokens > short.input_tokens + 20, `${long.input_tokens} vs ${short.input_tokens}`);
    const m = await anthropic.messages.create({ model: 'tiny-qwen3', max_tokens: 8, messages, tools: [weatherTool], thinking: { type: 'disabled' } });
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.usage.input_tokens, (await anthropic.messages.countTokens({ model: 'tiny-qwen3', messages, tools: [weatherTool], thinking: { type: 'disabled' } })).input_tokens);
  });

  test('stop_sequences and max_tokens', async () => {
    const body = {
      model: 'tiny-qwen3', max_tokens: 200, temperature: 0, messages: user, stop_sequences: ['STOP', 'never'],
      grammar: 'root ::= [a-z]{3} "\\n</think>\\n\\nHello there STOP and more"',
    };
    const m = await anthropic.messages.create(body);
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, 'STOP');
    assert.equal(m.content.at(-1).text, 'Hello there ');
    const final = await anthropic.messages.stream(body).finalMessage();
    assert.equal(final.stop_reason, 'stop_sequence');
    assert.equal(final.stop_sequence, 'STOP');
    // Greedy, and a grammar that cannot end within 3 tokens: the reply is cut by
    // max_tokens, never ended by a sampled end-of-turn token.
    const cut = await anthropic.messages.create({
      model: 'tiny-qwen3', max_tokens: 3, temperature: 0, messages: user, grammar: 'root ::= [a-z]{64}',
    });
    assert.equal(cut.stop_reason, 'max_tokens');
    assert.equal(cut.usage.output_tokens, 3);
  });

  test('the key as x-api-key or Bearer; errors in Anthropic shape and the SDK error types', async () => {
    const body = { model: 'tiny-qwen3', max_tokens: 2, messages: user };
    for (const headers of [{ 'x-api-key': KEY }, { authorization: `Bearer ${KEY}` }]) {
      const r = await post(server, '/v1/messages', body, headers);
      assert.equal(r.status, 200, r.text);
    }
    for (const headers of [{}, { 'x-api-key': 'wrong' }]) {
      const r = await post(server, '/v1/messages', body, headers);
      assert.equal(r.status, 401);
      assert.equal(r.json.type, 'error');
      assert.equal(r.json.error.type, 'authentication_error');
    }
    await assert.rejects(anthropicClient(server, { apiKey: 'wrong' }).messages.create(body), (e) => e instanceof Anthropic.AuthenticationError);
    const bad = [
      [{ messages: user }, /max_tokens/],
      [{ ...body, messages: [] }, /messages/],
      [{ ...body, messages: [{ role: 'system', content: 'x' }] }, /role/],
      [{ ...body, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, /image/],
      [{ ...body, tools: [{ name: 'x' }] }, /input_schema/],
      [{ ...body, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, /server tools/],
      [{ ...body, tool_choice: { type: 'sometimes' } }, /tool_choice/],
      [{ ...body, tool_choice: { type: 'tool' } }, /tool_choice.name/],
      [{ ...body, thinking: { type: 'enabled', budget_tokens: 5 } }, /budget_tokens/],
      [{ ...body, thinking: { type: 'enabled' } }, /budget_tokens/],
      [{ ...body, temperature: 1.5 }, /temperature/],
      [{ ...body, stop_sequences: 'STOP' }, /stop_sequences/],
      [{ ...body, model: 'claude-opus' }, /claude-opus/],
    ];
    for (const [b, message] of bad) {
      const r = await post(server, '/v1/messages', b, { 'x-api-key': KEY });
      assert.ok(r.status === 400 || r.status === 404, r.text);
      assert.equal(r.json.type, 'error', r.text);
      assert.equal(r.json.error.type, r.status === 404 ? 'not_found_error' : 'invalid_request_error');
      assert.match(r.json.error.message, message);
    }
    await assert.rejects(anthropic.messages.create({ ...body, messages: [] }), (e) => e instanceof Anthropic.BadRequestError && e.error.error.type === 'invalid_request_error');
    const count = await post(server, '/v1/messages/count_tokens', { messages: 'x' }, { 'x-api-key': KEY });
    assert.equal(count.status, 400);
    assert.equal(count.json.error.type, 'invalid_request_error');
  });
});

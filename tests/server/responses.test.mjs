// OpenAI's Responses API (/v1/responses) over the official `openai` client
// and raw HTTP, on the tiny Qwen3 model with the Qwen3-style thinking
// template, replies steered by grammar (this server's extension) or bounded
// by a reasoning budget:
//  - output items reasoning (reasoning_text) and message (output_text),
//    output_text, usage with reasoning tokens; streamed, the SDK's
//    responses.stream() helper consumes the events and its final response
//    equals the non-streamed one; the raw events come in order
//    (response.created first, sequence numbers rising by one, every item
//    added, its parts and deltas, done, response.completed last);
//  - function tools: function_call items, then function_call_output items
//    in the next request's input;
//  - text.format json_schema after the thinking;
//  - previous_response_id from the bounded store: a continued conversation
//    grows the prompt; GET and DELETE /v1/responses/{id}; an id stored with
//    store=false, dropped from the full store, or asked of a server without
//    a store is a 404 (previous_response_not_found);
//  - bad fields are 400s in OpenAI's error shape.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { TEMPLATES, TINY_QWEN3, assertOpenAIError, client, post, sseEvents, startServer } from './helpers.mjs';

const ARGS = ['-c', '2048', '--chat-template-file', path.join(TEMPLATES, 'qwen3_thinking.jinja')];
const THINKING = 'root ::= [a-z]{3,8} " " [a-z]{3,8} "\\n</think>\\n\\nAnswer: " [a-z]{2,6}';
const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'] },
};

// Items without their ids (each response names its own) and what the SDK's
// stream helper adds to them (parsed, parsed_arguments).
const noIds = (output) =>
  JSON.parse(JSON.stringify(output, (k, v) => (['id', 'call_id', 'parsed', 'parsed_arguments'].includes(k) ? undefined : v)));

function checkEventOrder(events) {
  assert.equal(events[0].data.type, 'response.created');
  assert.equal(events[1].data.type, 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(events.at(-1).data.type));
  events.forEach((e, i) => {
    assert.equal(e.data.sequence_number, i);
    assert.equal(e.event, e.data.type);
  });
  const open = new Map();
  for (const { data } of events) {
    if (data.type === 'response.output_item.added') open.set(data.output_index, data.item.type);
    else if (data.type === 'response.output_item.done') {
      assert.equal(open.get(data.output_index), data.item.type);
      open.delete(data.output_index);
    } else if (data.type.endsWith('.delta')) {
      assert.ok(open.has(data.output_index), `${data.type} outside an open item`);
    }
  }
  assert.equal(open.size, 0);
}

describe('responses', () => {
  let server;
  let openai;
  before(async () => {
    // A 20 KB store: some 15 responses of this size fit, then the oldest go.
    server = await startServer([...ARGS, '--responses-store-mb', '0.02'], { model: TINY_QWEN3 });
    openai = client(server);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('reasoning and message items, streamed as not (the SDK stream helper)', async () => {
    const body = { model: 'tiny-qwen3', input: 'What is up?', instructions: 'Be brief.', temperature: 0, max_output_tokens: 200, grammar: THINKING };
    const r = await openai.responses.create(body);
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.match(r.output[0].content[0].text, /^[a-z]{3,8} [a-z]{3,8}$/);
    assert.equal(r.output[0].content[0].type, 'reasoning_text');
    assert.match(r.output_text, /^Answer: [a-z]{2,6}$/);
    assert.equal(r.instructions, 'Be brief.');
    assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);

    const types = [];
    let text = '';
    const stream = openai.responses.stream(body);
    stream.on('event', (e) => {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    assert.deepEqual(noIds(final.output), noIds(r.output));
    assert.equal(text, r.output_text);
    assert.ok(types.includes('response.reasoning_text.delta') && types.includes('response.output_text.done'), types.join(' '));
    checkEventOrder((await sseEvents(server, '/v1/responses', body)).events);
  });

  test('function tools: function_call items, then function_call_output', async () => {
    const body = { model: 'tiny-qwen3', input: 'Weather?', tools: [weather], tool_choice: 'required', parallel_tool_calls: false, reasoning_budget: 3, temperature: 0, max_output_tokens: 300 };
    const r = await openai.responses.create(body);
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'function_call']);
    const call = r.output[1];
    assert.equal(call.name, 'get_weather');
    assert.match(call.call_id, /^call_/);
    assert.equal(typeof JSON.parse(call.arguments).city, 'string');
    const final = await openai.responses.stream(body).finalResponse();
    assert.deepEqual(noIds(final.output), noIds(r.output));
    checkEventOrder((await sseEvents(server, '/v1/responses', body)).events);
    // The call and its output in the next request's input.
    const next = await openai.responses.create({
      model: 'tiny-qwen3', max_output_tokens: 4, tools: [weather], store: false,
      input: [
        { role: 'user', content: 'Weather?' },
        { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Call it.' }] },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 20}' },
      ],
    });
    assert.ok(next.usage.input_tokens > r.usage.input_tokens, `${next.usage.input_tokens} vs ${r.usage.input_tokens}`);
  });

  test('text.format json_schema after the thinking', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['n'], additionalProperties: false };
    const r = await openai.responses.create({
      model: 'tiny-qwen3', input: 'A digit', reasoning_budget: 2, temperature: 0, max_output_tokens: 100,
      text: { format: { type: 'json_schema', name: 'digit', schema, strict: true } },
    });
    assert.ok(Number.isInteger(JSON.parse(r.output_text).n), r.output_text);
    assert.equal(r.text.format.type, 'json_schema');
  });

  test('previous_response_id: stored, retrieved, deleted, and 404s for ids not kept', async () => {
    const first = await openai.responses.create({ model: 'tiny-qwen3', input: 'Hi', max_output_tokens: 6 });
    const second = await openai.responses.create({ model: 'tiny-qwen3', input: 'And?', max_output_tokens: 6, previous_response_id: first.id });
    assert.equal(second.previous_response_id, first.id);
    assert.ok(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens - 2,
      `${second.usage.input_tokens} after ${first.usage.input_tokens} + ${first.usage.output_tokens}`);
    const got = await openai.responses.retrieve(first.id);
    assert.equal(got.id, first.id);
    assert.deepEqual(got.output, first.output);
    const unstored = await openai.responses.create({ model: 'tiny-qwen3', input: 'Hi', max_output_tokens: 2, store: false });
    assert.equal(unstored.store, false);
    const missing = async (id) => {
      const r = await post(server, '/v1/responses', { input: 'x', max_output_tokens: 2, previous_response_id: id });
      assertOpenAIError(assert, r, 404);
      assert.equal(r.json.error.code, 'previous_response_not_found');
      assert.equal(r.json.error.param, 'previous_response_id');
    };
    await missing(unstored.id);
    await assert.rejects(openai.responses.create({ model: 'tiny-qwen3', input: 'x', previous_response_id: unstored.id }), (e) => e instanceof OpenAI.NotFoundError);
    // Fill the store: the least recently used response goes first.
    const del = await fetch(`${server.url}/v1/responses/${second.id}`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    await missing(second.id);
    for (let i = 0; i < 40; ++i) await openai.responses.create({ model: 'tiny-qwen3', input: `Turn ${i}`, max_output_tokens: 8 });
    await missing(first.id);
  });

  test('bad fields are 400s naming the field', async () => {
    const cases = [
      [{}, 'input'],
      [{ input: 5 }, 'input'],
      [{ input: [{ type: 'computer_call' }] }, 'input[0].type'],
      [{ input: [{ role: 'wizard', content: 'x' }] }, 'input[0].role'],
      [{ input: [{ type: 'function_call', name: 'f' }] }, 'input[0].call_id'],
      [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ input: 'x', tools: [{ type: 'function', parameters: {} }] }, 'tools[0].name'],
      [{ input: 'x', user: 5 }, 'user'],
      [{ input: 'x', tool_choice: { type: 'file_search' } }, 'tool_choice'],
      [{ input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
      [{ input: 'x', truncation: 'auto' }, 'truncation'],
      [{ input: 'x', reasoning: 'high' }, 'reasoning'],
      [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ input: 'x', background: true }, 'background'],
    ];
    for (const [body, param] of cases) {
      const r = await post(server, '/v1/responses', body);
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
    }
  });
});

test('a server without a store is stateless: previous_response_id is a 404 saying so', async () => {
  const server = await startServer(ARGS, { model: TINY_QWEN3 });
  try {
    const r0 = await client(server).responses.create({ model: 'tiny-qwen3', input: 'Hi', max_output_tokens: 2 });
    assert.equal(r0.store, false);
    const r = await post(server, '/v1/responses', { input: 'x', previous_response_id: r0.id });
    assertOpenAIError(assert, r, 404);
    assert.match(r.json.error.message, /--responses-store-mb/);
  } finally {
    assert.equal((await server.stop()).code, 0, server.log());
  }
});

// Tools over the official `openai` client and raw HTTP, with the real Qwen
// 2.5 chat template on stories260K: `tools` reach the template as
// transformers passes them (the rendered prompt lists them), assistant
// messages with tool_calls (arguments as JSON text, given to the template
// as objects) and tool messages are accepted, tool_choice "auto" leaves a
// reply without calls as content (streamed == not streamed, through the
// hold-back of text where a call may start), tool_choice "required" or a
// named function makes even this tiny model call an offered function with
// arguments valid for its schema (greedy and sampled, streamed and not),
// and bad tools or tool_choice values are 400s naming the field. (Each
// family's call format is parsed in tool_calls_test.cpp.)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TESTDATA, assertOpenAIError, client, post, startServer } from './helpers.mjs';

const QWEN = path.join(TESTDATA, 'templates', 'Qwen-Qwen2.5-7B-Instruct.jinja');

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'] },
  },
};
const search = {
  type: 'function',
  function: {
    name: 'search',
    parameters: {
      type: 'object',
      properties: { topic: { enum: ['cats', 'dogs', 'rain'] }, limit: { type: 'boolean' } },
      required: ['topic', 'limit'],
      additionalProperties: false,
    },
  },
};

// A call's arguments against its function's schema, checked by hand.
function validCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    return typeof args.city === 'string' && [...args.city].length <= 10 &&
      Object.keys(args).every((k) => k === 'city');
  }
  if (call.function.name === 'search') {
    return ['cats', 'dogs', 'rain'].includes(args.topic) && typeof args.limit === 'boolean' &&
      Object.keys(args).length === 2;
  }
  return false;
}

async function rendered(server, body) {
  const ids = await post(server, '/tokenize', body);
  assert.equal(ids.status, 200, ids.text);
  const text = await post(server, '/detokenize', { tokens: ids.json.tokens });
  assert.equal(text.status, 200, text.text);
  return text.json.prompt;
}

describe('tools', () => {
  let server;
  let openai;
  before(async () => {
    server = await startServer(['--chat-template-file', QWEN]);
    openai = client(server);
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('tools are given to the chat template', async () => {
    const messages = [{ role: 'user', content: 'Weather in Paris?' }];
    const withTools = await rendered(server, { messages, tools: [weather] });
    assert.match(withTools, /<tools>/);
    assert.ok(withTools.includes('"name": "get_weather"'), withTools);
    assert.ok(withTools.includes('"description": "Weather of a city"'), withTools);
    const without = await rendered(server, { messages });
    assert.doesNotMatch(without, /<tools>/);
  });

  test('assistant tool_calls and tool messages are accepted and rendered', async () => {
    const messages = [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 20}' },
    ];
    const text = await rendered(server, { messages, tools: [weather] });
    assert.ok(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'), text);
    assert.ok(text.includes('<tool_response>\n{"temp": 20}\n</tool_response>'), text);
    const r = await openai.chat.completions.create({ messages, tools: [weather], max_tokens: 8, temperature: 0 });
    assert.equal(r.choices[0].message.role, 'assistant');
  });

  test('tool_choice auto: a reply without calls is content, streamed as not', async () => {
    const body = { messages: [{ role: 'user', content: 'Tell me a story' }], tools: [weather], max_tokens: 24, temperature: 0 };
    for (const tool_choice of [undefined, 'auto', 'none']) {
      const r = await openai.chat.completions.create({ ...body, tool_choice });
      const c = r.choices[0];
      assert.equal(typeof c.message.content, 'string');
      assert.ok(c.message.content.length > 0);
      assert.equal(c.message.tool_calls, undefined);
      assert.ok(['stop', 'length'].includes(c.finish_reason));
      let text = '';
      let finish = null;
      for await (const chunk of await openai.chat.completions.create({ ...body, tool_choice, stream: true })) {
        for (const ch of chunk.choices) {
          text += ch.delta.content ?? '';
          assert.equal(ch.delta.tool_calls, undefined);
          if (ch.finish_reason) finish = ch.finish_reason;
        }
      }
      assert.equal(text, c.message.content);
      assert.equal(finish, c.finish_reason);
    }
  });

  test('tool_choice required or named: calls of offered functions with schema-valid arguments', async () => {
    const messages = [{ role: 'user', content: 'What should I do?' }];
    const tools = [weather, search];
    for (const [tool_choice, names] of [['required', ['get_weather', 'search']], [{ type: 'function', function: { name: 'search' } }, ['search']]]) {
      const greedy = await openai.chat.completions.create({
        messages, tools, tool_choice, parallel_tool_calls: false, temperature: 0, max_tokens: 200,
      });
      const c = greedy.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.content, null);
      assert.equal(c.message.tool_calls.length, 1);
      assert.ok(names.includes(c.message.tool_calls[0].function.name), c.message.tool_calls[0].function.name);
      assert.ok(validCall(c.message.tool_calls[0]), c.message.tool_calls[0].function.arguments);
      // Streamed: the same call, whole, in one tool_calls delta.
      const streamed = [];
      let finish = null;
      for await (const chunk of await openai.chat.completions.create({
        messages, tools, tool_choice, parallel_tool_calls: false, temperature: 0, max_tokens: 200, stream: true,
      })) {
        for (const ch of chunk.choices) {
          for (const call of ch.delta.tool_calls ?? []) streamed.push(call);
          assert.ok(!ch.delta.content, ch.delta.content);
          if (ch.finish_reason) finish = ch.finish_reason;
        }
      }
      assert.equal(finish, 'tool_calls');
      assert.equal(streamed.length, 1);
      assert.equal(streamed[0].index, 0);
      assert.deepEqual(streamed[0].function, c.message.tool_calls[0].function);
      // Sampled, several choices, parallel calls allowed.
      const sampled = await openai.chat.completions.create({
        messages, tools, tool_choice, temperature: 1.0, seed: 11, n: 3, max_tokens: 400,
      });
      for (const s of sampled.choices) {
        assert.ok(s.message.tool_calls.length >= 1);
        for (const call of s.message.tool_calls) {
          assert.ok(names.includes(call.function.name), call.function.name);
          assert.ok(validCall(call), call.function.arguments);
        }
      }
    }
  });

  test('bad tools and tool_choice values are 400s naming the field', async () => {
    const messages = [{ role: 'user', content: 'Hi' }];
    const cases = [
      [{ tools: weather }, 'tools'],
      [{ tools: [{ type: 'retrieval' }] }, 'tools[0]'],
      [{ tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools[0].function.name'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, 'tools[0].function.parameters'],
      [{ tools: [weather, weather] }, 'tools[1].function.name'],
      [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
      [{ tools: [weather], tool_choice: 'sometimes' }, 'tool_choice'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [{ tools: [weather], tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string', pattern: 'x' } } }], tool_choice: 'required' }, 'tools'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: 'x' }] }, 'messages[0].tool_calls'],
    ];
    for (const [extra, param] of cases) {
      const r = await post(server, '/v1/chat/completions', { messages, max_tokens: 2, ...extra });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
    }
  });
});

// Structured output over the official `openai` client on stories260K (CPU):
// a tiny model that knows nothing of JSON still gives schema-valid JSON under
// response_format json_schema, JSON under json_object, and text of a GBNF
// `grammar` — greedy and sampled, streamed and not (streamed == not); an
// independent checker here validates the schema. Bad schemas, grammars and
// response formats are 400s naming the field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertOpenAIError, client, post, startServer } from './helpers.mjs';

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    happy: { type: 'boolean' },
    color: { enum: ['red', 'green', 'blue'] },
    pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 },
  },
  required: ['name', 'happy', 'color', 'pets'],
  additionalProperties: false,
};

// The schema above, checked by hand.
function valid(v) {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  if (keys.length !== 4 || !['name', 'happy', 'color', 'pets'].every((k) => keys.includes(k))) return false;
  if (typeof v.name !== 'string' || [...v.name].length > 12) return false;
  if (typeof v.happy !== 'boolean') return false;
  if (!['red', 'green', 'blue'].includes(v.color)) return false;
  return Array.isArray(v.pets) && v.pets.length <= 3 && v.pets.every((p) => p === 'cat' || p === 'dog');
}

const jsonSchemaFormat = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };

async function streamedChat(openai, body) {
  let text = '';
  let finish = null;
  for await (const chunk of await openai.chat.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish };
}

describe('structured output', () => {
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

  test('json_schema: greedy and sampled replies are valid for the schema, streamed as not', async () => {
    const messages = [{ role: 'user', content: 'Tell me about a girl.' }];
    const greedy = await openai.chat.completions.create({ messages, response_format: jsonSchemaFormat, temperature: 0, max_tokens: 300 });
    assert.equal(greedy.choices[0].finish_reason, 'stop');
    const text = greedy.choices[0].message.content;
    assert.ok(valid(JSON.parse(text)), text);
    const s = await streamedChat(openai, { messages, response_format: jsonSchemaFormat, temperature: 0, max_tokens: 300 });
    assert.equal(s.text, text);
    assert.equal(s.finish, 'stop');
    const sampled = await openai.chat.completions.create({
      messages, response_format: jsonSchemaFormat, temperature: 1.0, seed: 3, max_tokens: 300, n: 4,
    });
    for (const c of sampled.choices) {
      assert.equal(c.finish_reason, 'stop', c.message.content);
      assert.ok(valid(JSON.parse(c.message.content)), c.message.content);
    }
  });

  test('json_object: the reply is a JSON object', async () => {
    const r = await openai.chat.completions.create({
      messages: [{ role: 'user', content: 'Hi' }], response_format: { type: 'json_object' }, temperature: 0, max_tokens: 400,
    });
    const text = r.choices[0].message.content;
    assert.ok(text.trimStart().startsWith('{'), text);
    if (r.choices[0].finish_reason === 'stop') {
      const v = JSON.parse(text);
      assert.equal(typeof v, 'object');
      assert.ok(!Array.isArray(v));
    }
  });

  test('a GBNF grammar holds completions and chat to its sentences', async () => {
    const grammar = 'root ::= ("yes" | "no") " because " [a-z ]{1,20} "."';
    for (const temperature of [0, 1.2]) {
      const c = await openai.completions.create({ prompt: 'Once upon a time', grammar, temperature, seed: 5, max_tokens: 60 });
      assert.match(c.choices[0].text, /^(yes|no) because [a-z ]{1,20}\.$/);
      assert.equal(c.choices[0].finish_reason, 'stop');
      const ch = await openai.chat.completions.create({ messages: [{ role: 'user', content: 'Well?' }], grammar, temperature, seed: 5, max_tokens: 60 });
      assert.match(ch.choices[0].message.content, /^(yes|no) because [a-z ]{1,20}\.$/);
    }
  });

  test('bad response formats, schemas and grammars are 400s naming the field', async () => {
    const messages = [{ role: 'user', content: 'Hi' }];
    const cases = [
      [{ response_format: { type: 'xml' } }, 'response_format.type'],
      [{ response_format: 'json' }, 'response_format'],
      [{ response_format: { type: 'json_schema' } }, 'response_format.json_schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }, 'response_format.json_schema.schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'int' } } } }, 'response_format.json_schema.schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/missing' } } } }, 'response_format.json_schema.schema'],
      [{ grammar: 'root ::= "a' }, 'grammar'],
      [{ grammar: 'root ::= undefined-rule' }, 'grammar'],
      [{ grammar: 42 }, 'grammar'],
      [{ grammar: 'root ::= "a"', response_format: { type: 'json_object' } }, 'response_format'],
    ];
    for (const [extra, param] of cases) {
      const r = await post(server, '/v1/chat/completions', { messages, max_tokens: 2, ...extra });
      assertOpenAIError(assert, r, 400);
      assert.equal(r.json.error.param, param, r.text);
    }
  });
});

// Each model family end to end through `rocmforge serve` with its chat
// template: the tiny random-weight models of the shared test data
// (arch/tiny-<arch>.gguf, which carry no chat template) served with
// --chat-template-file — the real Qwen 2.5 and Gemma 2 templates of the test
// data, and the Qwen (ChatML), Gemma 3, Phi-3 and GLM-4 style templates of
// tests/templates. For every family, over the OpenAI client and raw HTTP:
//  1. the prompt the server builds (POST /tokenize, the same code as a chat
//     completion) is the family's format, token for token: the ids of the
//     expected rendered text as `rocmforge tokenize --parse-special` gives
//     them, BOS once; usage.prompt_tokens agrees;
//  2. special-token text in a message stays text: the ids are those of the
//     text as if the vocabulary lacked the token, and /detokenize gives the
//     content back unchanged;
//  3. a forced end-of-generation token (logit_bias +100) ends the reply with
//     finish_reason "stop" and never shows in the content, also after some
//     text (min_tokens);
//  4. streamed and non-streamed replies agree.
// The tiny vocabularies are 512 SentencePiece-style tokens: <unk> <s> </s>,
// byte tokens and ▁tN pieces. Only tiny-phi3 also has its family's markers
// (<|endoftext|> <|assistant|> <|end|> <|user|>), so only there are the
// format's markers single control tokens and <|end|> an end-of-generation
// token; in the others the markers (<|im_start|>, <start_of_turn>, <|user|>
// ...) are plain text, which the tests assert, and the end-of-generation
// token is </s>. That each family's real markers end generation when a
// vocabulary has them is tested in tests/unit/tokenizer_vocab_test.cpp.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN, TESTDATA, client, post, startServer } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const OUR_TEMPLATES = path.resolve(here, '..', 'templates');
const REAL_TEMPLATES = path.join(TESTDATA, 'templates');

const BOS = 1; // <s> in every tiny vocabulary
const EOS = 2; // </s>
const PHI3 = { endoftext: 508, assistant: 509, end: 510, user: 511 };

// `rocmforge tokenize` of `text` (read from standard input): ids.
function tokenize(model, text, { bos = true, parse = true } = {}) {
  const args = ['tokenize', '-m', model, '--ids', ...(bos ? [] : ['--no-bos']), ...(parse ? ['--parse-special'] : []), '-'];
  const r = spawnSync(BIN, args, { input: text, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const line = r.stdout.trim();
  return line ? line.split(' ').map(Number) : [];
}

// The ids of a rendered prompt: special tokens parsed, BOS once (the server
// adds it unless the template wrote it).
function promptIds(model, rendered) {
  return rendered.startsWith('<s>') ? tokenize(model, rendered, { bos: false }) : tokenize(model, rendered);
}

const count = (ids, id) => ids.filter((x) => x === id).length;

// A system message, two user turns and an assistant turn.
const CONVERSATION = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi there' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Tell me a story.' },
];

// Per family: the template, the conversation it accepts, what it renders
// (`rendered`), a one-message chat quoting `c` (`quote`) and the ids that
// chat must get when `c` holds special-token text (`quoteIds`), the family's
// end-of-turn marker, and the tokens that end generation.
const FAMILIES = [
  {
    arch: 'qwen2',
    template: path.join(REAL_TEMPLATES, 'Qwen-Qwen2.5-7B-Instruct.jinja'), // the real Qwen 2.5 template
    marker: '<|im_end|>',
    rendered:
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n' +
      'Hello! How can I help?<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n',
    quote: (c) =>
      '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' +
      `<|im_start|>user\n${c}<|im_end|>\n<|im_start|>assistant\n`,
    // No vocabulary special in the text: one text fragment after BOS.
    quoteIds: (model, rendered) => tokenize(model, rendered, { parse: false }),
  },
  {
    arch: 'qwen3',
    template: path.join(OUR_TEMPLATES, 'chatml_tools.jinja'), // ChatML / Qwen style
    marker: '<|im_end|>',
    rendered:
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n' +
      'Hello! How can I help?<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n',
    quote: (c) =>
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
      `<|im_start|>user\n${c}<|im_end|>\n<|im_start|>assistant\n`,
    quoteIds: (model, rendered) => tokenize(model, rendered, { parse: false }),
  },
  {
    arch: 'gemma2',
    template: path.join(REAL_TEMPLATES, 'google-gemma-2-2b-it.jinja'), // the real Gemma 2 template
    marker: '<end_of_turn>',
    systemError: 'System role not supported', // Gemma 2's template raises on a system message
    conversation: CONVERSATION.slice(1),
    rendered:
      '<s><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n' +
      '<start_of_turn>user\nTell me a story.<end_of_turn>\n<start_of_turn>model\n',
    quote: (c) => `<s><start_of_turn>user\n${c}<end_of_turn>\n<start_of_turn>model\n`,
    // The template writes <s> (a special token); the rest is one text fragment.
    quoteIds: (model, rendered) => [BOS, ...tokenize(model, rendered.slice('<s>'.length), { bos: false, parse: false })],
  },
  {
    arch: 'gemma3',
    template: path.join(OUR_TEMPLATES, 'gemma3.jinja'), // folds the system message into the first user turn
    marker: '<end_of_turn>',
    rendered:
      '<s><start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n' +
      '<start_of_turn>user\nTell me a story.<end_of_turn>\n<start_of_turn>model\n',
    quote: (c) => `<s><start_of_turn>user\n${c}<end_of_turn>\n<start_of_turn>model\n`,
    quoteIds: (model, rendered) => [BOS, ...tokenize(model, rendered.slice('<s>'.length), { bos: false, parse: false })],
  },
  {
    arch: 'phi3',
    template: path.join(OUR_TEMPLATES, 'phi3.jinja'),
    marker: '<|end|>',
    markersAreTokens: true,
    specials: { '<|user|>': PHI3.user, '<|end|>': PHI3.end, '<|assistant|>': PHI3.assistant },
    // </s> is the file's EOS; <|end|> and <|endoftext|> end generation by
    // their text, as in llama.cpp. Turn openers do not.
    eog: [EOS, PHI3.end, PHI3.endoftext],
    notEog: [PHI3.user, PHI3.assistant],
    rendered:
      '<|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n' +
      '<|user|>\nTell me a story.<|end|>\n<|assistant|>\n',
    quote: (c) => `<|user|>\n${c}<|end|>\n<|assistant|>\n`,
    // The markers are control tokens that swallow the whitespace after them
    // (llama.cpp's Phi-3 rule); the content is one text fragment between them.
    quoteIds: (model, rendered, c) => [
      BOS, PHI3.user, ...tokenize(model, c, { bos: false, parse: false }), PHI3.end, PHI3.assistant,
    ],
  },
  {
    arch: 'glm4',
    template: path.join(OUR_TEMPLATES, 'glm4.jinja'),
    marker: '<|user|>', // GLM-4 has no end-of-turn marker: the model ends its turn by writing the next role
    rendered:
      '[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi there<|assistant|>\nHello! How can I help?<|user|>\n' +
      'Tell me a story.<|assistant|>',
    quote: (c) => `[gMASK]<sop><|user|>\n${c}<|assistant|>`,
    quoteIds: (model, rendered) => tokenize(model, rendered, { parse: false }),
  },
];

async function chatStream(openai, params) {
  let content = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } })) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      content += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { content, finish, usage, role };
}

for (const f of FAMILIES) {
  const model = path.join(TESTDATA, 'arch', `tiny-${f.arch}.gguf`);
  const conversation = f.conversation ?? CONVERSATION;
  const eog = f.eog ?? [EOS];

  describe(`tiny-${f.arch} with ${path.basename(f.template)}`, () => {
    let server;
    let openai;
    before(async () => {
      server = await startServer(['--chat-template-file', f.template, '--max-num-seqs', '2'], { model });
      openai = client(server);
    });
    after(async () => {
      const { code } = await server.stop();
      assert.equal(code, 0, server.log());
    });

    test('the prompt is the family format, token for token', async () => {
      const r = await post(server, '/tokenize', { messages: conversation, return_token_strs: true });
      assert.equal(r.status, 200, r.text);
      const expected = promptIds(model, f.rendered);
      assert.deepEqual(r.json.tokens, expected);
      assert.equal(r.json.count, expected.length);
      assert.equal(r.json.max_model_len, 512);
      assert.equal(r.json.token_strs.length, expected.length);
      assert.equal(r.json.tokens[0], BOS);
      assert.equal(count(r.json.tokens, BOS), 1, 'BOS once');
      for (const [text, id] of Object.entries(f.specials ?? {})) {
        assert.deepEqual(tokenize(model, text, { bos: false }), [id], `${text} is one token`);
        assert.equal(count(r.json.tokens, id), f.rendered.split(text).length - 1, `${text} once per occurrence`);
        assert.ok(r.json.token_strs.includes(text));
      }
      // Where the tiny vocabulary lacks the family's marker it is text (several tokens).
      assert.equal(tokenize(model, f.marker, { bos: false }).length === 1, f.markersAreTokens === true);
      // A chat completion is given that prompt.
      const reply = await openai.chat.completions.create({ messages: conversation, max_tokens: 1, temperature: 0 });
      assert.equal(reply.usage.prompt_tokens, expected.length);
    });

    test('special-token text in a message stays text', async () => {
      const content = `Quote: ${f.marker} and </s> end`;
      const r = await post(server, '/tokenize', { messages: [{ role: 'user', content }] });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.tokens, f.quoteIds(model, f.quote(content), content));
      assert.equal(count(r.json.tokens, EOS), 0, 'the content\'s </s> is not EOS');
      if (f.markersAreTokens) assert.equal(count(r.json.tokens, PHI3.end), 1, 'only the template\'s <|end|>');
      const back = await post(server, '/detokenize', { tokens: r.json.tokens });
      assert.equal(back.status, 200, back.text);
      // These vocabularies lack a "▁" piece: a space is encoded as the byte
      // tokens of "▁" and decodes as "▁" (as in llama.cpp).
      assert.ok(back.json.prompt.replaceAll('\u2581', ' ').includes(content), back.json.prompt);
      // The same holds for a chat completion's prompt.
      const reply = await openai.chat.completions.create({ messages: [{ role: 'user', content }], max_tokens: 1, temperature: 0 });
      assert.equal(reply.usage.prompt_tokens, r.json.tokens.length);
    });

    test('a forced end-of-generation token ends the reply and is not in the content', async () => {
      for (const id of eog) {
        const params = { messages: conversation, temperature: 0, max_tokens: 8, logit_bias: { [id]: 100 } };
        const r = await openai.chat.completions.create(params);
        assert.equal(r.choices[0].finish_reason, 'stop', `token ${id}`);
        assert.equal(r.choices[0].message.content, '');
        assert.equal(r.usage.completion_tokens, 1);
        const s = await chatStream(openai, params);
        assert.equal(s.finish, 'stop');
        assert.equal(s.content, '');
        assert.equal(s.usage.completion_tokens, 1);
        // After two other tokens (min_tokens bans it until then), over raw HTTP.
        const later = await post(server, '/v1/chat/completions', { ...params, min_tokens: 2 });
        assert.equal(later.status, 200, later.text);
        assert.equal(later.json.choices[0].finish_reason, 'stop');
        assert.equal(later.json.usage.completion_tokens, 3);
        assert.ok(!later.json.choices[0].message.content.includes(f.marker));
        assert.ok(!later.json.choices[0].message.content.includes('</s>'));
      }
      // Tokens that open a turn do not end generation; as control tokens they show no text.
      for (const id of f.notEog ?? []) {
        const r = await openai.chat.completions.create({ messages: conversation, temperature: 0, max_tokens: 3, logit_bias: { [id]: 100 } });
        assert.equal(r.choices[0].finish_reason, 'length', `token ${id}`);
        assert.equal(r.usage.completion_tokens, 3);
        assert.equal(r.choices[0].message.content, '');
      }
    });

    test('streamed and non-streamed replies agree', async () => {
      const params = { messages: conversation, temperature: 0, max_tokens: 6 };
      const r = await openai.chat.completions.create(params);
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
      assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
      assert.equal(r.usage.prompt_tokens, promptIds(model, f.rendered).length);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
      const s = await chatStream(openai, params);
      assert.equal(s.role, 'assistant');
      assert.equal(s.content, r.choices[0].message.content);
      assert.equal(s.finish, r.choices[0].finish_reason);
      assert.equal(s.usage.prompt_tokens, r.usage.prompt_tokens);
      assert.equal(s.usage.completion_tokens, r.usage.completion_tokens);
    });

    if (f.systemError) {
      test('a system message is refused with the template\'s message', async () => {
        await assert.rejects(
          openai.chat.completions.create({ messages: CONVERSATION, max_tokens: 2 }),
          (e) => e.status === 400 && e.message.includes(f.systemError),
        );
        for (const body of [{ messages: CONVERSATION, stream: true }, { messages: CONVERSATION }]) {
          const r = await post(server, '/v1/chat/completions', body);
          assert.equal(r.status, 400, r.text);
          assert.ok(r.json.error.message.includes(f.systemError), r.text);
          assert.equal(r.json.error.param, 'messages');
        }
        const t = await post(server, '/tokenize', { messages: CONVERSATION });
        assert.equal(t.status, 400, t.text);
        assert.ok(t.json.error.message.includes(f.systemError), t.text);
      });
    }
  });
}

describe('tiny-phi3 with --allow-special-in-content', () => {
  const model = path.join(TESTDATA, 'arch', 'tiny-phi3.gguf');
  let server;
  before(async () => {
    server = await startServer(
      ['--chat-template-file', path.join(OUR_TEMPLATES, 'phi3.jinja'), '--allow-special-in-content'], { model });
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  test('special-token text in a message is parsed as the special tokens', async () => {
    const content = 'Quote: <|end|> and </s> end';
    const r = await post(server, '/tokenize', { messages: [{ role: 'user', content }] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.tokens, tokenize(model, `<|user|>\n${content}<|end|>\n<|assistant|>\n`));
    assert.equal(count(r.json.tokens, PHI3.end), 2);
    assert.equal(count(r.json.tokens, EOS), 1);
  });
});

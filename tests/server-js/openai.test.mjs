// llama-server spoken to by the official OpenAI client for JavaScript (npm `openai`), as clients
// use it: new OpenAI({ baseURL: server + '/v1', apiKey }). The answers are checked against the
// shapes of OpenAI's API reference: models, chat and text completions (whole and streamed, the
// deltas adding up to the whole answer at temperature 0, usage), stop strings, seeds, logprobs,
// response_format (json_schema validated with ajv, json_object), logit_bias, embeddings (base64, as
// the client asks by default, and float), and the errors the client turns into its classes
// (AuthenticationError, BadRequestError).
//
// Model: stories260K.gguf (a tiny llama that writes children's stories; no chat template of its
// own, so the server's fallback, chatml). Two servers: one generating (-np 4, --temp 0, an API
// key), one with --embeddings --pooling mean. Run by ctest (server-js-openai) or by hand:
//   node tests/server-js/openai.test.mjs     (LLAMA_SERVER, LLAMA_SHARED as in server.mjs)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { modelPath, requireOrSkip, startServer } from './server.mjs';

const MODEL = 'stories260K.gguf';
const N_EMBD = 64; // stories260K's embedding width
const KEY = 'sk-test';

await requireOrSkip([MODEL], ['openai', 'ajv']);
const { default: OpenAI, APIError, AuthenticationError, BadRequestError } = await import('openai');
const { default: Ajv } = await import('ajv');

// ---- helpers -------------------------------------------------------------------------------

// Resolves to the error p rejects with, checked to be an instance of cls; a fulfilled p fails
// with what the server answered.
async function expectError(p, cls, what) {
    let answer;
    try {
        answer = await p;
    } catch (e) {
        assert.ok(e instanceof cls, `${what}: expected ${cls.name}, got ${e?.constructor?.name} (status ${e?.status}): ${e?.message}`);
        return e;
    }
    assert.fail(`${what}: expected ${cls.name}, but the server answered: ${JSON.stringify(answer).slice(0, 600)}`);
}

// Reads a stream of the client: the chunks, in order.
async function collect(stream) {
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
}

// The text of a streamed chat answer and its checks: role first, finish_reason only on the last
// chunk with a choice.
function chatStreamText(chunks) {
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    assert.ok(withChoice.length > 0, 'no chunk carries a choice');
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(withChoice[0].choices[0].delta.role, 'assistant', 'the first delta names the role');
    withChoice.slice(0, -1).forEach((c, i) => assert.equal(c.choices[0].finish_reason ?? null, null, `chunk ${i} has a finish_reason before the end`));
    return {
        text: withChoice.map((c) => c.choices[0].delta.content ?? '').join(''),
        finish: withChoice.at(-1).choices[0].finish_reason,
    };
}

function completionStreamText(chunks) {
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    assert.ok(withChoice.length > 0, 'no chunk carries a choice');
    for (const c of chunks) assert.equal(c.object, 'text_completion');
    withChoice.slice(0, -1).forEach((c, i) => assert.equal(c.choices[0].finish_reason ?? null, null, `chunk ${i} has a finish_reason before the end`));
    return { text: withChoice.map((c) => c.choices[0].text).join(''), finish: withChoice.at(-1).choices[0].finish_reason };
}

function checkUsage(u, maxTokens) {
    assert.ok(u, 'usage is missing');
    assert.ok(Number.isInteger(u.prompt_tokens) && u.prompt_tokens > 0, `prompt_tokens ${u.prompt_tokens}`);
    assert.ok(Number.isInteger(u.completion_tokens) && u.completion_tokens > 0, `completion_tokens ${u.completion_tokens}`);
    assert.ok(u.completion_tokens <= maxTokens, `completion_tokens ${u.completion_tokens} > max_tokens ${maxTokens}`);
    assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens, 'total_tokens = prompt_tokens + completion_tokens');
}

const l2 = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

// ---- the generation server -----------------------------------------------------------------

describe('generation server (-np 4, --temp 0, --api-key)', () => {
    let server, client, modelId;
    const story = [{ role: 'user', content: 'Tell me a story about a little cat.' }];
    const prompt = 'Once upon a time';

    // POST /tokenize (llama.cpp's): the ids of text, without BOS.
    const tokenize = async (content) => {
        const r = await fetch(`${server.url}/tokenize`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ content }),
        });
        assert.equal(r.status, 200, `/tokenize: ${r.status} ${await r.clone().text()}`);
        return (await r.json()).tokens;
    };
    const detokenize = async (tokens) => {
        const r = await fetch(`${server.url}/detokenize`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ tokens }),
        });
        assert.equal(r.status, 200, `/detokenize: ${r.status} ${await r.clone().text()}`);
        return (await r.json()).content;
    };

    before(async () => {
        server = await startServer(['-m', modelPath(MODEL), '-np', '4', '-c', '2048', '--temp', '0', '--api-key', KEY]);
        client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 30000 });
    });
    after(async () => {
        await server?.stop();
    });

    test('1. models.list with the right key; AuthenticationError (401) with a wrong key or none', async () => {
        const models = [];
        for await (const m of client.models.list()) models.push(m);
        assert.ok(models.length >= 1, 'no model listed');
        assert.equal(models[0].object, 'model');
        assert.match(models[0].id, /stories260K/);
        modelId = models[0].id;

        const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
        const e1 = await expectError(wrong.models.list(), AuthenticationError, 'models.list with a wrong key');
        assert.equal(e1.status, 401);
        const e2 = await expectError(
            wrong.chat.completions.create({ model: 'x', messages: story, max_tokens: 4 }),
            AuthenticationError,
            'chat with a wrong key',
        );
        assert.equal(e2.status, 401);

        // No key at all: the client's Authorization header removed (null), checked on the wire.
        const sent = [];
        const none = new OpenAI({
            baseURL: `${server.url}/v1`,
            apiKey: 'unused',
            maxRetries: 0,
            defaultHeaders: { Authorization: null },
            fetch: (url, init) => {
                sent.push(new Headers(init.headers).get('authorization'));
                return fetch(url, init);
            },
        });
        const e3 = await expectError(none.models.list(), AuthenticationError, 'models.list without a key');
        assert.equal(e3.status, 401);
        assert.deepEqual(sent, [null], 'the request went without an Authorization header');
    });

    test('2. chat.completions.create, whole: an assistant message, finish_reason, usage', async () => {
        const max_tokens = 48;
        const r = await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens });
        assert.equal(r.object, 'chat.completion');
        assert.equal(typeof r.id, 'string');
        assert.equal(r.choices.length, 1);
        const c = r.choices[0];
        assert.equal(c.index, 0);
        assert.equal(c.message.role, 'assistant');
        assert.equal(typeof c.message.content, 'string');
        assert.ok(c.message.content.length > 0, 'empty content');
        assert.ok(['stop', 'length'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
        checkUsage(r.usage, max_tokens);
        if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, max_tokens);
    });

    test('3. chat streamed: the deltas add up to the whole answer; include_usage brings usage', async () => {
        const req = { model: modelId ?? MODEL, messages: story, max_tokens: 40 };
        const whole = await client.chat.completions.create(req);
        const s1 = chatStreamText(await collect(await client.chat.completions.create({ ...req, stream: true })));
        assert.equal(s1.text, whole.choices[0].message.content, 'streamed text != whole text (temperature 0)');
        assert.equal(s1.finish, whole.choices[0].finish_reason);

        const chunks = await collect(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
        const s2 = chatStreamText(chunks);
        assert.equal(s2.text, whole.choices[0].message.content);
        const withUsage = chunks.filter((c) => c.usage);
        assert.ok(withUsage.length >= 1, 'no chunk carries usage');
        assert.deepEqual(withUsage.at(-1).usage, whole.usage, 'streamed usage != whole usage');
    });

    test('3b. stream_options.include_usage: usage on an extra last chunk with choices [], as OpenAI documents', async () => {
        const req = { model: modelId ?? MODEL, messages: story, max_tokens: 8, stream: true };
        const withOpt = await collect(await client.chat.completions.create({ ...req, stream_options: { include_usage: true } }));
        const last = withOpt.at(-1);
        assert.deepEqual(last.choices, [], `the last chunk with include_usage should have choices [] and usage; it was ${JSON.stringify(last)}`);
        assert.ok(last.usage, 'the last chunk carries no usage');
        withOpt.slice(0, -1).forEach((c) => assert.equal(c.usage ?? null, null, `a chunk before the last carries usage: ${JSON.stringify(c)}`));
        const cw = await collect(await client.completions.create({ model: modelId ?? MODEL, prompt, max_tokens: 8, stream: true, stream_options: { include_usage: true } }));
        assert.deepEqual(cw.at(-1).choices, [], `completions: the last chunk with include_usage: ${JSON.stringify(cw.at(-1))}`);
        assert.ok(cw.at(-1).usage, 'completions: the last chunk carries no usage');
    });

    // OpenAI's chunk object: "usage: an optional field that will only be present when you set
    // stream_options: {include_usage: true}".
    test('3c. streamed without stream_options.include_usage: no chunk carries usage, as OpenAI documents', async () => {
        const req = { model: modelId ?? MODEL, messages: story, max_tokens: 8, stream: true };
        const without = await collect(await client.chat.completions.create(req));
        without.forEach((c) => assert.equal(c.usage ?? null, null, `without include_usage a chunk carries usage: ${JSON.stringify(c)}`));
    });

    test('4. completions.create (legacy), whole and streamed, same text', async () => {
        const max_tokens = 40;
        const req = { model: modelId ?? MODEL, prompt, max_tokens };
        const whole = await client.completions.create(req);
        assert.equal(whole.object, 'text_completion');
        assert.equal(whole.choices.length, 1);
        assert.ok(whole.choices[0].text.length > 0, 'empty text');
        assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
        checkUsage(whole.usage, max_tokens);

        const s = completionStreamText(await collect(await client.completions.create({ ...req, stream: true })));
        assert.equal(s.text, whole.choices[0].text, 'streamed text != whole text (temperature 0)');
        assert.equal(s.finish, whole.choices[0].finish_reason);
        const chunks = await collect(await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
        assert.equal(completionStreamText(chunks).text, whole.choices[0].text);
        const withUsage = chunks.filter((c) => c.usage);
        assert.ok(withUsage.length >= 1, 'no chunk carries usage');
        assert.deepEqual(withUsage.at(-1).usage, whole.usage);
    });

    test('5. stop: a stop string of the greedy text cuts it before the string, finish_reason stop', async () => {
        const req = { model: modelId ?? MODEL, messages: story, max_tokens: 64 };
        const full = (await client.chat.completions.create(req)).choices[0].message.content;
        // A word of the second half, with its leading space: its first occurrence is where it cuts.
        const words = full.match(/ [A-Za-z]{3,}/g) ?? [];
        assert.ok(words.length >= 2, `too few words to choose a stop string from: ${JSON.stringify(full)}`);
        const stop = words[Math.floor(words.length / 2)];
        const at = full.indexOf(stop);
        assert.ok(at > 0, `${JSON.stringify(stop)} not in ${JSON.stringify(full)}`);

        const r = await client.chat.completions.create({ ...req, stop: [stop, 'zzzqqq'] });
        assert.equal(r.choices[0].message.content, full.slice(0, at), `stop ${JSON.stringify(stop)} in ${JSON.stringify(full)}`);
        assert.equal(r.choices[0].finish_reason, 'stop');
        const s = chatStreamText(await collect(await client.chat.completions.create({ ...req, stop, stream: true })));
        assert.equal(s.text, full.slice(0, at), 'streamed, with the stop string');
        assert.equal(s.finish, 'stop');

        const cfull = (await client.completions.create({ model: modelId ?? MODEL, prompt, max_tokens: 48 })).choices[0].text;
        const cat = cfull.indexOf(' the');
        if (cat > 0) {
            const c = await client.completions.create({ model: modelId ?? MODEL, prompt, max_tokens: 48, stop: ' the' });
            assert.equal(c.choices[0].text, cfull.slice(0, cat));
            assert.equal(c.choices[0].finish_reason, 'stop');
        }
    });

    test('6. seed: temperature 1, the same seed twice gives the same text; other seeds another', async () => {
        const req = { model: modelId ?? MODEL, prompt, max_tokens: 32, temperature: 1.0 };
        const a = (await client.completions.create({ ...req, seed: 42 })).choices[0].text;
        const b = (await client.completions.create({ ...req, seed: 42 })).choices[0].text;
        assert.equal(b, a, 'seed 42 twice');
        const others = [];
        for (const seed of [1, 2, 3]) others.push((await client.completions.create({ ...req, seed })).choices[0].text);
        assert.ok(others.some((t) => t !== a), `seeds 1, 2, 3 all gave seed 42's text: ${JSON.stringify(a)}`);
        const chatA = (await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 24, temperature: 1.0, seed: 7 })).choices[0].message.content;
        const chatB = (await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 24, temperature: 1.0, seed: 7 })).choices[0].message.content;
        assert.equal(chatB, chatA, 'chat, seed 7 twice');
    });

    test('7. logprobs: chat (logprobs, top_logprobs 3) and legacy completions (logprobs 2)', async () => {
        const r = await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 16, logprobs: true, top_logprobs: 3 });
        const content = r.choices[0].message.content;
        const lp = r.choices[0].logprobs;
        assert.ok(lp && Array.isArray(lp.content), `choices[0].logprobs.content is not an array: ${JSON.stringify(r.choices[0])}`);
        assert.equal(lp.content.length, r.usage.completion_tokens, 'one entry per generated token');
        for (const [i, e] of lp.content.entries()) {
            const where = `logprobs.content[${i}] = ${JSON.stringify(e)}`;
            assert.equal(typeof e.token, 'string', where);
            assert.ok(typeof e.logprob === 'number' && e.logprob <= 0, where);
            assert.ok(Array.isArray(e.bytes) && e.bytes.every((x) => Number.isInteger(x) && x >= 0 && x < 256), where);
            assert.ok(Array.isArray(e.top_logprobs) && e.top_logprobs.length === 3, `${where}: 3 top_logprobs`);
            for (const t of e.top_logprobs) {
                assert.ok(typeof t.token === 'string' && typeof t.logprob === 'number' && t.logprob <= 0 && Array.isArray(t.bytes), where);
            }
            for (let k = 1; k < 3; k++) assert.ok(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob, `${where}: sorted descending`);
            // Greedy: the chosen token is the most likely one (ties aside).
            assert.ok(e.top_logprobs[0].logprob >= e.logprob - 1e-6, where);
            assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4, `${where}: temperature 0 chose a token below the top`);
            assert.ok(e.top_logprobs.some((t) => t.token === e.token), `${where}: the chosen token is among the top`);
        }
        assert.equal(lp.content.map((e) => e.token).join(''), content, 'the tokens add up to the content');
        assert.equal(Buffer.from(lp.content.flatMap((e) => e.bytes)).toString('utf8'), content, 'the bytes add up to the content');
        // Streamed: each chunk's logprobs.content covers its delta; together, the whole answer's tokens.
        const chunks = await collect(
            await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 16, logprobs: true, top_logprobs: 3, stream: true }),
        );
        const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
        assert.deepEqual(streamed.map((e) => e.token), lp.content.map((e) => e.token), 'streamed logprobs tokens != whole');
        streamed.forEach((e) => assert.equal(e.top_logprobs.length, 3, `streamed entry ${JSON.stringify(e)}`));
        for (const c of chunks) {
            const ch = c.choices[0];
            if (ch?.delta?.content) {
                assert.equal((ch.logprobs?.content ?? []).map((e) => e.token).join(''), ch.delta.content, `chunk ${JSON.stringify(c)}: logprobs for its delta`);
            }
        }

        const c = await client.completions.create({ model: modelId ?? MODEL, prompt, max_tokens: 12, logprobs: 2 });
        const text = c.choices[0].text;
        const l = c.choices[0].logprobs;
        assert.ok(l, `choices[0].logprobs is ${JSON.stringify(l)}`);
        for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
            assert.ok(Array.isArray(l[k]), `logprobs.${k} is not an array: ${JSON.stringify(l)}`);
            assert.equal(l[k].length, c.usage.completion_tokens, `logprobs.${k}: one per generated token`);
        }
        assert.equal(l.tokens.join(''), text, 'the tokens add up to the text');
        l.token_logprobs.forEach((x) => assert.ok(typeof x === 'number' && x <= 0, `token_logprobs ${JSON.stringify(l.token_logprobs)}`));
        l.top_logprobs.forEach((d, i) => {
            const n = Object.keys(d).length;
            assert.ok(n >= 2 && n <= 3, `top_logprobs[${i}] ${JSON.stringify(d)}: the 2 most likely (and the chosen token, if not among them)`);
            assert.ok(l.tokens[i] in d, `top_logprobs[${i}] ${JSON.stringify(d)} lacks the greedy token ${JSON.stringify(l.tokens[i])}`);
            Object.values(d).forEach((x) => assert.ok(x <= 0));
        });
        assert.ok(l.text_offset[0] === 0 || l.text_offset[0] === prompt.length, `text_offset[0] ${l.text_offset[0]}`);
        for (let i = 1; i < l.tokens.length; i++) {
            assert.equal(l.text_offset[i] - l.text_offset[i - 1], l.tokens[i - 1].length, `text_offset ${JSON.stringify(l.text_offset)}`);
        }
    });

    test('8. response_format: json_schema (strict, validated with ajv), json_object; refused schemas are 400', async () => {
        const schema = {
            type: 'object',
            properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' }, happy: { type: 'boolean' } },
            required: ['name', 'age', 'happy'],
            additionalProperties: false,
        };
        const ask = [{ role: 'user', content: 'Describe a person as JSON.' }];
        const r = await client.chat.completions.create({
            model: modelId ?? MODEL,
            messages: ask,
            max_tokens: 200,
            response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
        });
        const text = r.choices[0].message.content;
        assert.equal(r.choices[0].finish_reason, 'stop', `the JSON did not end: ${JSON.stringify(text)}`);
        let obj;
        assert.doesNotThrow(() => (obj = JSON.parse(text)), `not JSON: ${JSON.stringify(text)}`);
        const validate = new Ajv({ strict: true }).compile(schema);
        assert.ok(validate(obj), `${text} does not validate: ${JSON.stringify(validate.errors)}`);

        // JSON mode. Left to itself, stories260K writes keys and strings on and on (greedy, no end
        // in 400 tokens); a bias for '}' ends the object where the grammar allows one. Without the
        // grammar the same bias gives '}}}}...', not JSON.
        const closeIds = await tokenize('}');
        const close = closeIds.at(-1);
        assert.equal(await detokenize([close]), '}', `the token of '}' (tokenize: ${JSON.stringify(closeIds)})`);
        const j = await client.chat.completions.create({
            model: modelId ?? MODEL,
            messages: ask,
            max_tokens: 400,
            response_format: { type: 'json_object' },
            logit_bias: { [String(close)]: 100 },
        });
        const jt = j.choices[0].message.content;
        assert.equal(j.choices[0].finish_reason, 'stop', `json_object: the JSON did not end: ${JSON.stringify(jt)}`);
        let jo;
        assert.doesNotThrow(() => (jo = JSON.parse(jt)), `json_object: not JSON: ${JSON.stringify(jt)}`);
        assert.ok(jo !== null && typeof jo === 'object' && !Array.isArray(jo), `json_object: not an object: ${JSON.stringify(jt)}`);

        // A schema keyword the server does not support is refused, never ignored: pattern either
        // gives 400 or is obeyed.
        const pschema = { type: 'object', properties: { code: { type: 'string', pattern: '^[0-9]{3}-[0-9]{2}$' } }, required: ['code'], additionalProperties: false };
        let pr;
        try {
            pr = await client.chat.completions.create({
                model: modelId ?? MODEL,
                messages: ask,
                max_tokens: 100,
                response_format: { type: 'json_schema', json_schema: { name: 'code', strict: true, schema: pschema } },
            });
        } catch (e) {
            assert.ok(e instanceof BadRequestError, `pattern: expected BadRequestError or an obeyed pattern, got ${e.constructor.name} ${e.status}: ${e.message}`);
        }
        if (pr) {
            const pt = pr.choices[0].message.content;
            let po;
            assert.doesNotThrow(() => (po = JSON.parse(pt)), `pattern accepted but the answer is not JSON: ${JSON.stringify(pt)}`);
            const pv = new Ajv().compile(pschema);
            assert.ok(pv(po), `pattern accepted but not obeyed: ${pt} (${JSON.stringify(pv.errors)})`);
        }

        // Malformed: an unknown type, a json_schema without its schema object, a broken grammar.
        const bad = { type: 'object', properties: { a: { type: 'no-such-type' } } };
        await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: ask, max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: bad } } }),
            BadRequestError,
            'json_schema with type no-such-type',
        );
        await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: ask, max_tokens: 8, response_format: { type: 'json_schema' } }),
            BadRequestError,
            'response_format json_schema without json_schema',
        );
        await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: ask, max_tokens: 8, response_format: { type: 'no-such-format' } }),
            BadRequestError,
            'response_format type no-such-format',
        );
        await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: ask, max_tokens: 8, grammar: 'root ::= ("a" ' }),
            BadRequestError,
            'a malformed grammar (llama.cpp field)',
        );
    });

    test('10. bad requests: max_tokens 1e9, messages [], an unknown parameter → BadRequestError (400)', async () => {
        const e1 = await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 1000000000 }),
            BadRequestError,
            'max_tokens 1000000000',
        );
        assert.equal(e1.status, 400);
        const e2 = await expectError(client.chat.completions.create({ model: modelId ?? MODEL, messages: [], max_tokens: 4 }), BadRequestError, 'messages []');
        assert.equal(e2.status, 400);
        const e3 = await expectError(
            client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 4, no_such_parameter: 1 }),
            BadRequestError,
            'an unknown parameter',
        );
        assert.equal(e3.status, 400);
        assert.match(e3.message, /no_such_parameter/);
        await expectError(
            client.completions.create({ model: modelId ?? MODEL, prompt, max_tokens: 1000000000 }),
            BadRequestError,
            'completions, max_tokens 1000000000',
        );
        // The server still answers.
        const ok = await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 2 });
        assert.equal(ok.choices[0].message.role, 'assistant');
    });

    test('11. logit_bias -100 on the greedy first token changes the first token', async () => {
        const req = { model: modelId ?? MODEL, prompt, max_tokens: 8 };
        const text = (await client.completions.create(req)).choices[0].text;
        // The first generated token: the token after the prompt's in the tokens of prompt + text.
        const p = await tokenize(prompt);
        const q = await tokenize(prompt + text);
        assert.deepEqual(q.slice(0, p.length), p, `the tokens of ${JSON.stringify(prompt + text)} do not start with the prompt's`);
        const first = q[p.length];
        assert.ok(Number.isInteger(first), 'no first token');

        const r = await client.completions.create({ ...req, logit_bias: { [String(first)]: -100 } });
        const biased = r.choices[0].text;
        assert.notEqual(biased, text, `logit_bias {${first}: -100} left the text as it was: ${JSON.stringify(text)}`);
        const q2 = await tokenize(prompt + biased);
        assert.notEqual(q2[p.length], first, `the answer still starts with token ${first}: ${JSON.stringify(biased)}`);

        const c = await client.chat.completions.create({ model: modelId ?? MODEL, messages: story, max_tokens: 8, logit_bias: { [String(first)]: -100 } });
        assert.equal(c.choices[0].message.role, 'assistant', 'chat takes logit_bias too');
    });

    test('9b. embeddings on a server without --embeddings: a 4xx error, and the server lives on', async () => {
        const e = await expectError(client.embeddings.create({ model: modelId ?? MODEL, input: 'hello' }), APIError, 'embeddings without --embeddings');
        assert.ok(e.status >= 400 && e.status < 500, `status ${e.status}: ${e.message}`);
        const e2 = await expectError(client.embeddings.create({ model: modelId ?? MODEL, input: 'hello', encoding_format: 'float' }), APIError, 'float');
        assert.ok(e2.status >= 400 && e2.status < 500, `status ${e2.status}: ${e2.message}`);
        const models = await client.models.list();
        assert.ok(models.data.length >= 1);
    });
});

// ---- the embeddings server -----------------------------------------------------------------

describe('embeddings server (--embeddings --pooling mean)', () => {
    let server, client;
    before(async () => {
        server = await startServer(['-m', modelPath(MODEL), '--embeddings', '--pooling', 'mean', '-np', '2', '-c', '1024']);
        client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 30000 });
    });
    after(async () => {
        await server?.stop();
    });

    const checkList = (r, n) => {
        assert.equal(r.object, 'list');
        assert.equal(r.data.length, n, 'one embedding per input');
        r.data.forEach((d, i) => {
            assert.equal(d.object, 'embedding');
            assert.equal(d.index, i, 'in order, with index');
            assert.equal(d.embedding.length, N_EMBD, `embedding ${i} has ${d.embedding.length} numbers, n_embd is ${N_EMBD}`);
            assert.ok(d.embedding.every(Number.isFinite), `embedding ${i} has a non-finite number`);
            assert.ok(Math.abs(l2(d.embedding) - 1) < 1e-3, `embedding ${i} has norm ${l2(d.embedding)}, not 1`);
        });
        assert.ok(r.usage && r.usage.prompt_tokens > 0, `usage ${JSON.stringify(r.usage)}`);
        assert.equal(r.usage.total_tokens, r.usage.prompt_tokens, `usage ${JSON.stringify(r.usage)}`);
    };

    test('9. embeddings.create: a string, an array of 3; base64 (the client default) and float agree', async () => {
        const texts = ['The cat sat on the mat.', 'Lily went to the park with her mom.', 'The cat sat on the mat.'];
        const one = await client.embeddings.create({ model: MODEL, input: texts[0] }); // base64, decoded by the client
        checkList(one, 1);
        const three = await client.embeddings.create({ model: MODEL, input: texts });
        checkList(three, 3);
        const floats = await client.embeddings.create({ model: MODEL, input: texts, encoding_format: 'float' });
        checkList(floats, 3);
        floats.data.forEach((d) => assert.ok(Array.isArray(d.embedding) && typeof d.embedding[0] === 'number', 'float: an array of numbers'));

        const close = (a, b, what) => a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < 1e-5, `${what}: [${i}] ${x} vs ${b[i]}`));
        close(three.data[0].embedding, three.data[2].embedding, 'the same text twice in one request');
        close(one.data[0].embedding, three.data[0].embedding, 'the same text in two requests');
        for (let i = 0; i < 3; i++) close(three.data[i].embedding, floats.data[i].embedding, `base64 vs float, input ${i}`);
        const diff = three.data[0].embedding.reduce((s, x, i) => s + Math.abs(x - three.data[1].embedding[i]), 0);
        assert.ok(diff > 1e-3, 'two different texts gave the same vector');
        assert.ok(three.usage.prompt_tokens > one.usage.prompt_tokens, 'three inputs count more tokens than one');
    });

    test('9c. embeddings: an empty input or a wrong type is a BadRequestError', async () => {
        await expectError(client.embeddings.create({ model: MODEL, input: [] }), BadRequestError, 'input []');
        await expectError(client.embeddings.create({ model: MODEL, input: 42, encoding_format: 'float' }), BadRequestError, 'input 42');
    });
});

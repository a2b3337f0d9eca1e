// The chat page (examples/server/public/index.html, served at /) in a real browser: Debian's
// chromium, headless, driven by npm playwright-core, against llama-server with stories260K.
//
//   node tests/server-js/chat-page.test.mjs      (ctest: server-js-chat-page)
//
// Skips (exit 77) without the model, node_modules (npm ci --prefix tests/server-js) or
// /usr/bin/chromium (as root: apt-get install -y chromium); under CI a missing package or
// chromium is a failure instead, since CI installs them.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { modelPath, requireOrSkip, startServer } from './server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const MODEL = 'stories260K.gguf';

await requireOrSkip([MODEL], ['playwright-core']);
if (!existsSync(CHROMIUM)) {
    const why = `no chromium at ${CHROMIUM} (as root: apt-get install -y chromium)`;
    if (process.env.CI) {
        console.error(`FAILED: ${why}; CI installs it`);
        process.exit(1);
    }
    console.log(`SKIPPED: ${why}`);
    process.exit(77);
}
const { chromium } = await import('playwright-core');  // after the check: node_modules may be absent

// The main server: 2 slots of 8192 tokens. stories260K writes thousands of tokens a second, so
// the Stop case needs a reply of thousands of tokens to be still running when Stop is clicked.
let server, keyServer, browser;

before(async () => {
    [server, keyServer, browser] = await Promise.all([
        startServer(['-m', modelPath(MODEL), '-np', '2', '-c', '16384', '--temp', '0']),
        startServer(['-m', modelPath(MODEL), '-np', '1', '-c', '1024', '--temp', '0', '--api-key', 'secret']),
        chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] }),
    ]);
});

after(async () => {
    await browser?.close();  // (closes the contexts the tests opened)
    await Promise.all([server?.stop(), keyServer?.stop()]);
});

// A fresh browser context (its own localStorage) on the page at base. Records what went wrong
// (console errors, page errors, failed requests, HTTP errors) and each chat request: its parsed
// body and headers.
async function openPage(base) {
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems = [];
    const chats = [];
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('response', (r) => r.status() >= 400 && problems.push(`HTTP ${r.status()}: ${r.url()}`));
    page.on('request', (r) => {
        if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/chat/completions') {
            chats.push({ body: JSON.parse(r.postData()), headers: r.headers() });
        }
    });
    const res = await page.goto(base + '/');
    assert.equal(res.status(), 200, 'GET / serves the page');
    return { page, problems, chats };
}

// Opens the settings panel and fills the fields given ({ id: value }).
async function setSettings(page, fields) {
    await page.evaluate(() => (document.getElementById('settings').open = true));
    for (const [id, value] of Object.entries(fields)) await page.fill(`#${id}`, String(value));
}

// Sends text from the prompt box (Send clicked) and waits until the page is idle again.
async function sendAndWait(page, text) {
    await page.fill('#prompt', text);
    await page.click('#send');  // the page is busy from the click on (Send disabled, Stop enabled)
    await page.waitForFunction(() => !document.getElementById('send').disabled && document.getElementById('stop').disabled);
}

const texts = (page, sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent));

async function chatDirect(base, body, headers = {}) {
    const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: JSON.stringify(body),
    });
    const j = await res.json();
    assert.equal(res.status, 200, JSON.stringify(j));
    return j;
}

const slotsBusy = async (base) => (await (await fetch(`${base}/slots`)).json()).filter((s) => s.is_processing).length;

test('a message streams into the page; the reply is the same request made directly', async () => {
    const { page, problems, chats } = await openPage(server.url);
    await setSettings(page, { max_tokens: 60 });
    // Each change of the reply bubble, with the text it added: streaming shows as several changes.
    await page.evaluate(() => {
        window.growth = [];
        new MutationObserver((records) => {
            for (const r of records) {
                if (!r.target.classList?.contains('assistant')) continue;
                for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.growth.push(n.data.length);
            }
        }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
    });
    const prompt = 'Tell me a story about a cat.';
    await sendAndWait(page, prompt);

    assert.deepEqual(await texts(page, '#messages .msg.user'), [prompt]);
    const [reply] = await texts(page, '#messages .msg.assistant');
    assert.ok(reply, 'the assistant bubble holds the reply');
    assert.deepEqual(chats.map((c) => c.body), [{ messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true }, max_tokens: 60 }],
                     'the page sends the conversation, stream and the fields set, nothing else');

    const direct = await chatDirect(server.url, { messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: 60 });
    assert.equal(reply, direct.choices[0].message.content);

    const growth = await page.evaluate(() => window.growth);
    assert.ok(growth.length > 1, `the reply grew in more than one step (${growth.length})`);
    assert.equal(growth.reduce((a, b) => a + b, 0), reply.length, 'the steps add up to the reply');
    const meta = await page.textContent('#messages .meta');
    assert.match(meta, new RegExp(`${direct.usage.prompt_tokens} prompt tokens, ${direct.usage.completion_tokens} reply tokens`));
    assert.equal(await page.isHidden('#error'), true);
    assert.deepEqual(problems, []);
});

// A click made in the page itself. While a long reply streams in, the page's main thread is
// busy with thousands of events a second, and Playwright's page.click, which waits after the
// click for any navigation it may have scheduled, stalled there past its 30 s on the loaded CI
// machine (the click itself was done). Send and Stop navigate nowhere; nothing is lost.
async function clickInPage(page, selector) {
    await page.$eval(selector, (el) => el.click());
}

test('Stop aborts the request: the partial reply stays, the slot is freed, the page is usable', async () => {
    const { page, chats } = await openPage(server.url);
    await setSettings(page, { max_tokens: 8000 });
    await page.fill('#prompt', 'Once upon a time');
    await clickInPage(page, '#send');
    await page.waitForFunction(() => document.querySelector('#messages .msg.assistant')?.textContent.length > 0);
    assert.equal(await slotsBusy(server.url), 1, 'the reply is still being written when Stop is clicked');
    await clickInPage(page, '#stop');
    await page.waitForFunction(() => !document.getElementById('send').disabled);
    assert.equal(await page.isDisabled('#stop'), true);

    const stopped = (await texts(page, '#messages .msg.assistant'))[0];
    assert.ok(stopped.length > 0, 'the partial reply stays');
    let busy = 1;
    for (let i = 0; i < 30 && busy; i++) {
        await sleep(100);
        busy = await slotsBusy(server.url);
    }
    assert.equal(busy, 0, 'GET /slots: no slot busy after Stop');
    await sleep(300);
    assert.equal((await texts(page, '#messages .msg.assistant'))[0], stopped, 'the reply stopped growing');
    assert.equal(await page.isHidden('#error'), true, 'Stop is not an error');

    // Usable again, and the partial reply is part of the conversation.
    await setSettings(page, { max_tokens: 5 });
    await sendAndWait(page, 'And then?');
    assert.deepEqual(chats[1].body.messages, [
        { role: 'user', content: 'Once upon a time' },
        { role: 'assistant', content: stopped },
        { role: 'user', content: 'And then?' },
    ]);
    assert.equal((await texts(page, '#messages .msg.assistant')).length, 2);
});

test('settings are sent, persist, and each turn sends the whole conversation', async () => {
    const { page, problems, chats } = await openPage(server.url);
    const system = 'You are a storyteller.';
    await setSettings(page, { system, temperature: 0, top_k: 40, max_tokens: 5, seed: 42 });
    await sendAndWait(page, 'Hi');
    const sent = { stream: true, stream_options: { include_usage: true }, temperature: 0, top_k: 40, max_tokens: 5, seed: 42 };
    const first = [{ role: 'system', content: system }, { role: 'user', content: 'Hi' }];
    assert.deepEqual(chats[0].body, { messages: first, ...sent });
    const [reply] = await texts(page, '#messages .msg.assistant');
    assert.ok(reply.length > 0 && reply.length < 60, `a short reply: ${JSON.stringify(reply)}`);
    const n = Number((await page.textContent('#messages .meta')).match(/(\d+) reply tokens/)[1]);
    assert.ok(n >= 1 && n <= 5, `reply tokens ${n}`);

    await sendAndWait(page, 'Go on');
    assert.deepEqual(chats[1].body, { messages: [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'Go on' }], ...sent });
    assert.equal((await texts(page, '#messages .msg')).length, 4);

    // New chat clears the conversation; the settings stay, and survive a reload.
    await page.click('#new-chat');
    assert.equal((await texts(page, '#messages .msg')).length, 0);
    await sendAndWait(page, 'Hello');
    assert.deepEqual(chats[2].body.messages, [{ role: 'system', content: system }, { role: 'user', content: 'Hello' }]);
    await page.reload();
    assert.equal(await page.inputValue('#system'), system);
    assert.equal(await page.inputValue('#max_tokens'), '5');
    assert.equal(await page.inputValue('#seed'), '42');
    assert.equal(await page.inputValue('#top_p'), '', 'a field not set stays empty');
    assert.deepEqual(problems, []);
});

test('API key: the page loads without it, a request without it shows 401, with it works', async () => {
    const { page, chats } = await openPage(keyServer.url);  // (openPage checks GET / is 200)
    await setSettings(page, { max_tokens: 8 });
    await sendAndWait(page, 'Hello');
    assert.equal(chats[0].headers.authorization, undefined);
    assert.match(await page.textContent('#error'), /Invalid API Key/);
    assert.equal(await page.isVisible('#error'), true);
    assert.equal((await texts(page, '#messages .msg')).length, 0, 'the failed turn is undone');
    assert.equal(await page.inputValue('#prompt'), 'Hello', 'its text is back in the prompt box');

    await setSettings(page, { api_key: 'secret' });
    await page.click('#send');
    await page.waitForFunction(() => !document.getElementById('send').disabled && document.querySelector('#messages .msg.assistant'));
    assert.equal(chats[1].headers.authorization, 'Bearer secret');
    assert.deepEqual(chats[1].body.messages, [{ role: 'user', content: 'Hello' }]);
    assert.ok((await texts(page, '#messages .msg.assistant'))[0].length > 0);
    assert.equal(await page.isHidden('#error'), true, 'the error is cleared');

    await page.reload();
    assert.equal(await page.inputValue('#api_key'), 'secret', 'the key is kept in localStorage');
});

test("a server error (max_tokens past the context) is shown in the page", async () => {
    const { page, chats } = await openPage(server.url);
    await setSettings(page, { max_tokens: 1000000000 });
    await sendAndWait(page, 'Hello');
    assert.equal(chats[0].body.max_tokens, 1000000000);
    const direct = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chats[0].body) });
    assert.equal(direct.status, 400);
    const { error } = await direct.json();
    assert.ok((await page.textContent('#error')).includes(error.message), 'the server\'s message is shown');
    assert.equal(await page.isVisible('#error'), true);
    assert.equal((await texts(page, '#messages .msg')).length, 0);
});

// Shared by the JS tests of llama-server: where the server binary and the test models are, and a
// server started on a free local port (its log parsed for the port), stopped at the end.
//
// ctest runs each test file with node (tests/server-js/CMakeLists.txt), with LLAMA_SERVER (the
// binary) and LLAMA_SHARED (the shared test folder) set. A file exits 77 (ctest: skipped) when its
// model or node_modules (npm ci in this folder) is absent, except under CI=true, where a missing
// node_modules is a failure: CI installs them, so a skip there would hide the tests.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export const serverBin = process.env.LLAMA_SERVER || path.join(here, '../../build/bin/llama-server');
export const sharedDir = process.env.LLAMA_SHARED || path.join(here, '../../../shared');
export const modelsDir = process.env.LLAMA_TEST_MODELS || path.join(sharedDir, 'models');

// Exits 77 (skipped) unless the server binary, each model (a file name in the models folder) and
// each npm package are there.
export async function requireOrSkip(models, packages) {
    const skip = (why) => {
        console.log(`SKIPPED: ${why}`);
        process.exit(77);
    };
    if (!existsSync(serverBin)) skip(`no llama-server at ${serverBin}`);
    for (const m of models) {
        if (!existsSync(path.join(modelsDir, m))) skip(`no test model ${m} in ${modelsDir}`);
    }
    for (const p of packages) {
        if (!existsSync(path.join(here, 'node_modules', p))) {
            const why = `npm package ${p} is not installed (run: npm ci --prefix tests/server-js)`;
            if (process.env.CI) {
                console.error(`FAILED: ${why}; CI installs it`);
                process.exit(1);
            }
            skip(why);
        }
    }
}

export function modelPath(name) {
    return path.join(modelsDir, name);
}

// Starts llama-server with args (an array; --port 0 added) and resolves once it listens:
// { url, port, log(), stop() }. Rejects with the log when it exits or does not listen in 60 s.
export function startServer(args) {
    return new Promise((resolve, reject) => {
        const proc = spawn(serverBin, [...args, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let log = '';
        let done = false;
        const timer = setTimeout(() => fail('did not listen within 60 s'), 60000);
        const fail = (why) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            proc.kill('SIGKILL');
            reject(new Error(`llama-server ${args.join(' ')}: ${why}\n${log}`));
        };
        const onData = (d) => {
            log += d.toString();
            const m = log.match(/listening on http:\/\/([0-9.]+):(\d+)/);
            if (m && !done) {
                done = true;
                clearTimeout(timer);
                const port = Number(m[2]);
                resolve({
                    port,
                    url: `http://127.0.0.1:${port}`,
                    log: () => log,
                    stop: () =>
                        new Promise((res) => {
                            if (proc.exitCode !== null) return res(proc.exitCode);
                            proc.once('exit', (code) => res(code));
                            proc.kill('SIGTERM');
                            setTimeout(() => proc.kill('SIGKILL'), 10000).unref();
                        }),
                });
            }
        };
        proc.stdout.on('data', onData);
        proc.stderr.on('data', onData);
        proc.on('exit', (code) => fail(`exited with ${code} before listening`));
        proc.on('error', (e) => fail(e.message));
    });
}

// Helpers of the node-based `ringlm serve` tests (the OpenAI JavaScript client, the chat page in
// chromium): the packages from the build tree, the model, a server on a free loopback port.
// Environment (set by CTest): RINGLM_CLI, RINGLM_SHARED_DIR, RINGLM_TEST_DIR, RINGLM_NODE_DIR
// (where npm_install.sh put node_modules).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
export const SKIP = 77;

export const cli = process.env.RINGLM_CLI || join(root, 'build/release/bin/ringlm');
export const sharedDir = process.env.RINGLM_SHARED_DIR || join(root, '..', 'shared');
export const testDir = process.env.RINGLM_TEST_DIR || join(root, 'build/release/serve-test');
mkdirSync(testDir, { recursive: true });

export function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(SKIP);
}

// A package installed by npm_install.sh (CommonJS entry points: ESM imports ignore NODE_PATH).
export function requirePackage(name) {
  const dir = process.env.RINGLM_NODE_DIR || join(testDir, 'node');
  if (!existsSync(join(dir, 'node_modules', name))) {
    skip(`npm package ${name} is not installed in ${dir} (the serve_npm_install test installs it)`);
  }
  return createRequire(join(dir, 'package.json'))(name);
}

export function golden() {
  const p = join(sharedDir, 'references/stories260K/once-upon-a-time.greedy.txt');
  if (!existsSync(p)) skip('../shared/references/stories260K absent');
  const ref = readFileSync(p, 'utf8').replace(/\n+$/, '');
  const prompt = 'Once upon a time';
  if (!ref.startsWith(prompt)) throw new Error(`unexpected reference text in ${p}`);
  return ref.slice(prompt.length);
}

function convert(args, out) {
  if (existsSync(out)) return out;
  const tmp = `${out}.${process.pid}.tmp.rlm`;
  const r = spawnSync(cli, ['convert', ...args, '-q', '-o', tmp], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error(`ringlm convert failed (${r.status})`);
  renameSync(tmp, out);
  return out;
}

export function storiesModel() {
  const src = join(sharedDir, 'models/stories260K');
  if (!existsSync(join(src, 'stories260K.bin'))) skip('../shared/models/stories260K absent');
  return convert([join(src, 'stories260K.bin'), '--tokenizer', join(src, 'tok512.bin'), '--quant', 'f32'],
                 join(testDir, 'stories260K-f32.rlm'));
}

// The slow chat model of serve_util.py's chat_model(): 2 layers of SmolLM2-135M's shape, f32, so
// that a long reply takes seconds.
export function chatModel() {
  return convert(['--synthetic', 'smollm2-135m', '--layers', '2', '--chat', 'chatml', '--quant', 'f32'],
                 join(testDir, 'synthetic-chatml-2l-f32.rlm'));
}

// Starts `ringlm serve -m model --port 0 ...args`; resolves to {base, port, stop(), log()} once
// it prints its address.
export function startServer(model, ...args) {
  return new Promise((resolvePromise, reject) => {
    const proc = spawn(cli, ['serve', '-m', model, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    proc.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`server did not start: ${err}`)); }, 60000);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}): ${err}`)); });
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (!m) return;
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      const port = Number(m[1]);
      resolvePromise({
        port, base: `http://127.0.0.1:${port}`, log: () => err,
        stop: () => new Promise((res) => {
          if (proc.exitCode !== null) return res(proc.exitCode);
          proc.on('exit', (code) => res(code));
          proc.kill('SIGTERM');
        }),
      });
    });
  });
}

// Minimal assertions that say what differed.
export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// (c) The chat page at / in headless chromium (Debian's /usr/bin/chromium, driven by
// puppeteer-core): a message typed and sent, the streamed reply read from the page (llama2.c's
// greedy stories260K text), the tokens/s figure, a screenshot (RINGLM_TEST_DIR/chat-page.png), New
// chat; then on a slow model: part of a reply on the page before it is done (streaming), and the
// Stop button (the server cancels the generation).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatModel, check, golden, requirePackage, skip, startServer, storiesModel, testDir } from './serve_util.mjs';

const CHROMIUM = process.env.RINGLM_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) skip(`${CHROMIUM} not found (Debian: apt-get install chromium; scripts/setup.sh does)`);
const expected = golden();
const stories = storiesModel();
const slow = chatModel();
const puppeteer = requirePackage('puppeteer-core');

const profile = mkdtempSync(join(tmpdir(), 'ringlm-chromium-'));
const browser = await puppeteer.launch({
  executablePath: CHROMIUM, headless: true, userDataDir: profile,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const servers = [];
let failed = false;

// Opens the page of `srv`, collecting console errors, failed loads and requests to other origins.
async function openPage(srv) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 700 });
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (!r.url().startsWith(srv.base) && !r.url().startsWith('data:')) problems.push(`external request ${r.url()}`); });
  await page.goto(`${srv.base}/`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.getElementById('model').textContent.endsWith('.rlm'), { timeout: 30000 });
  return { page, problems };
}

async function setField(page, id, value) {
  await page.$eval(`#${id}`, (el, v) => { el.value = v; }, String(value));
}

try {
  // --- a reply streamed into the page -------------------------------------------------------------
  const srv = await startServer(stories, '--slots', '1');
  servers.push(srv);
  const { page, problems } = await openPage(srv);
  await setField(page, 'temperature', 0);
  await setField(page, 'max-tokens', 300);
  await page.type('#input', 'Once upon a time');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.msg.assistant[data-done="true"]', { timeout: 60000 });
  const reply = await page.$eval('.msg.assistant .text', (el) => el.textContent);
  const user = await page.$eval('.msg.user .text', (el) => el.textContent);
  const stats = await page.$eval('#stats', (el) => el.textContent);
  check(user === 'Once upon a time', `user message ${user}`);
  check(reply.slice(0, expected.length) === expected, `reply in the page:\n${reply}\nexpected:\n${expected}`);
  check(/^300 tokens · [0-9.]+ tok\/s · first token \d+ ms$/.test(stats), `stats "${stats}"`);
  const shot = join(testDir, 'chat-page.png');
  await page.screenshot({ path: shot });
  console.log(`reply complete, golden text matches; "${stats}"; screenshot ${shot}`);
  // New chat empties the conversation.
  await page.click('#new-chat');
  check(await page.$$eval('.msg', (els) => els.length) === 0, 'New chat left messages');
  check(problems.length === 0, `page problems: ${problems.join('; ')}`);

  // --- Stop: the browser aborts the stream; the server cancels the generation ------------------
  const slowSrv = await startServer(slow, '--slots', '1', '--ctx', '8192');
  servers.push(slowSrv);
  const s = await openPage(slowSrv);
  await setField(s.page, 'max-tokens', 6000);
  await s.page.type('#input', 'Hello');
  await s.page.click('#send');
  await s.page.waitForFunction(() => document.querySelector('.msg.assistant .text')?.textContent.length > 0, { timeout: 60000 });
  // Text is on the page while the reply is still being generated: it streams (6,000 tokens of
  // this model take tens of seconds; the page marks a reply done only after its last event).
  const partial = await s.page.$eval('.msg.assistant', (el) => ({ done: el.dataset.done, text: el.querySelector('.text').textContent }));
  check(partial.done === undefined && partial.text.length > 0, `reply not streamed: ${JSON.stringify(partial)}`);
  await s.page.click('#stop');
  await s.page.waitForSelector('.msg.assistant[data-done="true"]', { timeout: 30000 });
  const note = await s.page.$eval('.msg.assistant .note', (el) => el.textContent);
  check(note === '(stopped)', `note after Stop: ${note}`);
  check(await s.page.$eval('#send', (el) => !el.disabled), 'Send still disabled after Stop');
  // The server saw the disconnect: the generation was cancelled and the slot is free.
  let m = '';
  for (let i = 0; i < 300; i++) {
    m = await (await fetch(`${slowSrv.base}/metrics`)).text();
    if (/ringlm_requests_cancelled_total 1\n/.test(m) && /ringlm_slots_busy 0\n/.test(m)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  check(/ringlm_requests_cancelled_total 1\n/.test(m), 'the server did not cancel the stopped reply');
  const generated = Number(m.match(/ringlm_completion_tokens_total (\d+)/)[1]);
  check(generated < 6000, `${generated} tokens generated after Stop`);
  check(s.problems.every((p) => p.includes('abort') || p.includes('ERR_')) , `page problems: ${s.problems.join('; ')}`);
  console.log(`Stop: cancelled after ${generated} tokens`);
} catch (e) {
  failed = true;
  console.error(e);
  for (const s of servers) console.error(`--- server log ---\n${s.log().slice(-3000)}`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
  for (const s of servers) {
    const code = await s.stop();
    if (code !== 0) { failed = true; console.error(`server exit status ${code}`); }
  }
}
console.log(failed ? 'chat page test: FAILED' : 'chat page test: passed');
process.exit(failed ? 1 : 0);

// (a) The official OpenAI JavaScript client (npm `openai`) against `ringlm serve`: a non-streamed
// and a streamed chat completion return llama2.c's greedy stories260K text; the model list, a
// completion, and the client's error classes for a bad request and a wrong API key.
import { check, golden, requirePackage, startServer, storiesModel } from './serve_util.mjs';

const expected = golden();
const model = storiesModel();
const { OpenAI } = requirePackage('openai');

const KEY = 'sk-ringlm-node-test';
const srv = await startServer(model, '--slots', '2', '--api-key', KEY);
let failed = false;
try {
  const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: KEY, maxRetries: 0 });

  const models = await client.models.list();
  const ids = models.data.map((m) => m.id);
  check(ids.includes('stories260K-f32.rlm'), `model list ${JSON.stringify(ids)}`);

  const req = { model: 'stories260K-f32.rlm', messages: [{ role: 'user', content: 'Once upon a time' }],
                temperature: 0, max_tokens: 300 };
  const r = await client.chat.completions.create(req);
  const text = r.choices[0].message.content;
  check(text.slice(0, expected.length) === expected, `non-streamed text:\n${text}\nexpected:\n${expected}`);
  check(r.choices[0].finish_reason === 'length', `finish_reason ${r.choices[0].finish_reason}`);
  check(r.usage.prompt_tokens === 5 && r.usage.completion_tokens === 300, `usage ${JSON.stringify(r.usage)}`);
  console.log(`non-streamed: ${r.usage.completion_tokens} tokens, golden text matches`);

  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let streamed = '', chunks = 0, usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta?.content) { streamed += c.delta.content; ++chunks; }
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(streamed === text, `streamed text differs:\n${streamed}`);
  check(chunks > 100, `only ${chunks} content chunks: not streamed piece by piece`);
  check(finish === 'length' && usage && usage.completion_tokens === 300, `stream end ${finish} ${JSON.stringify(usage)}`);
  console.log(`streamed: ${chunks} chunks, same text`);

  const c = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 50, temperature: 0 });
  check(expected.startsWith(c.choices[0].text), `completion ${c.choices[0].text}`);

  try {
    await client.chat.completions.create({ ...req, max_tokens: 100000 });
    check(false, 'max_tokens 100000 accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, `error ${e}`);
    check(e.code === 'context_length_exceeded', `error code ${e.code}`);
  }
  try {
    const wrong = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await wrong.chat.completions.create(req);
    check(false, 'a wrong API key was accepted');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, `error ${e}`);
  }
  console.log('errors: BadRequestError (400) and AuthenticationError (401) as the client expects');
} catch (e) {
  failed = true;
  console.error(e);
  console.error(`--- server log ---\n${srv.log().slice(-3000)}`);
} finally {
  const code = await srv.stop();
  if (code !== 0) { failed = true; console.error(`server exit status ${code}`); }
}
console.log(failed ? 'openai client test: FAILED' : 'openai client test: passed');
process.exit(failed ? 1 : 0);

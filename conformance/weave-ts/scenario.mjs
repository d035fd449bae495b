// Drives a running Hone with the Weave TypeScript SDK (npm weave, pinned in package.json).
// Run by cmd/hone's conformance test with WF_TRACE_SERVER_URL, WANDB_API_KEY and HONE_PROJECT
// (<entity>/<project>) set. Prints one JSON object describing what the SDK wrote.
import * as weave from 'weave';

const client = await weave.init(process.env.HONE_PROJECT);

// An object published twice: two versions.
const ref1 = await client.publish({temperature: 0.5, prompt: 'v1'}, 'config');
const ref2 = await client.publish({temperature: 0.7, prompt: 'v2'}, 'config');

// A dataset: a table of rows (one row appears twice).
const rows = [
  {question: '1+1', answer: 2},
  {question: '2+3', answer: 5},
  {question: '1+1', answer: 2},
];
const dataset = new weave.Dataset({name: 'arith', rows});
const dref = await dataset.save();

// A tree of traced ops whose summaries carry usage.
const llm = weave.op(
  async function llm(prompt, model, p, c) {
    return {text: 'ok:' + prompt, model, p, c};
  },
  {
    summarize: r => ({usage: {[r.model]: {prompt_tokens: r.p, completion_tokens: r.c}}}),
  }
);
const step = weave.op(async function step(x) {
  await llm('a', 'model-a', 10, 1);
  await llm('b', 'model-b', 20, 2);
  return 'step' + x;
});
const root = weave.op(async function root() {
  await step(1);
  await llm('c', 'model-a', 100, 10);
  return 'root';
});
await root();
await client.waitForBatchProcessing();

console.log(
  JSON.stringify({
    object_digests: [ref1.digest, ref2.digest],
    dataset_digest: dref.digest,
    rows,
    expected_root_usage: {
      'model-a': {prompt_tokens: 110, completion_tokens: 11, requests: 2},
      'model-b': {prompt_tokens: 20, completion_tokens: 2, requests: 1},
    },
  })
);

// Drives a running Hone with the Weave TypeScript SDK (npm weave, pinned in package.json).
// Run by cmd/hone's conformance test with WF_TRACE_SERVER_URL, WANDB_API_KEY and HONE_PROJECT
// (<entity>/<project>) set. Writes as users do, reads back what the SDK can read (getCalls
// with trace, op and parent filters, getCall, get(ref), an Evaluation and a score added with
// addScore), and prints one JSON object describing what it wrote and read.
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

// An evaluation: a model that gets "2+3" wrong, scored by exact match.
const model = weave.op(async function adder({datasetRow}) {
  const [a, b] = datasetRow.question.split('+').map(Number);
  return a + b + (a === 2 ? 1 : 0);
});
const exact = weave.op(async function exact({datasetRow, modelOutput}) {
  return {correct: datasetRow.answer === modelOutput};
});
const evaluation = new weave.Evaluation({id: 'arith-eval', dataset, scorers: [exact]});
const evalSummary = await evaluation.evaluate({model});
await client.waitForBatchProcessing();

// ---- Read back ----
const read = {};
const roots = await client.getCalls({trace_roots_only: true});
const rootCall = roots.find(c => c.op_name.includes('/op/root:'));
const traceCalls = await client.getCalls({trace_ids: [rootCall.trace_id]});
read.trace_call_ops = traceCalls.map(c => c.op_name.split('/op/')[1].split(':')[0]).sort();
const llmOp = traceCalls.find(c => c.op_name.includes('/op/llm:')).op_name;
read.op_calls = (await client.getCalls({op_names: [llmOp]})).length;
const got = await client.getCall(rootCall.id);
read.get_call = {id: got.id, output: got.output};
read.children = (await client.getCalls({parent_ids: [rootCall.id]})).map(c => c.output).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
read.ref1 = await client.get(ref1);
read.ref2 = await client.get(ref2);
const evalCall = roots.find(c => c.op_name.includes('/op/Evaluation.evaluate:'));
read.evaluation_output = evalCall ? evalCall.output : null;
const predictCalls = (await client.getCalls({trace_ids: [evalCall.trace_id]})).filter(c => c.op_name.includes('/op/adder:'));
read.predictions = predictCalls.map(c => [c.inputs.datasetRow, c.output]).length;
// A score on the first prediction, as EvaluationLogger records it.
const scorerCall = (await client.getCalls({trace_ids: [evalCall.trace_id]})).find(c => c.op_name.includes('/op/exact:'));
const scoreId = await client.addScore(predictCalls[0].id, scorerCall.id, scorerCall.op_name, {correct: true});
await client.waitForBatchProcessing();

console.log(
  JSON.stringify({
    root_call_id: rootCall.id,
    feedback_ids: [scoreId],
    evaluation_summary: evalSummary,
    read,
    object_digests: [ref1.digest, ref2.digest],
    dataset_digest: dref.digest,
    rows,
    expected_root_usage: {
      'model-a': {prompt_tokens: 110, completion_tokens: 11, requests: 2},
      'model-b': {prompt_tokens: 20, completion_tokens: 2, requests: 1},
    },
  })
);

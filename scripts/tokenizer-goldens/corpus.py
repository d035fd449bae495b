"""The hard corpus of the tokenizer goldens (shared by gen.py and check_js.mjs through
internal/tokenizer/testdata/corpus.json)."""
import json
import random

rng = random.Random(7)
corpus = [
    "", " ", "  ", "\n", "\r\n", "\t", " \t \n ", "\n\n\n", "a\r\n\r\nb", "x   \n  y",
    "Hello world", "Hello, world!", "hello   world  ", "  leading spaces", "trailing spaces   ",
    "I'm here, you're there, he's gone, we've been, they'll go, I'd say, don't",
    "I'M HERE, YOU'RE THERE, SHE'S", "'s 't 're 've 'm 'll 'd", "''quoted'' \"double\"",
    "1", "12", "123", "1234", "12345678901234567890", "3.14159 2,718 1e10 -42 +7",
    "x=1+2*3/4-5", "0x1F 0b1010 1_000_000",
    "def f(x):\n    return x ** 2  # square\n\nclass A:\n\tpass\n",
    "if (a && b || !c) { return a[i] >= b->c; }",
    "for i in range(10):\n        print(f\"{i:>4}\")\n",
    "<html><body><div class=\"x\">Hi &amp; bye</div></body></html>",
    "SELECT * FROM t WHERE a = 'b' AND c <> \"d\";",
    "Café crème brûlée naïve façade jalapeño", "Ünïcödé Ωμέγα Привет мир", "日本語のテキストです。漢字とかな。",
    "中文字符测试，标点符号！", "한국어 텍스트", "עברית ושלום", "مرحبا بالعالم", "हिन्दी पाठ", "ไทย ภาษา",
    "e\u0301 composed vs é precomposed", "Å vs A\u030A", "ﬁ ligature ｆｕｌｌｗｉｄｔｈ",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷", "😀", "a😀b", "😀😀😀😀",
    "mixed\u00a0nbsp\u2003em\u3000ideo", "zero\u200bwidth\u200djoiner",
    "math ∑∫√∞≠≤≥ ±×÷ → ← ↑ ↓", "currency $ € £ ¥ ₹ ₿",
    "!!!???...---___***", "....", "----", "    !!!", " !", "a!b?c.",
    "tabs\t\tand\t spaces \t\t", "line1\nline2\r\nline3\rline4",
    "word\n\n  word2  \n", "end with newline\n", "   \n   ",
    "URL https://example.com/path?q=1&r=two#frag", "email someone@example.org",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "text<|endoftext|>more", "<think>\nreasoning\n</think>\n\nanswer",
    "<|im_start|><|im_end|><|im_start|>", "not special: <|im_start|x> <|fake|>",
    # Digits of every kind (Digits splits on Unicode numeric characters) and bytes some
    # vocabularies lack (SmolLM2 has no token for 0x04, 0xF1 or 0xF2 bytes).
    "٣٤٥ ١٢ ۱۲۳", "①②③ ⅫⅣ ½¾ x²³ 10⁵", "１２３ full-width", "v1.2.3-rc4 2024-01-31T12:34:56Z",
    "a1b22c333d4444", "phone +1 (555) 010-9999", "ctrl\x04\x06\x13char", "\U00040000 plane 4 \U000A1234",
    "<|endoftext|>12<|im_start|>345<|im_end|>", "<jupyter_code>x = 1<empty_output>",
    # Case mappings that differ between languages' lowercasing: dotted capital I, final sigma.
    "İSTANBUL İzmir", "ΟΔΥΣΣΕΥΣ ΣΟΦΟΣ Σ ΑΣ. ΑΣ'Α", "ǅ ǈ ǋ Ⅻ Ⓐ ＡＢＣ",
]
# Runs of every kind.
for ch in [" ", "\n", "\t", "0", "a", "!", "é", "日", "😀"]:
    for n in [2, 3, 4, 7, 16, 33]:
        corpus.append(ch * n)
        corpus.append("x" + ch * n + "y")
# Random mixtures.
alphabet = list("abcXYZ019 \n\t.,'!?-_()[]{}<>éüß日本😀👍🏽\u00a0\u2028") + ["'s", "'ll", "  ", "\r\n", "<|im_end|>", "<|endoftext|>"]
for _ in range(150):
    corpus.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))

if __name__ == "__main__":
    print(json.dumps(corpus, ensure_ascii=False, indent=0))

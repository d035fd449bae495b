package tokenizer

import (
	"strings"
	"testing"
)

const trainText = `Hone trains, serves and traces language models. The quick brown fox jumps over the lazy dog.
The quick brown fox jumps again; the lazy dog sleeps. Numbers like 12345 and 678 appear too.
def hello(name):
    return "hello " + name
Unicode: café, naïve, 日本語, 😀. The end. The end. The end.
`

func TestTrainAndBuild(t *testing.T) {
	spec, err := TrainText(strings.Repeat(trainText, 3), 400, PatternQwen2)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Tokens) > 400 || len(spec.Tokens) < 350 || len(spec.Tokens) != 256+len(spec.Merges) {
		t.Fatalf("tokens %d merges %d", len(spec.Tokens), len(spec.Merges))
	}
	again, _ := TrainText(strings.Repeat(trainText, 3), 400, PatternQwen2)
	if strings.Join(again.Tokens, "|") != strings.Join(spec.Tokens, "|") {
		t.Fatal("training is not deterministic")
	}
	spec.Added = []AddedToken{{Content: "<|im_start|>", Special: true}, {Content: "<|im_end|>", Special: true}}
	spec.EOSToken = "<|im_end|>"
	spec.ChatTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	tk, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != len(spec.Tokens)+2 {
		t.Fatalf("vocab %d", tk.VocabSize())
	}
	if id, ok := tk.EOS(); !ok || id != len(spec.Tokens)+1 || !tk.IsSpecial(id) {
		t.Fatalf("EOS %d %v", id, ok)
	}
	for _, s := range []string{trainText, "unseen words ZZZ ∑ 🙂", "<|im_start|>user\nhi<|im_end|>"} {
		ids := tk.Encode(s, false)
		if got := tk.Decode(ids, false); got != s {
			t.Fatalf("round trip %q -> %q", s, got)
		}
	}
	// Merges shorten known text well below one token per byte.
	if n := len(tk.Encode("The quick brown fox jumps over the lazy dog.", false)); n > 20 {
		t.Fatalf("%d tokens for a trained sentence", n)
	}
	if tk.ChatTemplate("") == "" {
		t.Fatal("chat template lost")
	}
	if _, err := Train(nil, 100, ""); err == nil {
		t.Fatal("vocab below 256 accepted")
	}
	bad := Spec{Tokens: ByteTokens(), Merges: [][2]string{{"a", "b"}}}
	if _, err := bad.TokenizerJSON(); err == nil {
		t.Fatal("merge without its token accepted")
	}
}

package chattemplate

import (
	"slices"
	"strings"
	"testing"
)

const builtinConv = `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi?"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}]`

var builtinSpecial = map[string]map[string]string{
	BuiltinChatML:  {"eos_token": "<|im_end|>"},
	BuiltinQwen3:   {"eos_token": "<|im_end|>"},
	BuiltinLlama3:  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
	BuiltinGemma:   {"bos_token": "<bos>", "eos_token": "<eos>"},
	BuiltinPhi3:    {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
	BuiltinMistral: {"bos_token": "<s>", "eos_token": "</s>"},
}

// TestBuiltinRender pins each built-in template's rendering of a conversation with a system
// message, two exchanges and a generation prompt.
func TestBuiltinRender(t *testing.T) {
	want := map[string]string{
		BuiltinChatML: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n" +
			"<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>assistant\n",
		BuiltinQwen3: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n" +
			"<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nParis.<|im_end|>\n<|im_start|>assistant\n",
		BuiltinLlama3: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHi?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nCapital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nParis.<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		BuiltinGemma: "<bos><start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n" +
			"<start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\nParis.<end_of_turn>\n<start_of_turn>model\n",
		BuiltinPhi3: "<|system|>\nBe brief.<|end|>\n<|user|>\nHi?<|end|>\n<|assistant|>\nHello.<|end|>\n" +
			"<|user|>\nCapital of France?<|end|>\n<|assistant|>\nParis.<|end|>\n<|assistant|>\n",
		BuiltinMistral: "<s>[INST] Be brief.\n\nHi? [/INST]Hello.</s>[INST] Capital of France? [/INST]Paris.</s>",
	}
	for _, name := range Builtins {
		src, ok := Builtin(name)
		if !ok {
			t.Fatalf("no built-in %s", name)
		}
		tpl, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := tpl.Render(Input{Messages: []byte(builtinConv), AddGenerationPrompt: true, SpecialTokens: builtinSpecial[name]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want[name] {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want[name])
		}
	}
}

// TestBuiltinMatchesPublished: where a family's published template and the built-in one
// render the same conversation, they render it byte for byte alike (Gemma 3's, Qwen2.5's
// and Qwen3's with a system message, Phi-3.5's with a generation prompt).
func TestBuiltinMatchesPublished(t *testing.T) {
	all := templates(t)
	for _, c := range []struct{ builtin, published, conv string }{
		{BuiltinGemma, "gemma3", builtinConv},
		{BuiltinGemma, "gemma3", `[{"role":"user","content":" padded "},{"role":"assistant","content":"yes"}]`},
		{BuiltinGemma, "gemma2", `[{"role":"user","content":"Hi?"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Bye"}]`},
		{BuiltinChatML, "qwen2_5", builtinConv},
		{BuiltinQwen3, "qwen3", builtinConv},
		{BuiltinPhi3, "phi3_5", builtinConv},
		{BuiltinChatML, "smollm2", `[{"role":"system","content":"S"},{"role":"user","content":"Hi?"},{"role":"assistant","content":"Hello."}]`},
	} {
		src, _ := Builtin(c.builtin)
		bt, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := Compile(all[c.published])
		if err != nil {
			t.Fatal(err)
		}
		in := Input{Messages: []byte(c.conv), AddGenerationPrompt: true, SpecialTokens: builtinSpecial[c.builtin]}
		a, err := bt.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pt.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s vs %s:\nbuilt-in  %q\npublished %q", c.builtin, c.published, a, b)
		}
	}
}

// TestBuiltinTools: the ChatML and Llama 3 built-ins list tools and write an assistant's
// calls in the format their tool-call parsers read (hermes, llama3_json), and the tool's
// result after them; AssistantSpans finds each assistant turn, calls included.
func TestBuiltinTools(t *testing.T) {
	conv := `[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"sunny"},
		{"role":"assistant","content":"It is sunny."}]`
	tools := `[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`
	for name, want := range map[string][]string{
		BuiltinChatML: {"<tools>\n{\"type\": \"function\"", "<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n",
			"<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"},
		BuiltinLlama3: {"\"parameters\": dictionary", "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>",
			"<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|>"},
	} {
		src, _ := Builtin(name)
		tpl, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		full, spans, err := tpl.AssistantSpans(Input{Messages: []byte(conv), Tools: []byte(tools), SpecialTokens: builtinSpecial[name]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, w := range want {
			if !strings.Contains(full, w) {
				t.Errorf("%s: %q not in\n%q", name, w, full)
			}
		}
		if len(spans) != 2 || !strings.Contains(full[spans[0].Start:spans[0].End], `"weather"`) || !strings.HasPrefix(full[spans[1].Start:spans[1].End], "It is sunny.") {
			t.Errorf("%s: spans %v of %q", name, spans, full)
		}
	}
}

// TestBuiltinSpansEndTheTurn: in every built-in template each assistant span ends with the
// family's end-of-turn text, so training learns the tokens that close the turn.
func TestBuiltinSpansEndTheTurn(t *testing.T) {
	ends := map[string]string{BuiltinChatML: "<|im_end|>\n", BuiltinQwen3: "<|im_end|>\n", BuiltinLlama3: "<|eot_id|>",
		BuiltinGemma: "<end_of_turn>\n", BuiltinPhi3: "<|end|>\n", BuiltinMistral: "</s>"}
	for _, name := range Builtins {
		src, _ := Builtin(name)
		tpl, _ := Compile(src)
		full, spans, err := tpl.AssistantSpans(Input{Messages: []byte(builtinConv), SpecialTokens: builtinSpecial[name]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(spans) != 2 {
			t.Fatalf("%s: spans %v", name, spans)
		}
		for i, s := range spans {
			body := []string{"Hello.", "Paris."}[i]
			if name == BuiltinQwen3 && i == 1 {
				body = "<think>\n\n</think>\n\n" + body // Qwen3's final turn
			}
			if got := full[s.Start:s.End]; got != body+ends[name] || s.Tail != len(ends[name]) {
				t.Errorf("%s: span %d is %q (tail %d), want %q", name, i, got, s.Tail, body+ends[name])
			}
		}
	}
}

func TestQwen3BuiltinThinking(t *testing.T) {
	src, _ := Builtin(BuiltinQwen3)
	tpl, _ := Compile(src)
	got, err := tpl.Render(Input{Messages: []byte(`[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_content":"r1"},{"role":"user","content":"q2"},{"role":"assistant","content":"b","reasoning_content":"r2"}]`),
		AddGenerationPrompt: true, Kwargs: []byte(`{"enable_thinking": false}`)})
	want := "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n" +
		"<|im_start|>assistant\n<think>\nr2\n</think>\n\nb<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
}

func TestBuiltinFor(t *testing.T) {
	vocab := func(toks ...string) func(string) bool { return func(s string) bool { return slices.Contains(toks, s) } }
	for _, c := range []struct {
		pref  string // the family's template (package model's Family.ChatTemplate)
		vocab []string
		want  string
	}{
		{BuiltinGemma, []string{"<bos>", "<start_of_turn>", "<end_of_turn>"}, BuiltinGemma},
		{BuiltinPhi3, []string{"<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>"}, BuiltinPhi3},
		{BuiltinChatML, []string{"<|im_start|>", "<|im_end|>"}, BuiltinChatML},
		{BuiltinQwen3, []string{"<|im_start|>", "<|im_end|>"}, BuiltinQwen3},
		{"", []string{"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, BuiltinLlama3},
		{"", []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, BuiltinChatML},
		{"", []string{"<unk>", "<s>", "</s>"}, BuiltinMistral},
		// A family's template needs its markers; without them the vocabulary decides.
		{BuiltinPhi3, []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, BuiltinChatML},
		{BuiltinGemma, []string{"<unk>", "<s>", "</s>"}, BuiltinMistral},
		{"", []string{"<|endoftext|>"}, ""},
		{BuiltinChatML, nil, ""},
	} {
		if got := BuiltinFor(c.pref, vocab(c.vocab...)); got != c.want {
			t.Errorf("%q %v: got %q, want %q", c.pref, c.vocab, got, c.want)
		}
	}
}

func TestTurnEnd(t *testing.T) {
	all := templates(t)
	for name, want := range map[string]string{"gemma3": "<end_of_turn>\n", "llama3_2": "<|eot_id|>", "smollm2": "<|im_end|>\n",
		"phi3_5": "<|end|>\n<|endoftext|>", "mistral_7b_v03": "</s>", "qwen3": "<|im_end|>\n"} {
		tpl, err := Compile(all[name])
		if err != nil {
			t.Fatal(err)
		}
		sp := map[string]string{"bos_token": "<s>", "eos_token": "</s>"}
		if name == "phi3_5" {
			sp["eos_token"] = "<|endoftext|>"
		}
		if got := tpl.TurnEnd(sp); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestAssistantSpansPhi3: Phi-3's templates write eos after the last turn only, so an earlier
// assistant turn's end differs inside the conversation; its span still ends with that turn's
// own end (it took the next user turn in too).
func TestAssistantSpansPhi3(t *testing.T) {
	all := templates(t)
	for _, name := range []string{"phi3_5", "phi3_mini", "phi4_mini"} {
		tpl, _ := Compile(all[name])
		full, spans, err := tpl.AssistantSpans(Input{Messages: []byte(builtinConv), SpecialTokens: builtinSpecial[BuiltinPhi3]})
		if err != nil {
			t.Fatal(err)
		}
		nl := "\n"
		if name == "phi4_mini" {
			nl = ""
		}
		if len(spans) != 2 || full[spans[0].Start:spans[0].End] != "Hello.<|end|>"+nl || full[spans[1].Start:spans[1].End] != "Paris.<|end|>"+nl+"<|endoftext|>" {
			t.Fatalf("%s: spans %v of %q", name, spans, full)
		}
	}
}

func TestSharedTail(t *testing.T) {
	for _, c := range []struct {
		tail, rest string
		want       int
	}{
		{"<|end|>\n<|endoftext|>", "<|end|>\n<|user|>\nx", 8},
		{"<|end|><|endoftext|>", "<|end|><|user|>x", 7},
		{"<|im_end|>\n", "<|im_end|>\n<|im_start|>", 11},
		{"</s>", "[INST]", 0},
		{"ab", "ac", 1},
	} {
		if got := sharedTail(c.tail, c.rest); got != c.want {
			t.Errorf("sharedTail(%q, %q) = %d, want %d", c.tail, c.rest, got, c.want)
		}
	}
}

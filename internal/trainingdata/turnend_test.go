package trainingdata

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// turnEndCases are the chat templates of every family Hone serves (the published ones its
// tests carry, and the built-in ones), each with the family whose special tokens it writes.
func turnEndCases(t *testing.T) map[string]struct {
	src string
	fam synth.Family
} {
	t.Helper()
	out := map[string]struct {
		src string
		fam synth.Family
	}{}
	published := map[string]string{"gemma3": "gemma", "gemma2": "gemma", "llama3_2": "llama3", "qwen2_5": "chatml",
		"smollm2": "chatml", "phi3_5": "phi3", "phi3_mini": "phi3", "phi4_mini": "phi3", "mistral_7b_v03": "mistral", "mistral_v03": "mistral"}
	for name, fam := range published {
		b, err := os.ReadFile(filepath.Join("..", "chattemplate", "testdata", "templates", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		out[name] = struct {
			src string
			fam synth.Family
		}{fx.ChatTemplate, synth.Families[fam]}
	}
	b, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "qwen3", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var qc struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &qc); err != nil {
		t.Fatal(err)
	}
	out["qwen3"] = struct {
		src string
		fam synth.Family
	}{qc.ChatTemplate, synth.Families["chatml"]}
	out["synth"] = struct {
		src string
		fam synth.Family
	}{synth.ChatTemplate, synth.Families["chatml"]}
	for _, name := range chattemplate.Builtins {
		src, _ := chattemplate.Builtin(name)
		fam := name
		if name == chattemplate.BuiltinQwen3 {
			fam = "chatml"
		}
		out["builtin "+name] = struct {
			src string
			fam synth.Family
		}{src, synth.Families[fam]}
	}
	return out
}

// familyChat is a ChatTokenizer of a family's special tokens and a template.
func familyChat(t *testing.T, src string, fam synth.Family) (*ChatTokenizer, int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	eot, err := synth.WriteFamily(dir, synth.Tiny("llama"), fam)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chattemplate.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return &ChatTokenizer{Template: tpl, Tok: tok, Special: map[string]string{"bos_token": fam.BOS, "eos_token": fam.EOS}}, eot
}

// TestSFTTrainsTheTurnEnd: for every template family, SFT learns the token that closes each
// assistant turn (its end-of-turn token, predicted after the answer), not only the answer.
func TestSFTTrainsTheTurnEnd(t *testing.T) {
	conv := json.RawMessage(`[{"role":"user","content":"Capital of Peru?"},{"role":"assistant","content":"Lima."},{"role":"user","content":"And Chile?"},{"role":"assistant","content":"Santiago."}]`)
	for name, c := range turnEndCases(t) {
		t.Run(name, func(t *testing.T) {
			chat, eot := familyChat(t, c.src, c.fam)
			x, err := chat.Tokenize(conv, nil, "all")
			if err != nil {
				t.Fatal(err)
			}
			trained := 0
			for i, id := range x.Tokens {
				if id == eot && x.Train[i] {
					trained++
					if !x.Train[i-1] {
						t.Errorf("the end of turn at %d follows a token that is not learned", i)
					}
				}
			}
			if trained != 2 {
				t.Fatalf("%d of 2 end-of-turn tokens (%s) are learned in %q", trained, c.fam.EndOfTurn, chat.Tok.Decode(x.Tokens, false))
			}
		})
	}
}

// TestRLTrainsTheTurnEnd: for every template family, an RL choice that ended on its
// end-of-turn token trains that token even when the choice does not carry it (no logprobs,
// or logprobs without the stop token); a choice cut by max_tokens or a stop string does not.
func TestRLTrainsTheTurnEnd(t *testing.T) {
	user := json.RawMessage(`{"role":"user","content":"Capital of Peru?"}`)
	for name, c := range turnEndCases(t) {
		t.Run(name, func(t *testing.T) {
			chat, eot := familyChat(t, c.src, c.fam)
			answer := chat.Tok.Encode("Lima.", false)
			var entries []map[string]any
			for _, id := range answer {
				entries = append(entries, map[string]any{"token": chat.Tok.Decode([]int{id}, false), "logprob": -0.5})
			}
			for _, tc := range []struct {
				name   string
				choice map[string]any
				want   bool
			}{
				{"no logprobs", map[string]any{"finish_reason": "stop"}, true},
				{"logprobs without the stop", map[string]any{"finish_reason": "stop", "stop_reason": nil, "logprobs": map[string]any{"content": entries}}, true},
				{"token_ids without the stop", map[string]any{"finish_reason": "stop", "token_ids": answer}, true},
				{"length", map[string]any{"finish_reason": "length"}, false},
				{"stop string", map[string]any{"finish_reason": "stop", "stop_reason": "###"}, false},
			} {
				tc.choice["index"] = 0
				tc.choice["message"] = map[string]any{"role": "assistant", "content": "Lima."}
				b, _ := json.Marshal(tc.choice)
				s, err := chat.TokenizeTrajectory([]json.RawMessage{user, b}, nil, true)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				var sampled []int
				for i, sm := range s.Sampled {
					if sm {
						sampled = append(sampled, s.Tokens[i])
					}
				}
				endsTurn := len(sampled) > 0 && sampled[len(sampled)-1] == eot
				if endsTurn != tc.want || len(sampled) < len(answer) {
					t.Errorf("%s: sampled %v (%q), end of turn %d learned: %v, want %v", tc.name, sampled, chat.Tok.Decode(sampled, false), eot, endsTurn, tc.want)
				}
				if txt := chat.Tok.Decode(s.Tokens, false); txt != renderedTurn(t, chat, user) {
					t.Errorf("%s: the sequence %q is not the rendered conversation", tc.name, txt)
				}
			}
		})
	}
}

// renderedTurn is the conversation user + "Lima." as the template renders it.
func renderedTurn(t *testing.T, chat *ChatTokenizer, user json.RawMessage) string {
	t.Helper()
	msgs, _ := json.Marshal([]json.RawMessage{user, json.RawMessage(`{"role":"assistant","content":"Lima."}`)})
	out, err := chat.Template.Render(chattemplate.Input{Messages: msgs, SpecialTokens: chat.Special})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

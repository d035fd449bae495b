package trainingdata

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

var fuzzChat struct {
	once sync.Once
	c    *ChatTokenizer
	err  error
}

// chatForFuzz loads the tiny Llama's chat template and tokenizer once per process.
func chatForFuzz(t testing.TB) *ChatTokenizer {
	fuzzChat.once.Do(func() {
		fuzzChat.c, fuzzChat.err = LoadChat(tinyDir(t, "llama", 0.02))
	})
	if fuzzChat.err != nil {
		t.Fatal(fuzzChat.err)
	}
	return fuzzChat.c
}

// FuzzReadSFT: any input is either examples whose masks and tokens line up and whose ids
// are in the vocabulary, or an error naming a line.
func FuzzReadSFT(f *testing.F) {
	f.Add(capitals)
	f.Add("{\"messages\": 3}\n")
	f.Add("{\"messages\":[{\"role\":\"assistant\",\"content\":\"\"}]}\n\n")
	f.Add(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`)
	f.Add("[1,2]\n")
	f.Fuzz(func(t *testing.T, data string) {
		c := chatForFuzz(t)
		xs, err := ReadSFT(strings.NewReader(data), c, "all")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && !strings.Contains(err.Error(), "no examples") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, x := range xs {
			if len(x.Tokens) != len(x.Train) {
				t.Fatalf("%d tokens, %d mask entries", len(x.Tokens), len(x.Train))
			}
			for _, id := range x.Tokens {
				if id < 0 || id >= c.Tok.VocabSize() {
					t.Fatalf("token id %d out of the vocabulary", id)
				}
			}
		}
	})
}

// FuzzTrajectory: any trajectory JSON (messages and choices, or exchanges) is either
// normalised and tokenised into ids inside the vocabulary with one sampled flag and one
// logprob per token, or rejected with an error.
func FuzzTrajectory(f *testing.F) {
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"finish_reason":"stop","message":{"role":"assistant","content":"yes"},"logprobs":{"content":[{"token":"yes","logprob":-0.5}]}}],"reward":1}`, false)
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"message":{"role":"assistant","content":"ab"},"token_ids":[3,4],"logprobs":{"content":[{"token":"token_id:3","logprob":-1},{"token":"token_id:4","logprob":-2}]}}],"reward":0}`, false)
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"message":{"role":"assistant","content":"ab"},"token_ids":[999999999]}],"reward":0}`, true)
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"message":{"role":"assistant","content":"x"},"token_ids":[-1],"logprobs":{"content":[{"token":"x","logprob":-1}]}}],"reward":0}`, false)
	f.Add(`{"messages_and_choices":[3]}`, true)
	// Logprobs entries as a plain OpenAI client gets them: parts of characters as U+FFFD.
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"message":{"role":"assistant","content":"aé\ufffdb"},"logprobs":{"content":[{"token":"a","logprob":-1,"bytes":[97]},{"token":"\ufffd","logprob":-2,"bytes":[239,191,189]},{"token":"\ufffd","logprob":-2,"bytes":[239,191,189]},{"token":"\ufffd","logprob":-3,"bytes":[239,191,189]},{"token":"b","logprob":-1}]}}]}`, false)
	f.Add(`{"messages_and_choices":[{"role":"user","content":"hi"},{"message":{"role":"assistant","content":""},"logprobs":{"content":[{"token":"","logprob":-1,"bytes":[]},{"token":"Ġthe","logprob":-1},{"token":"bytes:\\x9c","logprob":-1,"bytes":[156]}]}}]}`, false)
	// ART's capture API: exchanges, no messages_and_choices, reward left out.
	f.Add(`{"exchanges":{"chat_completions":[{"request":{"messages":[{"role":"user","content":"hi"}]},"response":{"choices":[{"message":{"role":"assistant","content":"yo"},"logprobs":{"content":[{"token":"yo","logprob":-1}]}}]},"start_time":"2026-01-01T00:00:00"},{"request":{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"and?"}]},"response":{"choices":[{"message":{"role":"assistant","content":"so"},"token_ids":[5]}]},"start_time":"2026-01-01T00:00:01"}]}}`, false)
	f.Fuzz(func(t *testing.T, data string, allow bool) {
		c := chatForFuzz(t)
		var tr Trajectory
		if json.Unmarshal([]byte(data), &tr) != nil {
			return
		}
		if tr.Normalize() != nil {
			return
		}
		if len(tr.MessagesAndChoices) == 0 || tr.Exchanges != nil {
			t.Fatalf("normalised to %+v", tr)
		}
		for _, h := range tr.Histories() {
			s, err := c.TokenizeTrajectory(h.MessagesAndChoices, h.Tools, allow)
			if err != nil {
				continue
			}
			n := len(s.Tokens)
			if len(s.Sampled) != n || len(s.OldLogp) != n {
				t.Fatalf("%d tokens, %d sampled flags, %d logprobs", n, len(s.Sampled), len(s.OldLogp))
			}
			for _, id := range s.Tokens {
				if id < 0 || id >= max(c.Vocab, c.Tok.VocabSize()) {
					t.Fatalf("token id %d out of the vocabulary", id)
				}
			}
		}
	})
}

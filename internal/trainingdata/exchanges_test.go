package trainingdata

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// exchange builds a recorded chat completion: request messages (JSON list), replies, start.
func exchange(msgs string, start string, replies ...string) string {
	var choices []string
	for i, r := range replies {
		choices = append(choices, fmt.Sprintf(`{"index":%d,"finish_reason":"stop","message":{"role":"assistant","content":%q,"refusal":null,"tool_calls":null},"logprobs":null}`, i, r))
	}
	return fmt.Sprintf(`{"request":{"model":"m","messages":%s},"response":{"id":"c","object":"chat.completion","model":"m","choices":[%s]},"start_time":%q,"end_time":%q,"model":"m"}`,
		msgs, strings.Join(choices, ","), start, start)
}

// conv renders histories as role:text lists, choices marked with *.
func conv(t *testing.T, tr Trajectory) []string {
	t.Helper()
	var out []string
	for _, h := range append([]History{{MessagesAndChoices: tr.MessagesAndChoices, Tools: tr.Tools}}, tr.AdditionalHistories...) {
		var parts []string
		for _, raw := range h.MessagesAndChoices {
			var m struct {
				Role    string
				Content string
				Message *struct{ Content string }
			}
			json.Unmarshal(raw, &m)
			if m.Message != nil {
				parts = append(parts, "*"+m.Message.Content)
			} else {
				parts = append(parts, m.Role+":"+m.Content)
			}
		}
		if len(h.Tools) > 0 {
			parts = append(parts, "tools")
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

// TestExchangesToHistories: exchanges recorded by ART's capture API become conversations:
// a request that sends back an earlier reply continues that conversation (whatever the
// order they are listed in, and with the SDK's null fields on the message sent back);
// requests that do not, other tools, and the other choices of a response start their own.
func TestExchangesToHistories(t *testing.T) {
	u1 := `{"role":"user","content":"hi"}`
	turn2 := `[` + u1 + `,{"role":"assistant","content":"hello","refusal":null,"annotations":[]},{"role":"user","content":"more"}]`
	cases := []struct {
		name, exchanges string
		want            []string
	}{
		{"two turns", exchange(`[`+u1+`]`, "2026-01-01T00:00:01", "hello") + "," + exchange(turn2, "2026-01-01T00:00:02", "sure"),
			[]string{"user:hi *hello user:more *sure"}},
		{"listed out of order", exchange(turn2, "2026-01-01T00:00:02.5+00:00", "sure") + "," + exchange(`[`+u1+`]`, "2026-01-01T00:00:01.25+00:00", "hello"),
			[]string{"user:hi *hello user:more *sure"}},
		{"two conversations", exchange(`[`+u1+`]`, "2026-01-01T00:00:01", "hello") + "," + exchange(`[{"role":"user","content":"other"}]`, "2026-01-01T00:00:02", "x"),
			[]string{"user:hi *hello", "user:other *x"}},
		{"n=2, the first continued", exchange(`[`+u1+`]`, "2026-01-01T00:00:01", "hello", "hey") + "," + exchange(turn2, "2026-01-01T00:00:02", "sure"),
			[]string{"user:hi *hey", "user:hi *hello user:more *sure"}},
		{"branches", exchange(`[`+u1+`]`, "2026-01-01T00:00:01", "hello") + "," + exchange(turn2, "2026-01-01T00:00:02", "a") + "," + exchange(turn2, "2026-01-01T00:00:03", "b"),
			[]string{"user:hi *hello user:more *a", "user:hi *hello user:more *b"}},
		{"other tools", exchange(`[`+u1+`]`, "2026-01-01T00:00:01", "hello") + "," + strings.Replace(exchange(turn2, "2026-01-01T00:00:02", "sure"), `"model":"m","messages"`, `"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"messages"`, 1),
			[]string{"user:hi *hello", "user:hi assistant:hello user:more *sure tools"}},
	}
	for _, c := range cases {
		var tr Trajectory
		if err := json.Unmarshal([]byte(`{"exchanges":{"chat_completions":[`+c.exchanges+`],"completions":[],"responses":[],"messages":[]}}`), &tr); err != nil {
			t.Fatal(err)
		}
		if err := tr.Normalize(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := conv(t, tr); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if tr.Reward != 0 || tr.Exchanges != nil {
			t.Errorf("%s: reward %v, exchanges %v", c.name, tr.Reward, tr.Exchanges)
		}
	}
	for _, c := range []struct{ traj, field string }{
		{`{"reward":1}`, "messages_and_choices"},
		{`{"exchanges":{"chat_completions":[],"messages":[{}]}}`, "exchanges.messages"},
		{`{"exchanges":{"chat_completions":[` + exchange(`[`+u1+`]`, "", "x") + `]},"messages_and_choices":[` + u1 + `]}`, "exchanges"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[]},"response":{"choices":[{}]}}]}}`, "exchanges.chat_completions[0].request.messages"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[{"content":"x"}]},"response":{"choices":[{}]}}]}}`, "exchanges.chat_completions[0].request.messages[0]"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[` + u1 + `]},"response":{"choices":[{"index":0}]}}]}}`, "exchanges.chat_completions[0].response.choices[0].message"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[` + u1 + `]},"response":"oops"}]}}`, "exchanges.chat_completions[0].response"},
	} {
		var tr Trajectory
		if err := json.Unmarshal([]byte(c.traj), &tr); err != nil {
			t.Fatal(err)
		}
		var fe *FieldError
		if err := tr.Normalize(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want an error on %s", c.traj, err, c.field)
		}
	}
}

// TestTrajectoryJSON: a missing reward is 0.0; boolean metrics are 1 and 0.
func TestTrajectoryJSON(t *testing.T) {
	var tr Trajectory
	if err := json.Unmarshal([]byte(`{"messages_and_choices":[],"metrics":{"correct":true,"wrong":false,"n":3}}`), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Reward != 0 || tr.Metrics["correct"] != 1 || tr.Metrics["wrong"] != 0 || tr.Metrics["n"] != 3 {
		t.Fatalf("%+v", tr)
	}
	if err := json.Unmarshal([]byte(`{"metrics":{"m":"x"}}`), &tr); err == nil || !strings.Contains(err.Error(), `"m"`) {
		t.Fatalf("string metric: %v", err)
	}
}

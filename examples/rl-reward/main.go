// Command rl-reward samples answers from a Hone server's chat completions and scores them
// with a programmatic reward, writing ART trajectory groups for `hone train rl --groups`.
//
//	go run ./examples/rl-reward --model local/demo/agent:latest --word Paris --out groups.json
//
// Reward: 1 when the reply contains --word, else a small bonus for short replies. Each prompt
// becomes one group of --n samples (with logprobs and token ids, as RL needs).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	url := flag.String("url", envOr("HONE_URL", "http://127.0.0.1:8080"), "Hone server (env HONE_URL)")
	key := flag.String("key", os.Getenv("HONE_API_KEY"), "API key (default: ./hone-data/initial-api-key)")
	model := flag.String("model", "", "model to sample from, e.g. local/demo/agent:latest")
	word := flag.String("word", "Paris", "the reward is 1 when the reply contains this")
	n := flag.Int("n", 8, "samples per prompt")
	out := flag.String("out", "groups.json", "where to write the trajectory groups")
	flag.Parse()
	if *key == "" {
		b, err := os.ReadFile(filepath.Join("hone-data", "initial-api-key"))
		if err != nil {
			fail("no API key: pass --key or run next to hone-data")
		}
		*key = strings.TrimSpace(string(b))
	}
	prompts := []string{"What is the capital of France?", "Name the French capital.", "Which city is France's capital?"}
	var groups []map[string]any
	total, hits := 0, 0
	for i, p := range prompts {
		msgs := []map[string]string{{"role": "user", "content": p}}
		body, _ := json.Marshal(map[string]any{"model": *model, "messages": msgs, "n": *n, "max_tokens": 8, "seed": i,
			"temperature": 1, "logprobs": true, "return_token_ids": true})
		req, _ := http.NewRequest("POST", *url+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+*key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if errors.Is(err, syscall.ECONNREFUSED) {
			fail(fmt.Sprintf("no Hone server answers at %s: start one with `hone serve` (or `make run`), or pass --url", *url))
		}
		if err != nil {
			fail(err.Error())
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			fail(fmt.Sprintf("chat completions: %d %s", resp.StatusCode, raw))
		}
		var comp struct {
			Choices []json.RawMessage `json:"choices"`
		}
		json.Unmarshal(raw, &comp)
		var trajs []map[string]any
		for _, c := range comp.Choices {
			var ch struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			}
			json.Unmarshal(c, &ch)
			reward := 0.0
			if strings.Contains(ch.Message.Content, *word) {
				reward, hits = 1, hits+1
			} else if len(ch.Message.Content) < 8 {
				reward = 0.1
			}
			total++
			trajs = append(trajs, map[string]any{"messages_and_choices": []any{msgs[0], c}, "reward": reward})
		}
		groups = append(groups, map[string]any{"trajectories": trajs})
	}
	b, _ := json.Marshal(groups)
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fail(err.Error())
	}
	fmt.Printf("wrote %d groups to %s; mean reward %.2f (%d of %d replies contain %q)\n", len(groups), *out, float64(hits)/float64(total), hits, total, *word)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "rl-reward:", msg)
	os.Exit(1)
}

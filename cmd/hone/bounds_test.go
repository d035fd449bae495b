package main

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestChatBoundLongPrompt: a chat request whose prompt cannot fit the model's context is
// refused before the prompt is tokenised (which took about 40 bytes of memory per byte of
// prompt), and a body over the limit, declared or streamed, is a 413 in the error envelope.
func TestChatBoundLongPrompt(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--max-body-bytes", "40000000")
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"

	body := `{"model":"demo","messages":[{"role":"user","content":"` + strings.Repeat("hello world ", 30<<20/12) + `"}],"max_tokens":4}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, _, out := do(t, "POST", url, bearer, body)
	runtime.ReadMemStats(&after)
	if code != 400 || errParamOf(out) != "input_tokens" || !strings.Contains(string(out), "at least") {
		t.Fatalf("30 MB prompt: %d %.300s", code, out)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(12*len(body)) {
		t.Fatalf("a %d MB prompt allocated %d MB before it was refused", len(body)>>20, alloc>>20)
	}

	// Over the limit: declared, and streamed without a Content-Length.
	big := strings.Repeat("x", 41_000_000)
	for _, chunked := range []bool{false, true} {
		var rd io.Reader = strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"` + big + `"}]}`)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
		req, _ := http.NewRequest("POST", url, rd)
		req.Header.Set("Authorization", bearer)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), `"type":"RequestTooLargeError"`) || !strings.Contains(string(b), "40000000") {
			t.Fatalf("over-limit body (chunked %v): %d %.300s", chunked, resp.StatusCode, b)
		}
	}
}

func errParamOf(body []byte) string {
	var env struct {
		Error struct {
			Param string `json:"param"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Error.Param
}

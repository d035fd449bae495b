package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestResponsesEndToEnd: POST /v1/responses over HTTP on the demo model: a message answer
// with its usage; a required function call (parallel calls off) and the turn after it with
// the call and its output as input items; a json_schema text format; a stream whose events
// come in order, numbered, each named in its event line, adding up to the final response;
// stored responses (read, input items, continued, private to their entity, deleted); and the
// 4xx, naming the Responses request's fields.
func TestResponsesEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/responses"
	post := func(body string) map[string]any {
		t.Helper()
		code, _, b := do(t, "POST", url, bearer, body)
		return jsonOf(t, code, b, 200)
	}
	outputText := func(r map[string]any) string {
		var b strings.Builder
		for _, o := range r["output"].([]any) {
			item := o.(map[string]any)
			if item["type"] == "message" {
				for _, c := range item["content"].([]any) {
					b.WriteString(c.(map[string]any)["text"].(string))
				}
			}
		}
		return b.String()
	}

	r := post(`{"model":"demo","input":"Hello","instructions":"Be brief.","max_output_tokens":5,"seed":1}`)
	usage, _ := r["usage"].(map[string]any)
	if r["object"] != "response" || !strings.HasPrefix(r["id"].(string), "resp_") || (r["status"] != "completed" && r["status"] != "incomplete") ||
		usage == nil || usage["output_tokens"].(float64) < 1 || usage["total_tokens"].(float64) != usage["input_tokens"].(float64)+usage["output_tokens"].(float64) ||
		r["output"].([]any)[0].(map[string]any)["type"] != "message" || r["instructions"] != "Be brief." {
		t.Fatalf("response %v", r)
	}
	if r["status"] == "incomplete" && r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("incomplete without its reason: %v", r)
	}

	tools := `[{"type":"function","name":"get_weather","description":"The weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"],"additionalProperties":false},"strict":true}]`
	r = post(`{"model":"demo","input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}],"tools":` + tools + `,"tool_choice":"required","parallel_tool_calls":false,"max_output_tokens":200}`)
	out := r["output"].([]any)
	call := out[len(out)-1].(map[string]any)
	var args map[string]string
	if r["status"] != "completed" || call["type"] != "function_call" || call["name"] != "get_weather" || !strings.HasPrefix(call["call_id"].(string), "call_") ||
		json.Unmarshal([]byte(call["arguments"].(string)), &args) != nil || (args["city"] != "Paris" && args["city"] != "Rome") {
		t.Fatalf("function call: %v", r)
	}
	next, _ := json.Marshal([]any{
		map[string]any{"role": "user", "content": "Weather in Paris?"},
		map[string]any{"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": call["arguments"]},
		map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
	})
	r = post(`{"model":"demo","input":` + string(next) + `,"tools":` + tools + `,"max_output_tokens":4}`)
	if len(r["output"].([]any)) == 0 {
		t.Fatalf("the turn after the call: %v", r)
	}

	r = post(`{"model":"demo","input":"Pick","max_output_tokens":200,"text":{"format":{"type":"json_schema","name":"pick","strict":true,"schema":{"type":"object","properties":{"c":{"type":"string","enum":["a","b"]}},"required":["c"],"additionalProperties":false}}}}`)
	var pick map[string]string
	if err := json.Unmarshal([]byte(outputText(r)), &pick); err != nil || (pick["c"] != "a" && pick["c"] != "b") {
		t.Fatalf("json_schema format: %q (%v)", outputText(r), err)
	}

	// A stream.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"demo","input":"Hello","max_output_tokens":6,"stream":true,"temperature":0}`))
	req.Header.Set("Authorization", bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var deltas strings.Builder
	var last map[string]any
	event := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		if ev["type"] != event || ev["sequence_number"] != float64(len(types)) {
			t.Fatalf("event %d: line %q, data %v", len(types), event, ev)
		}
		types = append(types, event)
		if event == "response.output_text.delta" {
			deltas.WriteString(ev["delta"].(string))
		}
		last = ev
	}
	end := types[len(types)-1]
	if len(types) < 8 || types[0] != "response.created" || types[1] != "response.in_progress" || types[2] != "response.output_item.added" ||
		types[3] != "response.content_part.added" || (end != "response.completed" && end != "response.incomplete") {
		t.Fatalf("events %v", types)
	}
	if final := last["response"].(map[string]any); outputText(final) != deltas.String() || final["usage"] == nil {
		t.Fatalf("the deltas %q, the final response %v", deltas.String(), final)
	}

	// Stored responses: read back, their input items, continued with previous_response_id
	// (the stored conversation goes before the new input), private to their entity, deleted;
	// store false keeps nothing.
	first := post(`{"model":"demo","input":"My name is Ada.","instructions":"Be brief.","max_output_tokens":3,"seed":2}`)
	id := first["id"].(string)
	code, _, b := do(t, "GET", url+"/"+id, bearer, "")
	if got := jsonOf(t, code, b, 200); got["id"] != id || outputText(got) != outputText(first) {
		t.Fatalf("stored %v, answered %v", got, first)
	}
	code, _, b = do(t, "GET", url+"/"+id+"/input_items", bearer, "")
	items := jsonOf(t, code, b, 200)["data"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "My name is Ada." {
		t.Fatalf("input items %v", items)
	}
	second := post(`{"model":"demo","input":"What is my name?","previous_response_id":"` + id + `","max_output_tokens":3}`)
	u1, u2 := first["usage"].(map[string]any), second["usage"].(map[string]any)
	alone := post(`{"model":"demo","input":"What is my name?","max_output_tokens":3}`)["usage"].(map[string]any)
	if second["previous_response_id"] != id || u2["input_tokens"].(float64) < alone["input_tokens"].(float64)+u1["output_tokens"].(float64)+4 {
		t.Fatalf("continued: %v input tokens, alone %v, the first response's output %v", u2["input_tokens"], alone["input_tokens"], u1["output_tokens"])
	}
	var keys bytes.Buffer
	if c := runKeys(context.Background(), []string{"create", "--data", dir, "--entity", "other"}, &keys, io.Discard); c != 0 {
		t.Fatal("keys create failed")
	}
	lines := strings.Split(strings.TrimSpace(keys.String()), "\n")
	otherKey := "Bearer " + lines[len(lines)-1]
	if code, _, b := do(t, "GET", url+"/"+id, otherKey, ""); code != 404 {
		t.Fatalf("another entity read the response: %d %s", code, b)
	}
	if code, _, b := do(t, "POST", url, otherKey, `{"model":"demo","input":"x","previous_response_id":"`+id+`"}`); code != 404 || *envelope(t, b).Param != "previous_response_id" {
		t.Fatalf("another entity continued the response: %d %s", code, b)
	}
	unstored := post(`{"model":"demo","input":"x","max_output_tokens":2,"store":false}`)
	if code, _, _ := do(t, "GET", url+"/"+unstored["id"].(string), bearer, ""); code != 404 {
		t.Fatalf("store false was stored: %d", code)
	}
	code, _, b = do(t, "DELETE", url+"/"+id, bearer, "")
	if got := jsonOf(t, code, b, 200); got["deleted"] != true {
		t.Fatalf("delete: %v", got)
	}
	if code, _, _ := do(t, "GET", url+"/"+id, bearer, ""); code != 404 {
		t.Fatalf("after delete: %d", code)
	}

	for _, tc := range []struct{ body, param string }{
		{`{"model":"demo"}`, "input"},
		{`{"model":"demo","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"demo","input":"x","conversation":"conv_1"}`, "conversation"},
		{`{"model":"demo","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
		{`{"model":"demo","input":[{"type":"web_search_call"}]}`, "input[0].type"},
		{`{"model":"demo","input":[{"role":"robot","content":"x"}]}`, "input[0].role"},
		{`{"model":"demo","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"demo","input":"x","tool_choice":{"type":"mcp"}}`, "tool_choice"},
		{`{"model":"demo","input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type"},
		{`{"model":"demo","input":"x","max_output_tokens":0}`, "max_output_tokens"},
		{`{"model":"demo","input":"x","text":{"format":{"type":"json_schema"}}}`, "text.format.schema"},
		{`{"model":"nope","input":"x"}`, "model"},
	} {
		code, _, body := do(t, "POST", url, bearer, tc.body)
		if e := envelope(t, body); code/100 != 4 || e.Param == nil || *e.Param != tc.param {
			t.Errorf("%s: %d %s", tc.body, code, body)
		}
	}
}

// TestResponsesExpire: a start with --responses-retention deletes the stored responses older
// than it; the default keeps a fresh one.
func TestResponsesExpire(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	code, _, b := do(t, "POST", s.url+"/v1/responses", bearer, `{"model":"demo","input":"x","max_output_tokens":2}`)
	id := jsonOf(t, code, b, 200)["id"].(string)
	if code := s.stop(t); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	s = startServer(t, dir)
	if code, _, _ := do(t, "GET", s.url+"/v1/responses/"+id, bearer, ""); code != 200 {
		t.Fatalf("kept by the default retention: %d", code)
	}
	s.stop(t)
	s = startServer(t, dir, "--responses-retention", "1ms")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, _ := do(t, "GET", s.url+"/v1/responses/"+id, bearer, "")
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not expired: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

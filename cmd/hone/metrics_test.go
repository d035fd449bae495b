package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	common "go.opentelemetry.io/proto/otlp/common/v1"
)

// scrape reads url's metrics with Prometheus's own scrape parser (model/textparse): each
// series by metric name, its labels and value.
func scrape(t *testing.T, url, authz string) map[string][]scraped {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	p, err := textparse.New(body, resp.Header.Get("Content-Type"), labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil || p == nil {
		t.Fatalf("no parser for %q: %v", resp.Header.Get("Content-Type"), err)
	}
	out := map[string][]scraped{}
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parsing the scrape: %v\n%s", err, body)
		}
		if e != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		var ls labels.Labels
		p.Labels(&ls)
		name := ls.Get(labels.MetricName)
		out[name] = append(out[name], scraped{ls, v})
	}
	return out
}

type scraped struct {
	labels labels.Labels
	value  float64
}

// value is the value of the series of name whose labels include want (name=value pairs).
func value(t *testing.T, m map[string][]scraped, name string, want ...string) float64 {
	t.Helper()
	for _, s := range m[name] {
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels.Get(want[i]) != want[i+1] {
				ok = false
			}
		}
		if ok {
			return s.value
		}
	}
	t.Fatalf("no series %s%v among %d of that name", name, want, len(m[name]))
	return 0
}

// metricsAddr is the address a node printed for its metrics listener.
func metricsAddr(t *testing.T, stdout string) string {
	t.Helper()
	m := regexp.MustCompile(`Metrics on (http://\S+/metrics)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no metrics address in %q", stdout)
	}
	return m[1]
}

// TestMetricsScrape: a node with --metrics-addr and --metrics-on-api serves GET /metrics in
// Prometheus's text format: vLLM's serving metrics for a chat completion, the job queue, the
// trace store (an OTLP export and a query), the store's pool and errors, HTTP routes, Go and
// process metrics; read with Prometheus's scrape parser. The alerting rules of
// docs/deploy.md are valid Prometheus rules (rulefmt, PromQL's parser) and name only metrics
// the node serves. Both stores.
func TestMetricsScrape(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, append([]string{"--metrics-addr", "127.0.0.1:0", "--metrics-on-api", "--train-workers", "0"}, st.args...)...)
		key := initialKey(t, data)
		murl := metricsAddr(t, s.stdout.String())

		code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+key, `{"model":"demo","messages":[{"role":"user","content":"Hi there"}],"max_tokens":6,"ignore_eos":true}`)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		exp, _ := proto.Marshal(otelExport([]*common.KeyValue{otelStr("wandb.project", "m")}, otelSpan(1, 1, 0, "a"), otelSpan(1, 2, 1, "b")))
		if code, _, out := postOTel(t, s.url, exp, "Content-Type", "application/x-protobuf", "wandb-api-key", key); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
		if code, _, out := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/m"}`); code != 200 {
			t.Fatalf("%d %s", code, out)
		}

		m := scrape(t, murl, "")
		if v := value(t, m, "vllm:generation_tokens_total", "model_name", "demo", "engine", "0"); v < 6 {
			t.Errorf("generation tokens %v", v)
		}
		if v := value(t, m, "vllm:prompt_tokens_total", "model_name", "demo"); v <= 0 {
			t.Errorf("prompt tokens %v", v)
		}
		for _, h := range []string{"vllm:time_to_first_token_seconds_count", "vllm:e2e_request_latency_seconds_count", "vllm:request_generation_tokens_count",
			"vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count", "vllm:request_decode_time_seconds_count", "vllm:request_inference_time_seconds_count"} {
			if v := value(t, m, h, "model_name", "demo"); v != 1 {
				t.Errorf("%s = %v", h, v)
			}
		}
		if v := value(t, m, "vllm:inter_token_latency_seconds_count", "model_name", "demo"); v != 5 {
			t.Errorf("inter-token latencies %v, want 5 (6 tokens)", v)
		}
		if v := value(t, m, "vllm:kv_cache_usage_perc", "model_name", "demo"); v < 0 || v > 1 {
			t.Errorf("kv usage %v", v)
		}
		value(t, m, "vllm:num_requests_running", "model_name", "demo")
		value(t, m, "vllm:num_requests_waiting", "model_name", "demo")
		value(t, m, "vllm:prefix_cache_queries_total", "model_name", "demo")
		value(t, m, "vllm:prefix_cache_hits_total", "model_name", "demo")
		value(t, m, "vllm:spec_decode_num_accepted_tokens_total", "model_name", "demo")
		value(t, m, "hone:jobs", "kind", "sft", "status", "QUEUED")
		if v := value(t, m, "hone:trace_calls_ingested_total"); v < 2 { // the two spans
			t.Errorf("calls ingested %v", v)
		}
		value(t, m, "hone:trace_ingest_duration_seconds_count", "route", "/otel/v1/traces")
		value(t, m, "hone:trace_query_duration_seconds_count", "route", "/calls/stream_query")
		value(t, m, "hone:http_request_duration_seconds_count", "route", "/v1/chat/completions", "code", "200")
		value(t, m, "hone:store_errors_total", "kind", "unavailable")
		value(t, m, "go_sql_open_connections", "db_name", "writer")
		value(t, m, "go_goroutines")
		value(t, m, "process_resident_memory_bytes")

		// On the API port: behind a key.
		if code, _, _ := do(t, "GET", s.url+"/metrics", "", ""); code != 401 {
			t.Errorf("/metrics without a key: %d", code)
		}
		scrape(t, s.url+"/metrics", "Bearer "+key)
		scrape(t, s.url+"/metrics", "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+key)))

		checkDeployRules(t, m)
	})
	t.Run("off the API port by default", func(t *testing.T) {
		data := t.TempDir()
		s := startServer(t, data)
		if code, _, _ := do(t, "GET", s.url+"/metrics", "Bearer "+initialKey(t, data), ""); code != 404 {
			t.Fatalf("/metrics on the API port without --metrics-on-api: %d", code)
		}
		if strings.Contains(s.stdout.String(), "Metrics on") {
			t.Fatal("a metrics listener without --metrics-addr")
		}
	})
}

// TestMetricsWorker: hone worker --metrics-addr serves the queue's and the process's metrics.
func TestMetricsWorker(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data) // creates the store
	_ = s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- runWorker(ctx, []string{"--data", data, "--metrics-addr", "127.0.0.1:0", "--no-demo-model"}, out, io.Discard, ready)
	}()
	select {
	case <-ready:
	case code := <-done:
		t.Fatalf("worker exited %d: %s", code, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("worker did not start")
	}
	out.mu.Lock()
	stdout := out.String()
	out.mu.Unlock()
	m := scrape(t, metricsAddr(t, stdout), "")
	value(t, m, "hone:jobs", "kind", "rl", "status", "RUNNING")
	value(t, m, "go_goroutines")
	if len(m["vllm:num_requests_running"]) != 0 {
		t.Error("a worker serves no models")
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("worker exit %d", code)
	}
}

// checkDeployRules parses the Prometheus rules and scrape configuration that docs/deploy.md
// gives (its ```yaml blocks with `groups:` and `scrape_configs:`): the rules must be valid
// (rulefmt, which parses each expression with PromQL's parser) and every metric they name
// must be one the node served (a histogram's _bucket, _sum and _count included).
func checkDeployRules(t *testing.T, served map[string][]scraped) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	var rules, scrapeCfg []byte
	for _, b := range blocks {
		switch {
		case bytes.Contains(b[1], []byte("\ngroups:")) || bytes.HasPrefix(b[1], []byte("groups:")):
			rules = b[1]
		case bytes.Contains(b[1], []byte("scrape_configs:")):
			scrapeCfg = b[1]
		}
	}
	if rules == nil || scrapeCfg == nil {
		t.Fatal("docs/deploy.md has no rules (groups:) or scrape configuration (scrape_configs:) block")
	}
	promql := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(rules, false, model.UTF8Validation, promql, nil)
	if len(errs) > 0 {
		t.Fatalf("docs/deploy.md's rules: %v", errs)
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			expr, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				if len(served[vs.Name]) == 0 && vs.Name != "up" { // up is Prometheus's own
					t.Errorf("alert %s names %s, which the node does not serve", r.Alert, vs.Name)
				}
				return nil
			})
		}
	}
	if n < 4 {
		t.Errorf("%d alerts in docs/deploy.md", n)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
		RuleFiles []string `yaml:"rule_files"`
	}
	if err := yaml.Unmarshal(scrapeCfg, &cfg); err != nil || len(cfg.ScrapeConfigs) == 0 || len(cfg.ScrapeConfigs[0].StaticConfigs) == 0 {
		t.Fatalf("scrape configuration: %v %+v", err, cfg)
	}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("%s scrapes %s", sc.JobName, sc.MetricsPath)
		}
	}
}

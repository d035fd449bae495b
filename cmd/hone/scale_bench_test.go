package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db/dbtest"
)

// BenchmarkScaleOut: one `hone serve` node against two, on one PostgreSQL (docs/deploy.md,
// docs/performance.md "Two serving nodes"). The SmolLM2-135M-shaped bf16 model is registered
// once by name (`hone models register`) and loaded by both nodes. Each node is a process of
// the real binary with GOMAXPROCS=HONE_BENCH_NODE_PROCS (default 1), so that "two nodes"
// means twice the cores, as two machines would. Sub-benchmarks:
//
//   - chat/nodes=N: 32 concurrent streamed completions of 64 tokens (as BenchmarkChatServing),
//     spread over the N nodes; metric: aggregate completion tokens/s.
//   - ingest/nodes=N: 16 clients writing /call/start then /call/end for 3 s, spread over the N
//     nodes; metric: calls (start and end acknowledged) per second.
func BenchmarkScaleOut(b *testing.B) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		b.Skipf("%s is not set", dbtest.PostgresEnv)
	}
	procs := os.Getenv("HONE_BENCH_NODE_PROCS")
	if procs == "" {
		procs = "1"
	}
	bin := buildBinary(b)
	dsn := pgSchemaDSN(b)
	root := b.TempDir()
	var out, errb strings.Builder
	if rc := runModels([]string{"register", "--db", dsn, "--data", filepath.Join(root, "cli"), "smol", benchModelDir(b)}, &out, &errb); rc != 0 {
		b.Fatalf("register: %s", errb.String())
	}
	start := func(name string) string {
		dir := filepath.Join(root, name)
		cmd := exec.Command(bin, "serve", "--data", dir, "--addr", "127.0.0.1:0", "--log-level", "warn", "--db", dsn,
			"--train-workers", "0", "--no-demo-model", "--no-prefix-cache", "--max-running", "64", "--max-batch-tokens", "512",
			"--max-concurrent-per-key", "0")
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+procs)
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), "listening on "); ok {
				go io.Copy(io.Discard, stdout)
				return strings.TrimSpace(addr)
			}
		}
		b.Fatalf("node %s did not start", name)
		return ""
	}
	urls := []string{start("node-a"), start("node-b")}
	key := initialKey(b, filepath.Join(root, "node-a"))
	for _, u := range urls { // warm: the first request of each node
		if _, _, err := streamOnce(context.Background(), u, key, 4); err != nil {
			b.Fatal(err)
		}
	}
	for _, nodes := range []int{1, 2} {
		b.Run(fmt.Sprintf("chat/nodes=%d", nodes), func(b *testing.B) {
			const streams = 32
			var tokens atomic.Int64
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for k := 0; k < streams; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, n, err := streamOnce(context.Background(), urls[k%nodes], key, 64)
						if err != nil {
							b.Error(err)
						}
						tokens.Add(int64(n))
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(tokens.Load())/time.Since(t0).Seconds(), "tokens/s")
		})
		b.Run(fmt.Sprintf("ingest/nodes=%d", nodes), func(b *testing.B) {
			const clients = 16
			authz := basic("api", key)
			var calls atomic.Int64
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				deadline := t0.Add(3 * time.Second)
				var wg sync.WaitGroup
				for k := 0; k < clients; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c := newNoRetryClient()
						u := urls[k%nodes]
						for j := 0; time.Now().Before(deadline); j++ {
							id := fmt.Sprintf("n%d-i%d-c%d-%d", nodes, i, k, j)
							start := fmt.Sprintf(`{"start":{"project_id":"local/bench","id":%q,"trace_id":%q,"op_name":"op","started_at":"2025-01-01T00:00:00Z","attributes":{},"inputs":{"j":%d,"pad":%q}}}`, id, id, j, strings.Repeat("x", 256))
							if postStatus(c, u+"/call/start", authz, start) != 200 {
								b.Errorf("call/start on %s failed", u)
								return
							}
							end := fmt.Sprintf(`{"end":{"project_id":"local/bench","id":%q,"ended_at":"2025-01-01T00:00:01Z","output":%d,"summary":{}}}`, id, j)
							if postStatus(c, u+"/call/end", authz, end) == 200 {
								calls.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				elapsed += time.Since(t0)
			}
			b.ReportMetric(float64(calls.Load())/elapsed.Seconds(), "calls/s")
		})
	}
}

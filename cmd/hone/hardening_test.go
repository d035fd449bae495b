package main

// Issue 33's cases of the fuzz and fault suite (`go test ./cmd/hone/ -run 'Fuzz|Kill'`, both
// stores): bounded memory and disk, sizes past 2 GiB, overflow, jobs that make progress.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFuzzAdmissionOverflow sends chat, text completion and Responses requests whose n,
// best_of and max_tokens take every boundary value up to and past 2^63: each is answered
// below 500 in the envelope, and a value past its bound is a 400 naming its field (before,
// n of 2^63-1 with max_tokens 1 panicked in the engine's Submit: makechan size out of range).
func TestFuzzAdmissionOverflow(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--train-workers", "0", "--max-concurrent-per-key", "0",
			"--kv-blocks", "256", "--log-level", "error"}, st.args...)...)
		key := initialKey(t, dir)
		f := &fuzzer{t: t, store: st.name, url: s.url, bearer: "Bearer " + key, basic: basic("api", key),
			client: &http.Client{Timeout: 60 * time.Second},
			st:     fuzzStats{byStatus: map[int]int{}, seen5xx: map[string]bool{}}, maxFailureLogs: 40}
		values := []string{"-9223372036854775808", "-1", "0", "1", "2", "16384", "16385", "2147483648",
			"4611686018427387904", "9223372036854775807", "9223372036854775808", "1e400", "1.5"}
		// notInt reports whether v does not decode as an int64 (a decoding error naming the
		// field, before any validation); over whether it is past the bound of a field whose
		// largest legal value is max.
		notInt := func(v string) bool {
			var x int64
			_, err := fmt.Sscan(v, &x)
			return err != nil || fmt.Sprint(x) != v
		}
		over := func(v string, max int64) bool {
			var x int64
			if notInt(v) {
				return true
			}
			fmt.Sscan(v, &x)
			return x < 1 || x > max
		}
		check := func(route, path, body, field string, bad bool) {
			code, head := f.send(fuzzReq{route: "POST " + route, mutation: "admission: " + body, method: "POST", path: path,
				ctype: "application/json", body: []byte(body)}, f.bearer)
			if bad {
				if code != 400 {
					f.fail("%s %s: %d, want 400 naming %s: %.300s", route, body, code, field, head)
				} else if e := envelope(t, head); e.Param == nil || *e.Param != field {
					f.fail("%s %s: param %v, want %s: %.300s", route, body, e.Param, field, head)
				}
			}
		}
		for _, n := range values {
			for _, mt := range values {
				// Decoding goes first (in the body's order), then n is checked before
				// max_tokens (as vLLM does).
				nBad, mtBad := over(n, 16384), over(mt, 1<<62)
				chat := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"hi"}],"n":%s,"max_tokens":%s,"temperature":1}`, n, mt)
				cmpl := fmt.Sprintf(`{"model":"demo","prompt":"hi","n":%s,"max_tokens":%s,"temperature":1}`, n, mt)
				field := ""
				switch {
				case notInt(n):
					field = "n"
				case notInt(mt):
					field = "max_tokens"
				case nBad:
					field = "n"
				case mtBad:
					field = "max_tokens"
				}
				check("/v1/chat/completions", "/v1/chat/completions", chat, field, nBad || mtBad)
				check("/v1/completions", "/v1/completions", cmpl, field, nBad || mtBad)
			}
			// best_of past its bound, with n 1.
			check("/v1/completions", "/v1/completions", fmt.Sprintf(`{"model":"demo","prompt":"hi","best_of":%s,"max_tokens":1}`, n), "best_of", n != "1")
			check("/v1/chat/completions", "/v1/chat/completions", fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":%s}`, n), "max_completion_tokens", over(n, 1<<62))
			check("/v1/responses", "/v1/responses", fmt.Sprintf(`{"model":"demo","input":"hi","max_output_tokens":%s}`, n), "max_output_tokens", over(n, 1<<62))
		}
		// Several prompts of a text completion, each of n choices.
		check("/v1/completions", "/v1/completions", `{"model":"demo","prompt":["a","b","c","d"],"n":16384,"max_tokens":1,"temperature":1}`, "n", true)
		t.Logf("admission %s: %d requests, statuses %v", st.name, f.st.requests, f.st.byStatus)
		if code, _, body := do(t, "POST", s.url+"/v1/chat/completions", f.bearer, `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); code != 200 {
			t.Errorf("after the fuzz, chat: %d %s", code, body)
		}
	})
}

// TestFaultPgStartDescriptors starts a throwaway PostgreSQL with scripts/pg-start.sh while
// the caller holds a pipe's write end on descriptor 3 (as a lock or a pipe of whoever ran
// make test): once the script has exited the pipe's reader sees its end, and the server
// holds none of the caller's descriptors (before, the server kept every one it inherited for
// as long as it ran).
func TestFaultPgStartDescriptors(t *testing.T) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		skipOrFail(t, "PostgreSQL is not installed (scripts/test-setup.sh installs it)")
	}
	// Under root the server runs as postgres, which must reach its directory.
	root, err := os.MkdirTemp("", "hone-pgstart-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	pgdir := filepath.Join(root, "pg")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("../../scripts/pg-start.sh")
	cmd.Env = append(os.Environ(), "HONE_PG_DIR="+pgdir, fmt.Sprint("HONE_PG_PORT=", port))
	cmd.ExtraFiles = []*os.File{w} // descriptor 3
	out, err := cmd.Output()
	w.Close()
	stop := func() {
		c := exec.Command(bins[len(bins)-1], "-D", pgdir, "stop", "-m", "immediate")
		if os.Getuid() == 0 {
			c = exec.Command("runuser", "-u", "postgres", "--", bins[len(bins)-1], "-D", pgdir, "stop", "-m", "immediate")
		}
		_ = c.Run()
	}
	defer stop()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(pgdir, "log"))
		t.Fatalf("pg-start.sh: %v\n%s\nlog:\n%s", err, out, log)
	}
	if !strings.Contains(string(out), fmt.Sprintf("127.0.0.1:%d/hone_test", port)) {
		t.Fatalf("pg-start.sh printed %q", out)
	}
	// The pipe's last writer was the script (and whatever it started): EOF at once unless
	// the server holds it.
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(r); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server holds the caller's descriptor 3: its pipe never ends")
	}
	pid, err := os.ReadFile(filepath.Join(pgdir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%s/fd", strings.SplitN(string(pid), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%s/fd/%s", strings.SplitN(string(pid), "\n", 2)[0], fd.Name()))
		switch fd.Name() {
		case "0":
			if target != "/dev/null" {
				t.Errorf("the server's stdin is %s, want /dev/null", target)
			}
		case "1", "2":
			if target != filepath.Join(pgdir, "log") {
				t.Errorf("the server's descriptor %s is %s, want its log", fd.Name(), target)
			}
		}
		t.Logf("server descriptor %s -> %s", fd.Name(), target)
	}
}

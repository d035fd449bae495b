package main

// Issue 33's cases of the fuzz and fault suite (`go test ./cmd/hone/ -run 'Fuzz|Kill|Fault'`, both
// stores): bounded memory and disk, sizes past 2 GiB, overflow, jobs that make progress.

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
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

// storeOf opens, beside the running server, the store a fault test's server uses: its
// SQLite file in dir, or its PostgreSQL schema.
func storeOf(t *testing.T, dir string, st faultStore) *db.DB {
	t.Helper()
	dsn := filepath.Join(dir, "hone.db")
	if len(st.args) == 2 && st.args[0] == "--db" {
		dsn = st.args[1]
	}
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// runFileUploads creates a W&B run and asks createRunFiles for the upload URLs of names, as
// the wandb SDK does when it saves a run's files.
func runFileUploads(t *testing.T, url, key, project, run string, names []string) []string {
	t.Helper()
	const upsert = `mutation U($entity: String, $project: String, $name: String) {
		upsertBucket(input: {name: $name, modelName: $project, entityName: $entity}) { bucket { id } inserted } }`
	if _, errs := wandbGQL(t, url, key, upsert, map[string]any{"entity": "local", "project": project, "name": run}); errs != nil {
		t.Fatalf("upsertBucket: %v", errs)
	}
	const create = `mutation F($input: CreateRunFilesInput!) { createRunFiles(input: $input) { runID files { uploadUrl } } }`
	data, errs := wandbGQL(t, url, key, create, map[string]any{"input": map[string]any{"entityName": "local", "projectName": project, "runName": run, "files": names}})
	if errs != nil {
		t.Fatalf("createRunFiles: %v", errs)
	}
	files, _ := dig(data, "createRunFiles", "files").([]any)
	if len(files) != len(names) {
		t.Fatalf("createRunFiles answered %d files for %d names", len(files), len(names))
	}
	urls := make([]string, len(files))
	for i := range files {
		urls[i], _ = dig(files[i], "uploadUrl").(string)
	}
	return urls
}

// uploadLeftovers lists what a failed upload of body may have left: its file or blob, a
// blob name, a run file row, and temporary files under the data directory.
func uploadLeftovers(t *testing.T, d *db.DB, dir string, body []byte, runFile string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	sh := sha256.Sum256(body)
	m := md5.Sum(body)
	for q, arg := range map[string]string{
		`SELECT COUNT(*) FROM blobs WHERE hash = ?`:           hex.EncodeToString(sh[:]),
		`SELECT COUNT(*) FROM blob_chunks WHERE hash LIKE ?`:  "tmp-%",
		`SELECT COUNT(*) FROM blob_names WHERE name = ?`:      hex.EncodeToString(m[:]),
		`SELECT COUNT(*) FROM wandb_run_files WHERE name = ?`: runFile,
	} {
		var n int
		if err := d.QueryRow(ctx, q, arg).Scan(&n); err == nil && n > 0 {
			out = append(out, fmt.Sprintf("%s [%s]: %d", q, arg, n))
		}
	}
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if n := e.Name(); strings.HasPrefix(n, ".tmp-") || strings.HasPrefix(n, ".upload-") || n == hex.EncodeToString(m[:]) || n == hex.EncodeToString(sh[:]) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestFuzzUploadWholeOrNothing: W&B run file uploads over HTTP that fail after their bytes
// are in (the store refuses the file's row: a trigger) or whose client goes away half-way
// leave nothing behind on either store: no file, blob, name, row or temporary file; the same
// upload then succeeds whole (before, on PostgreSQL the blob and its name stayed: a 2 GiB
// run file failed to be recorded and left 2.4 GB in the database and 2 GB in the cache).
func TestFuzzUploadWholeOrNothing(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--train-workers", "0", "--log-level", "error"}, st.args...)...)
		key := initialKey(t, dir)
		d := storeOf(t, dir, st)
		body := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16+5) // 3 MiB and a bit: several chunks
		urls := runFileUploads(t, s.url, key, "p", "r", []string{"fail.bin", "cut.bin"})

		// The store refuses the row.
		failInserts(t, d, "wandb_run_files", true)
		if code, b := put(t, urls[0], body); code != 500 {
			t.Fatalf("an upload whose row is refused: %d %s", code, b)
		}
		if left := uploadLeftovers(t, d, dir, body, "fail.bin"); len(left) > 0 {
			t.Fatalf("a refused upload left: %v", left)
		}
		failInserts(t, d, "wandb_run_files", false)

		// The client goes away after 1 MiB of the 3 it announced.
		u, _ := url.Parse(urls[1])
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, len(body))
		conn.Write(body[:1<<20])
		time.Sleep(100 * time.Millisecond)
		conn.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := uploadLeftovers(t, d, dir, body, "cut.bin")
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an upload cut short left: %v", left)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// The same uploads now succeed, whole.
		for i, name := range []string{"fail.bin", "cut.bin"} {
			if code, b := put(t, urls[i], body); code != 200 {
				t.Fatalf("upload %s: %d %s", name, code, b)
			}
			var size int64
			if err := d.QueryRow(context.Background(), `SELECT size FROM wandb_run_files WHERE name = ?`, name).Scan(&size); err != nil || size != int64(len(body)) {
				t.Fatalf("%s recorded with %d bytes, %v", name, size, err)
			}
		}
		if st.name == "postgres" {
			// Every size column is 64-bit (PostgreSQL's INTEGER is 32).
			rows, err := d.Query(context.Background(), `SELECT table_name, column_name FROM information_schema.columns
				WHERE table_schema = current_schema() AND data_type = 'integer' AND (column_name LIKE '%size%' OR column_name LIKE '%bytes%')`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var tb, col string
				rows.Scan(&tb, &col)
				t.Errorf("%s.%s is a 32-bit INTEGER", tb, col)
			}
			rows.Close()
		}
	})
}

// failInserts makes every insert into table fail (on) or work again (off), with a trigger of
// the store: a fault of the database itself, after an upload's bytes are in.
func failInserts(t *testing.T, d *db.DB, table string, on bool) {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	switch {
	case on && d.Dialect() == db.Postgres:
		stmts = []string{`CREATE OR REPLACE FUNCTION hone_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER hone_test_fail BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION hone_test_fail()`}
	case on:
		stmts = []string{`CREATE TRIGGER hone_test_fail BEFORE INSERT ON ` + table + ` BEGIN SELECT RAISE(ABORT, 'injected fault'); END`}
	case d.Dialect() == db.Postgres:
		stmts = []string{`DROP TRIGGER hone_test_fail ON ` + table}
	default:
		stmts = []string{`DROP TRIGGER hone_test_fail`}
	}
	for _, q := range stmts {
		if _, err := d.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestKillServerMakingProgress: `kill -9` of `hone serve` four times during one SFT job, each
// run after the first resuming from the state the run before saved and saving further before
// it is killed: the job SUCCEEDS, every step trained once after its resume point, and each
// lost run's worker_lost event counts 0 runs in a row without progress. Before, the third
// kill failed the job ("the job's worker stopped responding 3 times; giving up").
func TestKillServerMakingProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		// Every step saves the state the next run goes on from; the default --job-max-attempts (3).
		args := append([]string{"--job-lease", "2s", "--sft-save-every", "1ms"}, st.args...)
		cmd, url, _ := startBinary(t, bin, dir, args...)
		s := &server{url: url}
		bearer := "Bearer " + initialKey(t, dir)
		job := newSFTJob(t, s, bearer, "progress", 60)
		const kills = 4
		for k := 1; k <= kills; k++ {
			// Run k saves two states, then its server is killed.
			deadline := time.Now().Add(2 * time.Minute)
			for {
				saved := 0
				for _, ev := range jobEventList(t, s, bearer, job) {
					if a, _ := ev["data"].(map[string]any)["attempt"].(float64); ev["type"] == "training_saved" && int(a) == k {
						saved++
					}
				}
				if saved >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %d saved %d states", k, saved)
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			cmd, url, _ = startBinary(t, bin, dir, args...)
			s.url = url
		}
		j := waitJob(t, s, bearer, job)
		evs := jobEventList(t, s, bearer, job)
		var lost []string
		for _, ev := range evs {
			if ev["type"] == "worker_lost" {
				d := ev["data"].(map[string]any)
				lost = append(lost, fmt.Sprintf("%v/%v", d["attempt"], d["attempts_without_progress"]))
			}
		}
		if j["status"] != "SUCCEEDED" || j["attempt"] != float64(kills+1) || strings.Join(lost, " ") != "1/0 2/0 3/0 4/0" {
			t.Fatalf("after %d kills: %v; worker_lost (attempt/without progress) %v", kills, j, lost)
		}
		if n := checkResumedSteps(t, evs, 3*60, true); n != kills {
			t.Fatalf("%d runs resumed, want %d", n, kills)
		}
	})
}

// TestFuzzQueueFairness: with --max-queue 8 --max-queue-per-key 4 --max-running 1, a text
// completion of 8 prompts is a 400 naming prompt (before, it took the whole waiting queue and
// every other key got 429 until it finished); while key A's share is taken by its own waiting
// sequences (2 prompts × n 2) its next request is a 429 naming --max-queue-per-key, and key C
// still gets in. createRunFiles of 50,000 names answers with one statement per 1,000 (its
// time logged: 44 s on PostgreSQL before, one delete and insert per name).
func TestFuzzQueueFairness(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--train-workers", "0", "--max-concurrent-per-key", "0", "--log-level", "error",
			"--max-queue", "8", "--max-queue-per-key", "4", "--max-running", "1"}, st.args...)...)
		keyA := initialKey(t, dir)
		var out bytes.Buffer
		if c := runKeys(context.Background(), append([]string{"create", "--data", dir, "--entity", "other"}, st.args...), &out, io.Discard); c != 0 {
			t.Fatal("keys create failed")
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		keyC := lines[len(lines)-1]
		// B, another key of A's entity: shares are per key.
		var out2 bytes.Buffer
		if c := runKeys(context.Background(), append([]string{"create", "--data", dir, "--entity", "local"}, st.args...), &out2, io.Discard); c != 0 {
			t.Fatal("keys create failed")
		}
		lines = strings.Split(strings.TrimSpace(out2.String()), "\n")
		keyB := lines[len(lines)-1]

		post := func(key, path, body string) (int, []byte) {
			code, _, b := do(t, "POST", s.url+path, "Bearer "+key, body)
			return code, b
		}
		// B: three long completions; one runs, two wait (B's share: 2 of 4).
		long := `{"model":"demo","prompt":"Once","max_tokens":1900,"ignore_eos":true,"temperature":1}`
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, b := post(keyB, "/v1/completions", long); code != 200 {
					t.Errorf("B's long completion: %d %.300s", code, b)
				}
			}()
		}
		waitQueue(t, s.url, keyA, "demo", 1, 2)
		// A: 8 prompts can never fit a share of 4.
		eight := `{"model":"demo","prompt":["a","b","c","d","e","f","g","h"],"max_tokens":1}`
		code, b := post(keyA, "/v1/completions", eight)
		if code != 400 || envelope(t, b).Param == nil || *envelope(t, b).Param != "prompt" || !strings.Contains(string(b), "--max-queue-per-key") {
			t.Fatalf("8 prompts: %d %s", code, b)
		}
		// A: 2 prompts × n 2 wait behind B's, taking A's share.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b := post(keyA, "/v1/completions", `{"model":"demo","prompt":["a","b"],"n":2,"max_tokens":2,"temperature":1}`); code != 200 {
				t.Errorf("A's completion: %d %.300s", code, b)
			}
		}()
		waitQueue(t, s.url, keyA, "demo", 1, 4) // B's two and A's two prompts (requests of n 2)
		code, b = post(keyA, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
		if code != 429 || !strings.Contains(string(b), "--max-queue-per-key") {
			t.Errorf("A over its share: %d %s", code, b)
		}
		// C gets in.
		if code, b := post(keyC, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); code != 200 {
			t.Errorf("C while A's share is full: %d %s", code, b)
		}
		wg.Wait()

		// createRunFiles of 50,000 names.
		names := make([]string, 50000)
		for i := range names {
			names[i] = fmt.Sprintf("files/f%05d.txt", i)
		}
		start := time.Now()
		urls := runFileUploads(t, s.url, keyA, "p", "r", names)
		t.Logf("%s: createRunFiles of %d names in %s", st.name, len(urls), time.Since(start).Round(time.Millisecond))
		if code, b := put(t, urls[len(urls)-1], []byte("last")); code != 200 {
			t.Fatalf("the last upload: %d %s", code, b)
		}
	})
}

// putSized sends body to an upload URL, announcing its length (Content-Length) or not
// (chunked), and returns the status and the answer.
func putSized(t *testing.T, url string, body []byte, announce bool) (int, []byte) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if !announce {
		rd = io.MultiReader(rd) // no length known: chunked
	}
	req, _ := http.NewRequest("PUT", url, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestFuzzUploadLimits: with --max-upload-size 1MiB --entity-quota 3MiB, a W&B upload over
// 1 MiB is a 413 naming --max-upload-size (announced or chunked), three of 1 MiB fill the
// quota and every further upload of the entity (W&B, training data, trace file) is a 403
// naming --entity-quota, with nothing of the refused ones kept; on PostgreSQL `hone blobs gc`
// counts the 3 MiB. Before, any key holder could fill the disk.
func TestFuzzUploadLimits(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--train-workers", "0", "--log-level", "error",
			"--max-upload-size", "1MiB", "--entity-quota", "3MiB"}, st.args...)...)
		key := initialKey(t, dir)
		urls := runFileUploads(t, s.url, key, "p", "r", []string{"big1", "big2", "a", "b", "c", "d"})
		refused := func(what string, code int, b []byte, status int, flag string) {
			t.Helper()
			if code != status || !strings.Contains(string(b), flag) {
				t.Fatalf("%s: %d %s", what, code, b)
			}
			if e := envelope(t, b); e.Param == nil || (*e.Param != "body" && *e.Param != "file") {
				t.Fatalf("%s: param %v", what, e.Param)
			}
		}
		over := bytes.Repeat([]byte("o"), 1<<20+1)
		code, b := putSized(t, urls[0], over, true)
		refused("announced over the limit", code, b, 413, "--max-upload-size")
		code, b = putSized(t, urls[1], over, false)
		refused("chunked over the limit", code, b, 413, "--max-upload-size")
		for i, c := range []byte("abc") {
			if code, b := putSized(t, urls[2+i], bytes.Repeat([]byte{c}, 1<<20), i%2 == 0); code != 200 {
				t.Fatalf("upload %d within the quota: %d %s", i, code, b)
			}
		}
		code, b = putSized(t, urls[5], []byte("d"), false)
		refused("W&B upload past the quota", code, b, 403, "--entity-quota")
		code, _, b = do(t, "POST", s.url+"/v1/preview/files", "Bearer "+key, sftData)
		refused("training data past the quota", code, b, 403, "--entity-quota")
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("project_id", "local/p")
		fw, _ := mw.CreateFormFile("file", "notes.txt")
		_, _ = fw.Write([]byte("a trace file"))
		mw.Close()
		req, _ := http.NewRequest("POST", s.url+"/file/create", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", basic("api", key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		refused("trace file past the quota", resp.StatusCode, b, 403, "--entity-quota")
		var left []string
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && (strings.HasPrefix(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), ".upload-")) {
				left = append(left, p)
			}
			return nil
		})
		if len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
		if st.name == "postgres" {
			var out bytes.Buffer
			if code := runBlobs(context.Background(), []string{"gc", "--db", st.args[1], "--data", dir}, &out, io.Discard); code != 0 {
				t.Fatalf("hone blobs gc: %d", code)
			}
			if !strings.Contains(out.String(), "entity local stores 3.0 MiB") {
				t.Fatalf("hone blobs gc: %s", out.String())
			}
		}
	})
}

// TestFuzzReadsBounded: the routes that read stored data share one memory budget and a
// per-key limit (--request-memory 16MiB --max-reads-per-key 4 here). 64 concurrent
// /refs/read_batch of one 256 KiB ref named 100 times from one key are each a 413 (past the
// batch's bound) or a 429 with Retry-After (past the key's limit); 32 from 32 keys naming 8
// distinct 256 KiB objects 12 times each are a 200, 413 or a 503 with Retry-After (the
// budget full past its wait), never more: the process's heap stays bounded; afterwards every
// route of the kind still answers. Before, 128 such requests took the server to 3.3 GB.
func TestFuzzReadsBounded(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--train-workers", "0", "--max-concurrent-per-key", "0", "--log-level", "error",
			"--request-memory", "16MiB", "--max-reads-per-key", "4"}, st.args...)...)
		key := initialKey(t, dir)
		keys := []string{key}
		for i := 1; i < 32; i++ {
			var out bytes.Buffer
			if c := runKeys(context.Background(), append([]string{"create", "--data", dir, "--entity", "local"}, st.args...), &out, io.Discard); c != 0 {
				t.Fatal("keys create failed")
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			keys = append(keys, lines[len(lines)-1])
		}
		var refs []string
		for i := 0; i < 8; i++ {
			obj := fmt.Sprintf(`{"obj":{"project_id":"local/amp","object_id":"big%d","val":{"v":%q}}}`, i, strings.Repeat(string(rune('A'+i)), 256<<10))
			code, _, b := do(t, "POST", s.url+"/obj/create", basic("api", key), obj)
			refs = append(refs, fmt.Sprintf("weave:///local/amp/object/big%d:%s", i, jsonOf(t, code, b, 200)["digest"]))
		}
		burst := func(n int, keyOf func(int) string, body string, allowed map[int]bool) map[int]int {
			var mu sync.Mutex
			codes := map[int]int{}
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", s.url+"/refs/read_batch", strings.NewReader(body))
					req.Header.Set("Authorization", basic("api", keyOf(i)))
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !allowed[resp.StatusCode] {
						t.Errorf("read_batch: %d %.300s", resp.StatusCode, b)
					}
					if resp.StatusCode == 429 || resp.StatusCode == 503 {
						if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "--") {
							t.Errorf("%d without Retry-After or the flag named: %s", resp.StatusCode, b)
						}
					}
					if resp.StatusCode >= 400 {
						if msg := checkEnvelope(resp, b); msg != "" {
							t.Errorf("%d not in the envelope (%s): %s", resp.StatusCode, msg, b)
						}
					}
					mu.Lock()
					codes[resp.StatusCode]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			return codes
		}
		heap := sampleHeap()
		same, _ := json.Marshal(map[string]any{"refs": slicesRepeat(refs[:1], 100)})
		c1 := burst(64, func(int) string { return key }, string(same), map[int]bool{413: true, 429: true, 503: true})
		distinct, _ := json.Marshal(map[string]any{"refs": slicesRepeat(refs, 12)})
		c2 := burst(32, func(i int) string { return keys[i] }, string(distinct), map[int]bool{200: true, 413: true, 503: true})
		peak := heap.Stop()
		t.Logf("%s: one key, one ref ×100: %v; 32 keys, 8 refs ×12: %v; peak heap %d MiB (server and test)", st.name, c1, c2, peak>>20)
		if peak > 384<<20 {
			t.Errorf("peak heap %d MiB", peak>>20)
		}
		// Every such route still answers.
		for path, body := range map[string]string{
			"/refs/read_batch": fmt.Sprintf(`{"refs":[%q]}`, refs[0]),
			"/obj/read":        `{"project_id":"local/amp","object_id":"big1","digest":"latest"}`,
			"/objs/query":      `{"project_id":"local/amp","limit":3}`,
			"/calls/query":     `{"project_id":"local/amp","limit":3}`,
		} {
			if code, _, b := do(t, "POST", s.url+path, basic("api", key), body); code != 200 {
				t.Errorf("%s after the bursts: %d %.300s", path, code, b)
			}
		}
	})
}

// slicesRepeat is xs repeated n times.
func slicesRepeat(xs []string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, xs...)
	}
	return out
}

// waitQueue waits until /v1/system-check's inference entry shows model's engine with running
// and waiting requests, so that a test orders its requests by the engine's state, not by time.
func waitQueue(t *testing.T, url, key, model string, running, waiting int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, _, b := do(t, "GET", url+"/v1/system-check", "Bearer "+key, "")
		var r struct {
			Inference struct {
				Models map[string]struct{ Running, Waiting int } `json:"models"`
			} `json:"inference"`
		}
		json.Unmarshal(b, &r)
		m := r.Inference.Models[model]
		if m.Running == running && m.Waiting == waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine of %s never had %d running and %d waiting: %s", model, running, waiting, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package main

import (
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db/dbtest"
)

// TestStoreConnectionLost: a node whose PostgreSQL connection is cut (a TCP proxy between it
// and the server stops, dropping every connection and refusing new ones) answers 503 in the
// error envelope on the routes that need the store, and answers again by itself once the
// server is reachable, without a restart.
func TestStoreConnectionLost(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL fault")
	}
	if os.Getenv(dbtest.PostgresEnv) == "" {
		skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
	}
	dsn := pgSchemaDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newTCPProxy(t, u.Host)
	u.Host = p.addr
	dir := t.TempDir()
	s := startServer(t, dir, "--db", u.String(), "--train-workers", "0")
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	routes := []struct{ method, path, authz, body string }{
		{"GET", "/v1/models", bearer, ""},
		{"GET", "/v1/preview/models", bearer, ""},
		{"POST", "/calls/query", basic("api", key), `{"project_id":"local/p"}`},
	}
	for _, r := range routes {
		if code, _, body := do(t, r.method, s.url+r.path, r.authz, r.body); code != 200 {
			t.Fatalf("%s %s before the fault: %d %s", r.method, r.path, code, body)
		}
	}
	p.down()
	for _, r := range routes {
		code, h, body := do(t, r.method, s.url+r.path, r.authz, r.body)
		if code != 503 {
			t.Fatalf("%s %s with the store unreachable: %d %s (want 503)", r.method, r.path, code, body)
		}
		if e := envelope(t, body); e.Code != 503 || h.Get("Retry-After") == "" {
			t.Fatalf("%s %s: %+v, Retry-After %q", r.method, r.path, e, h.Get("Retry-After"))
		}
	}
	p.up()
	back := time.Now()
	for _, r := range routes {
		for {
			code, _, body := do(t, r.method, s.url+r.path, r.authz, r.body)
			if code == 200 {
				break
			}
			if code != 503 || time.Since(back) > 15*time.Second {
				t.Fatalf("%s %s after the store came back: %d %s", r.method, r.path, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("answering again %.2fs after the store came back", time.Since(back).Seconds())
}

// tcpProxy forwards loopback connections to a server; down drops them all and refuses new
// ones, up listens again on the same address.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// TestStoreLostDuringTraining: the store is cut for two seconds while a node trains; once
// it is back the job still ends (the worker's writes fail while it is cut; the job runs again
// when its lease runs out if it must) and the node answers, without a restart.
func TestStoreLostDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL fault")
	}
	if os.Getenv(dbtest.PostgresEnv) == "" {
		skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
	}
	dsn := pgSchemaDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newTCPProxy(t, u.Host)
	u.Host = p.addr
	dir := t.TempDir()
	s := startServer(t, dir, "--db", u.String(), "--train-workers", "1", "--job-lease", "2s")
	bearer := "Bearer " + initialKey(t, dir)
	job := newSFTJob(t, s, bearer, "outage", 40)
	waitSteps(t, s, bearer, job, 0)
	p.down()
	time.Sleep(2 * time.Second)
	p.up()
	back := time.Now()
	var j map[string]any
	for {
		code, _, body := do(t, "GET", s.url+"/v1/preview/training-jobs/"+job, bearer, "")
		if code == 200 {
			j = jsonOf(t, code, body, 200)
			if st := j["status"]; st == "SUCCEEDED" || st == "FAILED" || st == "CANCELLED" {
				break
			}
		} else if code != 503 {
			t.Fatalf("job status after the outage: %d %s", code, body)
		}
		if time.Since(back) > 60*time.Second {
			t.Fatalf("the job did not end after the store came back: %v", j)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if j["status"] != "SUCCEEDED" {
		t.Fatalf("after a 2 s outage the job is %v", j)
	}
	types := jobEvents(t, s, bearer, job)
	t.Logf("a 2 s store outage mid-SFT: the job SUCCEEDED %.1fs after the store came back; %d gradient steps recorded, events %v",
		time.Since(back).Seconds(), count(types, "gradient_step"), dedupe(types))
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/outage:latest","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	if code != 200 {
		t.Fatalf("chat with the trained model after the outage: %d %s", code, body)
	}
}

// dedupe drops repeats that follow each other.
func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

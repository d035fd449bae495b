package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// digest is the hash a file must have: the LFS oid or the registry's digest (sha256), or
// the git blob id of a small file of a repository (gitsha1: SHA-1 of "blob SIZE\x00" and the
// content).
type digest struct {
	algo string // "sha256", "gitsha1", or "" (nothing published to check against)
	hex  string
}

func (d digest) String() string { return d.algo + ":" + d.hex }

func (d digest) newHash(size int64) hash.Hash {
	switch d.algo {
	case "sha256":
		return sha256.New()
	case "gitsha1":
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	}
	return nil
}

// blobSpec is one file to download into the cache.
type blobSpec struct {
	name string // the file's name in its repository or manifest, for messages
	url  string // where to ask for it
	size int64  // its size in bytes; -1 unknown
	sum  digest
	dest string // its path in the cache's blobs
	// locate is the method that finds where url sends the bytes without following a
	// redirect to another host (HEAD on the Hugging Face Hub, as huggingface_hub does; GET
	// on a registry); "" downloads from url itself.
	locate string
	// located is where url was found to send the bytes, when the caller asked already.
	located string
	// explain turns a failed answer into the error the user reads.
	explain func(*statusError) error
}

// chunk is a byte range [Off, End) of a download and how much of it is written (End -1:
// to the end of an answer of unknown length).
type chunk struct {
	Off  int64        `json:"off"`
	End  int64        `json:"end"`
	Done atomic.Int64 `json:"-"`
	Have int64        `json:"done"` // Done, as saved
}

// partState is what a partial download saved beside its bytes (FILE.incomplete.json): the
// file it is for and how far each range got, so that the next pull goes on from there.
type partState struct {
	Size   int64    `json:"size"`
	Digest string   `json:"digest"`
	Chunks []*chunk `json:"chunks"`
}

func (s *partState) done() int64 {
	var n int64
	for _, c := range s.Chunks {
		n += c.Done.Load()
	}
	return n
}

const (
	partSuffix  = ".incomplete"
	stateSuffix = ".incomplete.json"
)

// partialBytes is how much of dest an earlier pull left to go on from.
func partialBytes(dest string, size int64, sum digest) int64 {
	st := readState(dest+stateSuffix, size, sum)
	if st == nil {
		return 0
	}
	return st.done()
}

func readState(path string, size int64, sum digest) *partState {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var st partState
	if json.Unmarshal(b, &st) != nil || st.Size != size || st.Digest != sum.String() || len(st.Chunks) == 0 {
		return nil
	}
	for _, c := range st.Chunks {
		if c.Have < 0 || c.Off < 0 || (c.End >= 0 && c.Off+c.Have > c.End) {
			return nil
		}
		c.Done.Store(c.Have)
	}
	return &st
}

func writeState(path string, st *partState) error {
	for _, c := range st.Chunks {
		c.Have = c.Done.Load()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// chunks splits a file of size bytes into the ranges downloaded at once.
func (c *Client) chunks(size int64) []*chunk {
	if size < 0 {
		return []*chunk{{Off: 0, End: -1}}
	}
	n := int64(1)
	if size >= c.parallelMin() && c.connections() > 1 {
		each := c.ChunkSize
		if each <= 0 {
			// Twice as many ranges as connections, so that a slow one is not the tail.
			each = min(max(size/int64(2*c.connections()), 8<<20), 512<<20)
		}
		n = (size + each - 1) / each
	}
	out := make([]*chunk, n)
	each := (size + n - 1) / max(n, 1)
	for i := range out {
		off := int64(i) * each
		out[i] = &chunk{Off: off, End: min(off+each, size)}
	}
	return out
}

var errNoRanges = errors.New("the server does not answer ranges")

// fetch downloads b into the cache unless it is there: in parallel ranges when it is large,
// going on from what an interrupted pull left (FILE.incomplete and its .json), each range
// asked again after a cut connection or a 429/5xx; then checks its hash and moves it into
// place. A wrong hash or a full disk leaves nothing behind; an interruption leaves the part
// to go on from.
func (c *Client) fetch(ctx context.Context, b blobSpec) error {
	if _, err := os.Stat(b.dest); err == nil {
		return nil
	}
	dir := filepath.Dir(b.dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return c.diskErr(err, dir, b.size)
	}
	part, statePath := b.dest+partSuffix, b.dest+stateSuffix
	st := readState(statePath, b.size, b.sum)
	if st != nil {
		if fi, err := os.Stat(part); err != nil || (b.size >= 0 && fi.Size() > b.size) {
			st = nil
		}
	}
	if st == nil {
		os.Remove(part)
		st = &partState{Size: b.size, Digest: b.sum.String(), Chunks: c.chunks(b.size)}
	} else {
		c.log().Info("resuming a download", "file", b.name, "have_bytes", st.done(), "size_bytes", b.size)
	}
	drop := func() { os.Remove(part); os.Remove(statePath) }
	if b.size >= 0 {
		if free, err := c.free(dir); err == nil && free >= 0 && b.size-st.done() > free {
			drop()
			return diskFull(dir, b.size-st.done(), free)
		}
	}
	url := b.url
	if b.located != "" {
		url = b.located
	} else if b.locate != "" {
		loc, err := c.locateURL(ctx, b)
		if err != nil {
			return err
		}
		url = loc
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return c.diskErr(err, dir, b.size)
	}
	err = c.download(ctx, f, &b, url, st, statePath)
	if errors.Is(err, errNoRanges) {
		c.Meter.add(-st.done())
		st.Chunks = []*chunk{{Off: 0, End: b.size}}
		if b.size < 0 {
			st.Chunks[0].End = -1
		}
		err = c.download(ctx, f, &b, url, st, statePath)
	}
	if err == nil && b.size >= 0 {
		if got := st.done(); got != b.size {
			err = fmt.Errorf("%s: got %d bytes, want %d", b.name, got, b.size)
		}
	}
	if err == nil {
		err = c.verify(f, &b)
		if err != nil {
			f.Close()
			drop()
			return err
		}
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if isDiskFull(err) {
			drop()
			free, _ := c.free(dir)
			return diskFull(dir, b.size, free)
		}
		if werr := writeState(statePath, st); werr != nil {
			drop() // nothing to go on from
		}
		return err
	}
	if err := os.Rename(part, b.dest); err != nil {
		return err
	}
	os.Remove(statePath)
	syncDir(dir)
	return nil
}

// download fetches st's unfinished ranges into f, saving st to statePath every second.
func (c *Client) download(ctx context.Context, f *os.File, b *blobSpec, url string, st *partState, statePath string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pending []*chunk
	for _, ch := range st.Chunks {
		if ch.End < 0 || ch.Off+ch.Done.Load() < ch.End {
			pending = append(pending, ch)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	single := len(st.Chunks) == 1
	loc := &location{url: url}
	work := make(chan *chunk, len(pending))
	for _, ch := range pending {
		work <- ch
	}
	close(work)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(len(pending), c.connections()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ch := range work {
				if err := c.fetchRange(ctx, f, b, loc, ch, single); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = writeState(statePath, st)
			}
		}
	}()
	wg.Wait()
	cancel()
	<-saved
	return firstErr
}

// fetchAll fetches the blobs, Files of them at once; the first error stops the others.
func (c *Client) fetchAll(ctx context.Context, specs []blobSpec) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan blobSpec, len(specs))
	for _, b := range specs {
		work <- b
	}
	close(work)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range min(len(specs), c.files()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if err := c.fetchLocked(ctx, b); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// dropParts removes what the downloads of specs left to go on from.
func dropParts(specs []blobSpec) {
	for _, b := range specs {
		os.Remove(b.dest + partSuffix)
		os.Remove(b.dest + stateSuffix)
	}
}

// fetchLocked is fetch under a lock on the blob, so that two pulls of one model (two
// processes) do not write the same part: the second waits, then finds the blob there.
func (c *Client) fetchLocked(ctx context.Context, b blobSpec) error {
	unlock, err := c.lock(ctx, b.dest, b.name)
	if err != nil {
		return err
	}
	defer unlock()
	return c.fetch(ctx, b)
}

// checkSpace refuses a download of need bytes more than the disk under dir has free.
func (c *Client) checkSpace(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	d := dir
	for !fileExists(d) && filepath.Dir(d) != d {
		d = filepath.Dir(d)
	}
	if free, err := c.free(d); err == nil && free >= 0 && need > free {
		return diskFull(dir, need, free)
	}
	return nil
}

// location is the URL the ranges are asked from, asked again when a signed URL expires.
type location struct {
	mu        sync.Mutex
	url       string
	refreshed bool
}

func (l *location) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url
}

// fetchRange downloads ch into f, asking again (from where it got) after a cut connection
// or a 429/5xx, up to Retries times in a row without progress.
func (c *Client) fetchRange(ctx context.Context, f *os.File, b *blobSpec, loc *location, ch *chunk, single bool) error {
	tries := 0
	buf := make([]byte, 256<<10)
	for {
		start := ch.Off + ch.Done.Load()
		if ch.End >= 0 && start >= ch.End {
			return nil
		}
		url := loc.get()
		req, err := c.newRequest(ctx, "GET", url)
		if err != nil {
			return err
		}
		ranged := !single || start > 0
		if ranged {
			if ch.End >= 0 {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", start, ch.End-1))
			} else {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-", start))
			}
		}
		var wait time.Duration
		resp, err := c.HTTP.Do(req)
		progress := false
		if err == nil {
			switch {
			case resp.StatusCode == http.StatusPartialContent && ranged:
				if got := contentRangeStart(resp.Header.Get("Content-Range")); got != start {
					resp.Body.Close()
					return fmt.Errorf("%s: asked for bytes from %d, the server sent from %d", b.name, start, got)
				}
			case resp.StatusCode == http.StatusOK:
				if ranged && !single {
					resp.Body.Close()
					return errNoRanges
				}
				if ranged { // one stream: start again from the first byte
					c.Meter.add(-ch.Done.Load())
					ch.Done.Store(0)
					start = 0
				}
			case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
				resp.Body.Close()
				return fmt.Errorf("%s: the server refused the range from byte %d (416): the file changed on the hub; run the pull again", b.name, start)
			default:
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				se := newStatusError(resp, body)
				if (se.code == http.StatusForbidden || se.code == http.StatusUnauthorized || se.code == http.StatusGone) &&
					b.locate != "" && url != b.url && c.refresh(ctx, b, loc, url) {
					continue // a signed URL expired: asked again for a new one
				}
				if !se.retryable() {
					if b.explain != nil {
						return b.explain(se)
					}
					return se
				}
				err, wait = se, se.retryAfter
			}
		}
		if resp != nil && err == nil {
			var n int64
			n, err = c.copyAt(f, resp.Body, start, ch, b.name, buf)
			resp.Body.Close()
			progress = n > 0
			if err == nil {
				if ch.End < 0 { // an answer of unknown length, read to its end
					return nil
				}
				if start+n >= ch.End {
					return nil
				}
				err = io.ErrUnexpectedEOF
			}
			if isDiskFull(err) {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryableErr(err) {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		if progress {
			tries = 0
		}
		tries++
		if tries >= c.retries() {
			var se *statusError
			if errors.As(err, &se) && se.code == http.StatusTooManyRequests {
				return errorf(ErrRateLimited, "%s: the server answered 429 Too Many Requests %d times in a row; wait a while and run the pull again (it goes on from here)%s", b.name, tries, c.tokenHint(url))
			}
			return fmt.Errorf("%s: %w (after %d tries; run the pull again to go on from byte %d)", b.name, err, tries, ch.Off+ch.Done.Load())
		}
		c.log().Warn("download interrupted; asking again", "file", b.name, "from_byte", ch.Off+ch.Done.Load(), "try", tries, "err", err)
		if err := sleep(ctx, c.backoff(tries, wait)); err != nil {
			return err
		}
	}
}

// copyAt writes r into f from off, counting into ch and the meter; it stops at the end of ch.
func (c *Client) copyAt(f *os.File, r io.Reader, off int64, ch *chunk, name string, buf []byte) (int64, error) {
	var n int64
	for {
		want := len(buf)
		if ch.End >= 0 {
			want = int(min(int64(want), ch.End-off-n))
			if want <= 0 {
				return n, nil
			}
		}
		k, err := r.Read(buf[:want])
		if k > 0 {
			if c.writeHook != nil {
				if herr := c.writeHook(name, off+n, k); herr != nil {
					return n, herr
				}
			}
			if _, werr := f.WriteAt(buf[:k], off+n); werr != nil {
				return n, werr
			}
			n += int64(k)
			ch.Done.Add(int64(k))
			c.Meter.add(int64(k))
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// verify checks f's hash against b's digest.
func (c *Client) verify(f *os.File, b *blobSpec) error {
	size := b.size
	if size < 0 {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		size = fi.Size()
	}
	h := b.sum.newHash(size)
	if h == nil {
		return nil
	}
	c.Meter.setPhase("checking " + b.name)
	defer c.Meter.setPhase("")
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.sum.hex {
		what := "SHA-256"
		if b.sum.algo == "gitsha1" {
			what = "git blob id"
		}
		return errorf(ErrChecksum, "%s: the downloaded file's %s is %s, not the %s the hub publishes; it was removed: run the pull again (a proxy or mirror that alters files would cause this every time)", b.name, what, got, b.sum.hex)
	}
	return nil
}

// locateURL asks b.url where its bytes are (a redirect to a CDN) without following it.
func (c *Client) locateURL(ctx context.Context, b blobSpec) (string, error) {
	h := http.Header{}
	if b.locate == "GET" {
		h.Set("Range", "bytes=0-0")
	} else {
		h.Set("Accept-Encoding", "identity")
	}
	resp, err := c.request(ctx, b.locate, b.url, h, false)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && b.explain != nil {
			return "", b.explain(se)
		}
		return "", err
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		u, err := resp.Request.URL.Parse(loc)
		if err != nil {
			return "", fmt.Errorf("%s: a redirect to %q: %w", b.name, loc, err)
		}
		return u.String(), nil
	}
	return resp.Request.URL.String(), nil
}

// refresh asks for a new location once after a signed URL stopped working.
func (c *Client) refresh(ctx context.Context, b *blobSpec, loc *location, old string) bool {
	loc.mu.Lock()
	defer loc.mu.Unlock()
	if loc.url != old {
		return true // another range refreshed it
	}
	if loc.refreshed {
		return false
	}
	loc.refreshed = true
	u, err := c.locateURL(ctx, *b)
	if err != nil {
		return false
	}
	loc.url = u
	return true
}

// request sends one request, again after a cut connection or a 429/5xx; an answer of 400 or
// more is a *statusError. follow false keeps redirects to another host as the answer (same-host
// redirects, such as a renamed repository's, are followed).
func (c *Client) request(ctx context.Context, method, url string, h http.Header, follow bool) (*http.Response, error) {
	client := c.HTTP
	if !follow {
		cc := *c.HTTP
		cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			if req.URL.Host != via[0].URL.Host {
				return http.ErrUseLastResponse
			}
			return nil
		}
		client = &cc
	}
	for tries := 1; ; tries++ {
		req, err := c.newRequest(ctx, method, url)
		if err != nil {
			return nil, err
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		var wait time.Duration
		if err == nil {
			if resp.StatusCode < 400 {
				return resp, nil
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			se := newStatusError(resp, body)
			if !se.retryable() {
				return nil, se
			}
			err, wait = se, se.retryAfter
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !retryableErr(err) {
			return nil, err
		}
		if tries >= c.retries() {
			var se *statusError
			if errors.As(err, &se) && se.code == http.StatusTooManyRequests {
				return nil, errorf(ErrRateLimited, "%s answered 429 Too Many Requests %d times in a row: wait a while and run the pull again%s", hostOf(url), tries, c.tokenHint(url))
			}
			return nil, err
		}
		c.log().Warn("request failed; asking again", "url", redact(url), "try", tries, "err", err)
		if err := sleep(ctx, c.backoff(tries, wait)); err != nil {
			return nil, err
		}
	}
}

// newRequest makes a request with Hone's User-Agent, and the token when it goes to the
// Hugging Face endpoint (never to a CDN or another host).
func (c *Client) newRequest(ctx context.Context, method, url string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.userAgent())
	if c.HFToken != "" && sameHost(url, c.HFEndpoint) {
		req.Header.Set("Authorization", "Bearer "+c.HFToken)
	}
	if tok := c.registryToken(url); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// tokenHint suggests a token for a rate-limited request to the Hugging Face Hub.
func (c *Client) tokenHint(url string) string {
	if c.HFToken == "" && sameHost(url, c.HFEndpoint) {
		return ", or set HF_TOKEN (signed-in requests have higher limits)"
	}
	return ""
}

// retryableErr reports whether err may pass when the request is sent again: a cut or reset
// connection, a timeout, a 429 or 5xx; not a host that cannot be reached at all.
func retryableErr(err error) bool {
	if err == nil {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.retryable()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if unreachable(err) {
		return false
	}
	return true
}

// unreachable reports whether err says the host cannot be reached (no such host, nothing
// listening, no route): the network is down or the endpoint is wrong, not a passing cut.
func unreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskErr turns a full disk into its message.
func (c *Client) diskErr(err error, dir string, need int64) error {
	if isDiskFull(err) {
		free, _ := c.free(dir)
		return diskFull(dir, need, free)
	}
	return err
}

func (c *Client) free(dir string) (int64, error) {
	if c.freeSpace != nil {
		return c.freeSpace(dir)
	}
	return freeSpace(dir)
}

// backoff is the wait before try tries+1: what Retry-After asked (at most a minute), else
// Backoff doubled each try, at most 30 s.
func (c *Client) backoff(tries int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, time.Minute)
	}
	base := c.Backoff
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	return min(base<<min(tries-1, 10), 30*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// contentRangeStart reads the first byte of "bytes START-END/SIZE" (-1 when unreadable).
func contentRangeStart(v string) int64 {
	v, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return -1
	}
	s, _, _ := strings.Cut(v, "-")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

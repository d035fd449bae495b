// Package client is a Go client of a Hone server's training API (/v1/preview: base and
// trainable models, checkpoints, data files, datasets from traced calls, training and
// evaluation jobs with their events, aliases and policies), on the wire types of the packages
// that serve them (trainapi, training, registry, jobs, evaluation). The CLI (cmd/hone) and
// its end-to-end tests use it; no internal service imports it (it sits beside cmd/hone, at
// the top of docs/architecture.md's layers).
//
//	c := client.New("http://127.0.0.1:8080", key)
//	m, err := c.Model(ctx, "local/demo/agent")
//	id, err := c.CreateSFTJob(ctx, training.SFTRequest{ModelID: m.ID, TrainingDataURL: url})
//	events, err := c.FollowJobEvents(ctx, id)
//	for events.Next() { fmt.Println(events.Event().Type) }
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client calls one Hone server with one API key (Bearer).
type Client struct {
	// URL is the server's base URL, without a trailing slash.
	URL  string
	key  string
	HTTP *http.Client
	// Unreachable, when set, is the error a request that reached no server returns, made
	// from the server's URL and the transport's error (the CLI's advice); nil: that error.
	Unreachable func(url string, err error) error
}

// New is a client of the server at url (a trailing slash is dropped) with the API key key.
func New(url, key string) *Client {
	return &Client{URL: strings.TrimRight(url, "/"), key: key, HTTP: &http.Client{}}
}

// Error is an answer other than 200: its status and the error envelope's message (the body
// itself when it has no envelope), param and type.
type Error struct {
	Status  int
	Message string
	Param   string
	Type    string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

// StatusOf is the HTTP status of an error the client returned for an answer other than 200;
// 0 for any other error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// send makes a request with the key and, when contentType is set, the body's type; it
// returns the response when its status is 200, else an *Error (the body read and closed).
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if c.Unreachable != nil {
			return nil, c.Unreachable(c.URL, err)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, answerError(resp.StatusCode, b)
	}
	return resp, nil
}

// answerError is the *Error of an answer with status and body b.
func answerError(status int, b []byte) *Error {
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
		e := &Error{Status: status, Message: env.Error.Message, Type: env.Error.Type}
		if env.Error.Param != nil {
			e.Param = *env.Error.Param
		}
		return e
	}
	return &Error{Status: status, Message: strings.TrimSpace(string(b))}
}

// Do sends body (of contentType, when set) with method to path and decodes a 200 answer into
// out (nil: the answer is read and dropped). The typed methods are built on it; it also
// serves routes they do not cover.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	resp, err := c.send(ctx, method, path, body, contentType, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// JSON sends in as a JSON body (nil: no body) with method to path and decodes a 200 answer
// into out (nil: dropped).
func (c *Client) JSON(ctx context.Context, method, path string, in, out any) error {
	if in == nil {
		return c.Do(ctx, method, path, nil, "", out)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.Do(ctx, method, path, bytes.NewReader(b), "application/json", out)
}

// Events reads the server-sent events of a job's events route: each data line's JSON, until
// the stream ends ([DONE], or the job ended).
type Events[T any] struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	ev   T
}

// follow opens path's event stream.
func follow[T any](ctx context.Context, c *Client, path string) (*Events[T], error) {
	resp, err := c.send(ctx, "GET", path, nil, "", "text/event-stream")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return &Events[T]{body: resp.Body, sc: sc}, nil
}

// Next reads the next event; false at the end of the stream (or a line over 16 MiB, or a
// read error: Err).
func (s *Events[T]) Next() bool {
	for s.sc.Scan() {
		line := s.sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var ev T
		if json.Unmarshal([]byte(line[len("data: "):]), &ev) != nil {
			continue
		}
		s.ev = ev
		return true
	}
	return false
}

// Event is the event Next read.
func (s *Events[T]) Event() T { return s.ev }

// Err is the error that ended the stream early (nil at its end).
func (s *Events[T]) Err() error { return s.sc.Err() }

// Close closes the stream.
func (s *Events[T]) Close() error { return s.body.Close() }

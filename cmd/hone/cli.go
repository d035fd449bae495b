package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// newFlagSet returns a flag set that prints nothing itself: parseFlags reports help and
// errors, so that a mistyped flag is not buried under the whole usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// flagError reports the result of parsing the flags of `hone <name>`: nil is no error (ok is
// true); -h/--help prints header and the flags on stdout (exit 0); a bad flag prints the error
// first, the closest flag name when there is one, and where the flags are listed (exit 2).
func flagError(name, header string, fs *flag.FlagSet, err error, stdout, stderr io.Writer) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, header, fs)
		return 0, false
	}
	fmt.Fprintf(stderr, "hone %s: %v\n", name, err)
	if s := suggestFlag(fs, err); s != "" {
		fmt.Fprintf(stderr, "Did you mean --%s?\n", s)
	}
	fmt.Fprintf(stderr, "Run 'hone %s --help' for its flags.\n", name)
	return 2, false
}

// printUsage writes header and fs's flags with their defaults.
func printUsage(w io.Writer, header string, fs *flag.FlagSet) {
	fmt.Fprint(w, header)
	if !strings.HasSuffix(header, "\n") {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// suggestFlag returns the defined flag closest to the undefined one err names, or "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	const prefix = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return ""
	}
	bad := strings.TrimLeft(msg[len(prefix):], "-")
	best, bestD := "", 0
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(bad, f.Name)
		if strings.HasPrefix(f.Name, bad) || strings.HasPrefix(bad, f.Name) {
			d = min(d, 1)
		}
		if best == "" || d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best == "" || bestD > max(2, len(bad)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseArgs parses flags that may come before or after positional arguments, which it
// returns.
// flagsOnly checks the parse of a command that takes flags only (parseErr: what fs.Parse
// returned): a flag error as flagError answers it, and a positional argument is a usage
// error naming it. ok is false when the command must exit with code.
func flagsOnly(name, header string, fs *flag.FlagSet, parseErr error, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok := flagError(name, header, fs, parseErr, stdout, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hone %s: unexpected argument %q\nRun 'hone %s --help' for its flags.\n", name, fs.Arg(0), name)
		return 2, false
	}
	return 0, true
}

// failer returns the error exit of command name: the error on stderr, exit code 1.
func failer(name string, stderr io.Writer) func(error) int {
	return func(err error) int {
		fmt.Fprintf(stderr, "hone %s: %v\n", name, err)
		return 1
	}
}

func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isTerminal tells whether w is a terminal (progress bars redraw their line only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// noServer rewrites the error of a request to a URL where nothing listens into what to do.
func noServer(url string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no Hone server answers at %s: start one with `hone serve` (or `make run`), or point --url (env HONE_URL) at a running one", url)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot reach a Hone server at %s: %v; check --url (env HONE_URL)", url, dnsErr)
	}
	return err
}

// listenError explains a failed listen on addr (a busy port names --addr).
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use (is another hone serve running?): stop it, or listen elsewhere with --addr (env HONE_ADDR), e.g. --addr 127.0.0.1:8081", addr)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

// Command hone is one program that trains, serves and traces language models:
// an OpenAI/vLLM-compatible chat-completions server, a training service and a
// Weave-compatible trace store, on its own CPU engine.
//
// Subcommands register themselves in commands (one file per subcommand).
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// command is one subcommand of hone.
type command struct {
	summary string
	run     func(args []string) int
}

// commands is filled by the init functions of the subcommand files.
var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	if _, dup := commands[name]; dup {
		panic("hone: subcommand registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func usage() {
	var b strings.Builder
	b.WriteString("usage: hone <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'hone <command> -h' for the flags of a command.\n")
	fmt.Fprint(os.Stderr, b.String())
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "-h", "--help", "help":
		usage()
		return
	case "-v", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "hone: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}

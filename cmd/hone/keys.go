package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/honeai/hone/internal/db"
)

func init() {
	register("keys", "manage API keys: create, list, revoke", func(args []string) int {
		return runKeys(context.Background(), args, os.Stdout, os.Stderr)
	})
}

const keysUsage = `usage:
  hone keys create --data DIR --entity NAME [--name LABEL]   print a new key (last line of stdout)
  hone keys list   --data DIR [--entity NAME]                list keys (no secrets)
  hone keys revoke --data DIR ID                             revoke a key by id (or by the key itself)
Every command also takes --db DSN (default DIR/hone.db); flags read HONE_<FLAG> from the environment.
`

// parseInterleaved parses flags that may come before or after positional arguments; flags
// not given read HONE_<FLAG> from the environment.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, applyEnv(fs)
}

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, keysUsage)
		return 0
	}
	sub := args[0]
	fs := newFlagSet("keys " + sub)
	dataDir := fs.String("data", "./hone-data", "data directory")
	dsn := fs.String("db", "", "store DSN (default DIR/hone.db)")
	var entity, name *string
	switch sub {
	case "create":
		entity = fs.String("entity", "", "entity the key belongs to (required)")
		name = fs.String("name", "", "a label for the key")
	case "list":
		entity = fs.String("entity", "", "only keys of this entity")
	case "revoke":
	default:
		fmt.Fprintf(stderr, "hone keys: unknown subcommand %q\n%s", sub, keysUsage)
		return 2
	}
	pos, err := parseInterleaved(fs, args[1:])
	if code, ok := flagError("keys "+sub, keysUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	store, keys, err := openStore(ctx, *dataDir, *dsn)
	if err != nil {
		fmt.Fprintln(stderr, "hone keys:", err)
		return 1
	}
	defer store.Close()

	switch sub {
	case "create":
		if *entity == "" || len(pos) > 0 {
			fmt.Fprint(stderr, "hone keys create: --entity NAME is required and takes no arguments\n")
			return 2
		}
		k, secret, err := keys.Create(ctx, *entity, *name)
		if err != nil {
			fmt.Fprintln(stderr, "hone keys create:", err)
			return 1
		}
		fmt.Fprintf(stdout, "Created key %s for entity %q. It is shown only once:\n%s\n", k.ID, k.Entity, secret)
	case "list":
		list, err := keys.List(ctx, *entity)
		if err != nil {
			fmt.Fprintln(stderr, "hone keys list:", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tENTITY\tNAME\tCREATED\tLAST USED\tSTATUS")
		for _, k := range list {
			used, status := "-", "active"
			if k.LastUsedAt != nil {
				used = db.FormatTime(*k.LastUsedAt)
			}
			if k.RevokedAt != nil {
				status = "revoked " + db.FormatTime(*k.RevokedAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Entity, k.Name, db.FormatTime(k.CreatedAt), used, status)
		}
		tw.Flush()
	case "revoke":
		if len(pos) != 1 {
			fmt.Fprint(stderr, "hone keys revoke: exactly one key id is required\n")
			return 2
		}
		if err := keys.Revoke(ctx, strings.TrimSpace(pos[0])); err != nil {
			fmt.Fprintln(stderr, "hone keys revoke:", err)
			return 1
		}
		fmt.Fprintf(stdout, "Revoked key %s\n", pos[0])
	}
	return 0
}

package main

import (
	"fmt"

	"github.com/honeai/hone/internal/version"
)

func init() {
	register("version", "print the version and commit", func(args []string) int {
		fmt.Println(version.String())
		return 0
	})
}

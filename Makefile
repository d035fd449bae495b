# The two commands of README.md: `make run` and `make test`.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/honeai/hone/internal/version.Commit=$(COMMIT)

.PHONY: build run test
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o hone ./cmd/hone

run: build
	./hone serve

test:
	./scripts/test.sh

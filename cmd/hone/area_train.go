package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/trainapi"
)

var trainCfg struct {
	workers  int
	dataRoot string
	rank     int
	alpha    float64
}

func init() {
	registerServeFlags(func(fs *flag.FlagSet) {
		fs.IntVar(&trainCfg.workers, "train-workers", 1, "training jobs run at once in this process (0: none; run 'hone worker' on the same store)")
		fs.StringVar(&trainCfg.dataRoot, "train-data-root", "", "directory under which local training_data_url paths are allowed (default: none)")
		fs.IntVar(&trainCfg.rank, "lora-rank", 8, "LoRA rank of new trainable models")
		fs.Float64Var(&trainCfg.alpha, "lora-alpha", 16, "LoRA alpha of new trainable models")
	})
	registerArea(30, "train", func(app *App, r *httpx.Router) error {
		svc, err := newTrainService(app)
		if err != nil {
			return err
		}
		svc.Register(r, app.Bearer)
		if trainCfg.workers > 0 {
			go svc.Queue.Work(app.Context(), trainCfg.workers, hostOwner(), svc.Run, app.Logger)
		}
		return nil
	})
}

// newTrainService wires the training service on the app's store and its served models.
func newTrainService(app *App) (*trainapi.Service, error) {
	chatAny, ok := app.Lookup(ChatService)
	if !ok {
		return nil, errNoChat
	}
	chat := chatAny.(*chatapi.Registry)
	reg, err := registry.New(app.Context(), app.DB, filepath.Join(app.DataDir, "checkpoints"))
	if err != nil {
		return nil, err
	}
	q, err := jobs.Open(app.Context(), app.DB)
	if err != nil {
		return nil, err
	}
	svc := &trainapi.Service{Reg: reg, Queue: q, Chat: chat, FilesDir: filepath.Join(app.DataDir, "files"),
		DataRoot: trainCfg.dataRoot, Log: app.Logger, LoRARank: trainCfg.rank, LoRAAlpha: trainCfg.alpha}
	if t, ok := app.Lookup(TraceService); ok {
		svc.Trace = t.(*trace.Service)
	}
	chat.Adapters = svc
	return svc, nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNoChat = constError("the training area needs the chat area's models")

// hostOwner names this process as a job-lease owner.
func hostOwner() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

func init() {
	register("worker", "run training jobs from the store, apart from the API server (takes hone serve's flags)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runWorker(ctx, args, os.Stdout, os.Stderr, nil)
	})
}

// runWorker is `hone worker`: the serve areas on the same store and models, no listener, at
// least one training worker.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	if !hasFlag(args, "train-workers") {
		args = append([]string{"--train-workers", "1"}, args...)
	}
	return runServeMode(ctx, args, stdout, stderr, ready, true)
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// Command edgeprof runs the edge exactly as `edge -config FILE` does
// (app.New, the same listeners, the same logger) and also serves
// net/http/pprof on a separate address, which the edge itself does not
// have. It is for profiling the edge under load (docs/benchmarks.md), not
// for production.
//
//	go run ./loadtest/edgeprof -config bench/edge-18080.yaml -pprof 127.0.0.1:6060
//	go tool pprof -top 'http://127.0.0.1:6060/debug/pprof/profile?seconds=20'
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served on -pprof: http.DefaultServeMux
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/app"
	"github.com/orgedge/edge/edge/observe"
)

func main() {
	file := flag.String("config", "", "edge configuration `file` (EDGE_* variables apply)")
	pprofAddr := flag.String("pprof", "127.0.0.1:6060", "net/http/pprof `host:port`")
	flag.Parse()
	if *file == "" {
		log.Fatal("edgeprof: -config is required")
	}
	cfg, err := config.Load(*file)
	if err != nil {
		log.Fatalf("edgeprof: %v", err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	// As cmd/edge: log lines go through the buffered writer.
	logs := observe.NewLogWriter(os.Stderr, int(cfg.Log.BufferBytes))
	defer logs.Close()
	var lg *slog.Logger
	if cfg.Log.Format == "text" {
		lg = slog.New(slog.NewTextHandler(logs, opts))
	} else {
		lg = slog.New(slog.NewJSONHandler(logs, opts))
	}
	app, err := app.New(cfg, lg, "edgeprof", app.WithLogWriter(logs))
	if err != nil {
		log.Fatalf("edgeprof: %v", err)
	}
	defer app.Close()
	if err := app.Listen(); err != nil {
		log.Fatalf("edgeprof: %v", err)
	}
	go func() { log.Println(http.ListenAndServe(*pprofAddr, nil)) }()
	fmt.Printf("edgeprof: api %s admin %s pprof %s (pid %d)\n", app.APIAddr(), app.AdminAddr(), *pprofAddr, os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-app.Failed():
		log.Fatalf("edgeprof: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = app.Shutdown(sctx)
}

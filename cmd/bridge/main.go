package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  meshbridge run --config FILE [--log-level LEVEL] [--log-format text|json]
  meshbridge translate --config FILE [-o yaml|json]
  meshbridge version
`)
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "translate":
		return cmdTranslate(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "meshbridge %s (%s)\n", version, runtime.Version())
		return 0
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "meshbridge: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

type commonFlags struct {
	config    string
	logLevel  string
	logFormat string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "path of the YAML configuration (required)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
}

func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(c.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not one of text, json", c.logFormat)
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, cfg, code := setup(cf, stderr)
	if cfg == nil {
		return code
	}
	slog.SetDefault(log)
	b, err := newBridge(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.run(ctx); err != nil {
		log.Error("Exited with an error", "err", err)
		return 1
	}
	return 0
}

// setup parses the logging flags and loads the configuration; on failure it
// returns a nil config and the exit code.
func setup(cf commonFlags, stderr io.Writer) (*slog.Logger, *Config, int) {
	if cf.config == "" {
		fmt.Fprintln(stderr, "meshbridge: --config is required")
		return nil, nil, 2
	}
	log, err := cf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return nil, nil, 2
	}
	cfg, err := LoadConfig(cf.config)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return nil, nil, 1
	}
	return log, cfg, 0
}

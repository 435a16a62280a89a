package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set at build time by make build: -ldflags "-X main.version=$(git
// describe --tags --always --dirty)", a semantic version on a tag and the
// commit otherwise. A plain go build leaves "dev", and versionString adds
// the commit Go stamped into the binary.
var version = "dev"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage:
  meshbridge run --config FILE [--log-level LEVEL] [--log-format text|json]
  meshbridge translate --config FILE [-o yaml|json] [--diff] [--allow-empty]
  meshbridge bootstrap --node-id ID [--config FILE | --xds-address ADDR] [--locality R/Z/S]
  meshbridge version

Commands:
  run        follow the registries; serve xDS (and MCP), write to Kubernetes when configured
  translate  read every registry once and print the objects, or with --diff what would change in the cluster
  bootstrap  print the xDS bootstrap of a proxyless gRPC client
  version    print the version

"meshbridge COMMAND --help" describes a command's flags.
`

func usage(w io.Writer) { fmt.Fprint(w, usageText) }

// versionString is "meshbridge <version> (<go version>)".
func versionString() string {
	v := version
	if v == "dev" {
		if info, ok := debug.ReadBuildInfo(); ok {
			var rev, dirty string
			for _, s := range info.Settings {
				switch {
				case s.Key == "vcs.revision" && len(s.Value) >= 12:
					rev = s.Value[:12]
				case s.Key == "vcs.modified" && s.Value == "true":
					dirty = "-dirty"
				}
			}
			if rev != "" {
				v = "dev-" + rev + dirty
			}
		}
	}
	return fmt.Sprintf("meshbridge %s (%s)", v, runtime.Version())
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "translate":
		return cmdTranslate(args[1:], stdout, stderr)
	case "bootstrap":
		return cmdBootstrap(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "meshbridge version: unexpected argument %q\n", args[1])
			return 2
		}
		fmt.Fprintln(stdout, versionString())
		return 0
	case "-h", "--help", "-help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "meshbridge: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// parseFlags parses a command's arguments the way users expect: -h/--help
// prints the command's usage to stdout (exit 0), --version prints the
// version (exit 0), a bad flag or a positional argument prints the error
// and the usage to stderr (exit 2). It returns done when the command must
// return code without running.
func parseFlags(fs *flag.FlagSet, args []string, summary string, stdout, stderr io.Writer) (done bool, code int) {
	fs.SetOutput(io.Discard)
	showVersion := fs.Bool("version", false, "print the version and exit")
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: meshbridge %s\n\nFlags:\n", summary)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return true, 0
	case err != nil:
		fmt.Fprintf(stderr, "meshbridge %s: %v\n", fs.Name(), err)
		printUsage(stderr)
		return true, 2
	case *showVersion:
		fmt.Fprintln(stdout, versionString())
		return true, 0
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "meshbridge %s: unexpected argument %q (flags come as --name value)\n", fs.Name(), fs.Arg(0))
		printUsage(stderr)
		return true, 2
	}
	return false, 0
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

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cf commonFlags
	cf.register(fs)
	if done, code := parseFlags(fs, args, "run --config FILE [flags]", stdout, stderr); done {
		return code
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
	ignoreHangup(ctx, log)
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

// ignoreHangup logs and ignores SIGHUP until ctx is done: without a handler
// it would kill the process silently (exit 129), and a changed configuration
// takes effect only on a restart.
func ignoreHangup(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Warn("Received SIGHUP and ignored it: meshbridge does not reload its configuration; restart it to apply a change")
			}
		}
	}()
}

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

// usageText is the top-level usage; its command lines are the README's
// "Commands" block, line for line (TestUsageMatchesREADME).
const usageText = `Usage:
  meshbridge run --config FILE [--log-level debug|info|warn|error] [--log-format text|json]
  meshbridge translate --config FILE [-o yaml|json] [--diff [--kubeconfig FILE]] [--allow-empty]
  meshbridge bootstrap --node-id ID [--xds-address ADDR | --config FILE] [--cluster NAME] [--locality R/Z/S] [--label K=V ...] [--tls] [--ca-file FILE] [--cert-file FILE --key-file FILE] [--upstream-ca-file FILE [--upstream-cert-file FILE --upstream-key-file FILE]]
  meshbridge status [--address http://127.0.0.1:15015] [-o json]
  meshbridge version

Commands:
  run        follow the registries; serve xDS (and MCP), write to Kubernetes when configured
  translate  read every registry once and print the objects, or with --diff what would change in the cluster
  bootstrap  print the xDS bootstrap of a proxyless gRPC client
  status     show a running bridge's registries, xDS clients and Kubernetes writer (its debug address)
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
	case "status":
		return cmdStatus(args[1:], stdout, stderr)
	case "version":
		fs := flag.NewFlagSet("version", flag.ContinueOnError)
		if done, code := parseFlags(fs, args[1:], commandUsage("version"), stdout, stderr); done {
			return code
		}
		fmt.Fprintln(stdout, versionString())
		return 0
	case "--version", "-version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "meshbridge: unexpected argument %q after %s\n", args[1], args[0])
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

// commandUsage is the usage header of a command whose whole description is
// its usage line: "Usage: meshbridge <summary>", then its flags.
func commandUsage(summary string) string {
	return "Usage: meshbridge " + summary + "\n\nFlags:\n"
}

// parseFlags parses a command's arguments the way users expect, the same
// for every command (README "Commands"): -h/--help prints header and the
// command's flags to stdout (exit 0), --version prints the version (exit
// 0), a bad flag or a positional argument prints the error and the usage
// to stderr (exit 2). It returns done when the command must return code
// without running.
func parseFlags(fs *flag.FlagSet, args []string, header string, stdout, stderr io.Writer) (done bool, code int) {
	fs.SetOutput(io.Discard)
	showVersion := fs.Bool("version", false, "print the version and exit")
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, header)
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
	// levelSet and formatSet: the flag was given, and overrides log.level
	// or log.format.
	levelSet, formatSet bool
}

// register adds --config, --log-level and --log-format to fs; levelHelp
// describes --log-level, whose default is level.
func (c *commonFlags) register(fs *flag.FlagSet, level, levelHelp string) {
	fs.StringVar(&c.config, "config", "", "path of the YAML configuration (required)")
	fs.StringVar(&c.logLevel, "log-level", level, levelHelp)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json (default: log.format of --config)")
}

// noteSet records which logging flags fs was given.
func (c *commonFlags) noteSet(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "log-level":
			c.levelSet = true
		case "log-format":
			c.formatSet = true
		}
	})
}

// logger returns the logger and its level variable: the flags' level and
// format, or those of cfg (log.level, log.format) for a flag not given.
func (c *commonFlags) logger(w io.Writer, cfg *Config) (*slog.Logger, *slog.LevelVar, error) {
	levelText, format := c.logLevel, c.logFormat
	if cfg != nil && !c.levelSet && cfg.Log.Level != "" {
		levelText = cfg.Log.Level
	}
	if cfg != nil && !c.formatSet && cfg.Log.Format != "" {
		format = cfg.Log.Format
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelText)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", levelText)
	}
	lv := new(slog.LevelVar)
	lv.Set(level)
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), lv, nil
	case "json":
		opts.ReplaceAttr = durationString
		return slog.New(slog.NewJSONHandler(w, opts)), lv, nil
	}
	return nil, nil, fmt.Errorf("--log-format: %q is not one of text, json", format)
}

// durationString writes a duration attribute as Go's duration string
// ("1.5s"), as the text handler does and as Istio's and Kubernetes' JSON
// logs do, instead of slog's JSON default, integer nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cf commonFlags
	cf.register(fs, "info", "log level: debug, info, warn, error (default: log.level of --config, info when unset)")
	if done, code := parseFlags(fs, args, commandUsage("run --config FILE [flags]"), stdout, stderr); done {
		return code
	}
	cf.noteSet(fs)
	log, level, cfg, code := setup(cf, stderr)
	if cfg == nil {
		return code
	}
	slog.SetDefault(log)
	b, err := newBridgeWith(cfg, log, level, cf)
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

// setup loads the configuration and builds the logger (flags over log.*);
// on failure it returns a nil config and the exit code.
func setup(cf commonFlags, stderr io.Writer) (*slog.Logger, *slog.LevelVar, *Config, int) {
	if cf.config == "" {
		fmt.Fprintln(stderr, "meshbridge: --config is required")
		return nil, nil, nil, 2
	}
	if _, _, err := cf.logger(io.Discard, nil); err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return nil, nil, nil, 2
	}
	cfg, err := LoadConfig(cf.config)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return nil, nil, nil, 1
	}
	log, level, err := cf.logger(stderr, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return nil, nil, nil, 2
	}
	return log, level, cfg, 0
}

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// commands are the commands meshbridge takes.
var commands = []string{"run", "translate", "bootstrap", "status", "version"}

// TestEveryCommandTakesHelpAndVersion: as the README says, every command
// takes -h/--help (its usage and flags on stdout, exit 0) and --version
// (the version on stdout, exit 0).
func TestEveryCommandTakesHelpAndVersion(t *testing.T) {
	for _, cmd := range commands {
		for _, help := range []string{"-h", "--help"} {
			t.Run(cmd+" "+help, func(t *testing.T) {
				code, out, errs := run(cmd, help)
				if code != 0 || !strings.HasPrefix(out, "Usage: meshbridge "+cmd) || !strings.Contains(out, "-version") || errs != "" {
					t.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant exit 0 and the usage of %s with its flags on stdout", code, out, errs, cmd)
				}
			})
		}
		t.Run(cmd+" --version", func(t *testing.T) {
			code, out, errs := run(cmd, "--version")
			if code != 0 || out != versionString()+"\n" || errs != "" {
				t.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant exit 0 and %q", code, out, errs, versionString())
			}
		})
	}
}

// TestUsageMatchesREADME: the top-level usage lists each command as the
// README's "Commands" block does, with every flag.
func TestUsageMatchesREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)\n## Commands\n\n```\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ## Commands code block")
	}
	documented := strings.Split(strings.TrimSpace(string(block[1])), "\n")
	var usage []string
	for _, l := range strings.Split(usageText, "\n") {
		if l, ok := strings.CutPrefix(l, "  meshbridge "); ok {
			usage = append(usage, "meshbridge "+l)
		}
	}
	if !slices.Equal(documented, usage) {
		t.Errorf("meshbridge --help lists\n%s\nthe README's Commands block\n%s", strings.Join(usage, "\n"), strings.Join(documented, "\n"))
	}
	// Each flag a command's usage line names is one the command takes.
	for _, line := range usage {
		fields := strings.Fields(line)
		_, out, _ := run(fields[1], "--help")
		for _, flag := range regexp.MustCompile(`(?:^|[\[ |])(--?[a-z-]+)`).FindAllStringSubmatch(line, -1) {
			name := "-" + strings.TrimLeft(flag[1], "-")
			if !strings.Contains(out, "  "+name+" ") && !strings.Contains(out, "  "+name+"\n") {
				t.Errorf("usage line %q names %s, which meshbridge %s --help does not list:\n%s", line, flag[1], fields[1], out)
			}
		}
	}
}

// TestTranslateHelpStatesItsLogLevel: translate runs at warn unless
// --log-level says otherwise, and its help says so.
func TestTranslateHelpStatesItsLogLevel(t *testing.T) {
	_, out, _ := run("translate", "--help")
	i := strings.Index(out, "-log-level")
	if i < 0 {
		t.Fatalf("translate --help lists no -log-level:\n%s", out)
	}
	flagHelp, _, _ := strings.Cut(out[i:], "\n  -")
	if !strings.Contains(flagHelp, `(default "warn")`) {
		t.Errorf("translate --help describes -log-level as\n%s\nwant its default, warn", flagHelp)
	}
}

// TestBootstrapWarnsOfClientFiles: the files a bootstrap names are read by
// the client when it starts, from its own working directory: a relative
// path or one missing here is written as given, with a warning.
func TestBootstrapWarnsOfClientFiles(t *testing.T) {
	present := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(present, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr; none: stderr empty
	}{
		{"absolute and present", []string{"--ca-file", present}, nil},
		{"relative", []string{"--ca-file", "certs/ca.pem"}, []string{`warning: --ca-file "certs/ca.pem" is a relative path`}},
		{"missing", []string{"--ca-file", "/nonexistent/ca.pem"}, []string{"warning: --ca-file /nonexistent/ca.pem: no such file or directory"}},
		{"client certificate and key", []string{"--ca-file", present, "--cert-file", "c.pem", "--key-file", "/nonexistent/k.pem"},
			[]string{`--cert-file "c.pem" is a relative path`, "--key-file /nonexistent/k.pem: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := run(append([]string{"bootstrap", "--node-id", "n"}, tc.args...)...)
			if code != 0 || !strings.Contains(out, `"server_uri"`) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
			}
			if len(tc.want) == 0 && errs != "" {
				t.Errorf("stderr: %s; want nothing", errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr: %s; want %q", errs, w)
				}
			}
		})
	}
}

// TestBootstrapConfigNeedsOnlyTheXDSBlock: bootstrap --config reads the
// xds block; the registries' secret files need not exist where it runs.
func TestBootstrapConfigNeedsOnlyTheXDSBlock(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	body := "registries:\n- {name: c, type: consul, consul: {address: 127.0.0.1:8500, tokenFile: /nonexistent/token}}\n" +
		"xds: {address: 10.0.0.7:15010}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("bootstrap", "--node-id", "n", "--config", cfg)
	if code != 0 || !strings.Contains(out, `"server_uri": "10.0.0.7:15010"`) {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// run still insists on them.
	if code, _, errs := run("translate", "--config", cfg); code != 1 || !strings.Contains(errs, "tokenFile") {
		t.Errorf("translate with a missing tokenFile: exit %d, stderr: %s", code, errs)
	}
}

// TestJSONLogsWriteDurationsAsStrings: with --log-format json a duration
// is "1.5s", as in text logs, not integer nanoseconds.
func TestJSONLogsWriteDurationsAsStrings(t *testing.T) {
	var buf strings.Builder
	log, _, err := (&commonFlags{logLevel: "info", logFormat: "json"}).logger(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("Registry read succeeded again", "downFor", 1500*time.Millisecond, "group", slog.GroupValue(slog.Duration("d", time.Second)))
	if out := buf.String(); !strings.Contains(out, `"downFor":"1.5s"`) || !strings.Contains(out, `"d":"1s"`) {
		t.Errorf("JSON log line %s; want durations as strings", out)
	}
}

// TestReadmeFirstScreenIsAFirstRun: the README's first screen (its first
// 50 lines) is a first run, in order: make demo and make test, a
// configuration of one's own registry through translate and run, a client's
// bootstrap, status; the reference (Commands) comes after. The configuration
// it shows parses, and every meshbridge command it shows takes its flags.
func TestReadmeFirstScreenIsAFirstRun(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	screen := strings.Join(lines[:min(50, len(lines))], "\n")
	at := -1
	for _, step := range []string{"make demo", "make test", "meshbridge translate --config", "meshbridge run --config",
		"meshbridge bootstrap --node-id", "GRPC_XDS_BOOTSTRAP=", "meshbridge status"} {
		i := strings.Index(screen, step)
		if i < 0 || i < at {
			t.Errorf("the README's first screen lacks %q, or has it out of order (demo → own registry → client → status):\n%s", step, screen)
			continue
		}
		at = i
	}
	if i := strings.Index(string(data), "\n## Commands\n"); i < len(screen) {
		t.Errorf("the reference (## Commands) starts on the first screen, at byte %d", i)
	}
	cfg := regexp.MustCompile(`(?s)cat > my\.yaml <<'YAML'\n(.*?)\n\s*YAML\n`).FindStringSubmatch(screen)
	if cfg == nil {
		t.Fatal("the first run shows no configuration (cat > my.yaml <<'YAML' ... YAML)")
	}
	var body strings.Builder
	for l := range strings.Lines(cfg[1]) {
		body.WriteString(strings.TrimPrefix(l, "   "))
	}
	if _, err := ParseConfig([]byte(body.String())); err != nil {
		t.Errorf("the first run's configuration does not parse: %v\n%s", err, body.String())
	}
	for _, m := range regexp.MustCompile(`bin/meshbridge ([a-z]+)((?: --?[a-z-]+(?: [^\s#-][^\s#]*)?)*)`).FindAllStringSubmatch(screen, -1) {
		args := append([]string{m[1]}, strings.Fields(m[2])...)
		_, _, errs := run(append(args, "--help")...)
		if strings.Contains(errs, "flag provided but not defined") {
			t.Errorf("the first run shows %q: %s", m[0], errs)
		}
	}
}

// TestTranslateStopsAtOnceOnAFileItCannotRead: a registry file that only
// an edit can fix (an unknown key, invalid UTF-8, a symbolic link loop, a
// file over file.maxSize) ends translate at once, naming the registry and
// the cause, instead of after sync.timeout (10 minutes here). A service
// its fields do not allow (a port of 70000, an unknown protocol, a host
// declared twice) is skipped with its reason, the others printed.
func TestTranslateStopsAtOnceOnAFileItCannotRead(t *testing.T) {
	const svc = "- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}]\n"
	for name, tc := range map[string]struct {
		services string
		symlink  bool
		maxSize  string
		wantCode int
		wantOut  string
		wantErr  []string
	}{
		"an unknown key":   {services: "services:\n- host: a.local\n  prots: [{number: 80}]\n", wantCode: 1, wantErr: []string{`could not read registry "static"`, "services[0].prots: unknown field"}},
		"invalid UTF-8":    {services: "services:\n- host: \"a\xff.local\"\n", wantCode: 1, wantErr: []string{`could not read registry "static"`, "invalid leading UTF-8 octet"}},
		"a symlink loop":   {symlink: true, wantCode: 1, wantErr: []string{`could not read registry "static"`, "too many levels of symbolic links"}},
		"over maxSize":     {services: "services:\n" + svc, maxSize: "10", wantCode: 1, wantErr: []string{`could not read registry "static"`, "bytes, over file.maxSize (10 bytes)"}},
		"a port of 70000":  {services: "services:\n" + svc + "- host: b.local\n  ports: [{number: 70000}]\n", wantOut: "name: a.local", wantErr: []string{`reason="services[1].ports[0].number: 70000 is not a port (1-65535)"`}},
		"a bad protocol":   {services: "services:\n" + svc + "- host: b.local\n  ports: [{number: 1, protocol: udp}]\n", wantOut: "name: a.local", wantErr: []string{`services[1].ports[0].protocol: \"udp\" is not one of`}},
		"a duplicate host": {services: "services:\n" + svc + svc, wantOut: "name: a.local", wantErr: []string{`services[1].host: \"a.local\" is already declared by services[0]`}},
		"only invalid services": {services: "services:\n- host: b.local\n  ports: [{number: 70000}]\n", wantCode: 1,
			wantErr: []string{"70000 is not a port", "the registries listed no services"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			svcs := filepath.Join(dir, "services.yaml")
			if tc.symlink {
				if err := os.Symlink(svcs, svcs); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, svcs, tc.services)
			}
			block := "{path: services.yaml}"
			if tc.maxSize != "" {
				block = "{path: services.yaml, maxSize: " + tc.maxSize + "}"
			}
			cfg := filepath.Join(dir, "c.yaml")
			writeFile(t, cfg, "registries:\n- {name: static, type: file, file: "+block+"}\nsync: {timeout: 10m}\n")
			type result struct {
				code     int
				out, err string
			}
			done := make(chan result, 1)
			go func() { code, out, errs := run("translate", "--config", cfg); done <- result{code, out, errs} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("translate still waits after 30 s (sync.timeout is 10m)")
			}
			ok := r.code == tc.wantCode && strings.Contains(r.out, tc.wantOut)
			for _, w := range tc.wantErr {
				ok = ok && strings.Contains(r.err, w)
			}
			if !ok {
				t.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant exit %d, stdout ⊇ %q, stderr ⊇ %q", r.code, r.out, r.err, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}

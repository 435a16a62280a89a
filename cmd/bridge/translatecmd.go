package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	versioned "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshbridge/meshbridge/kube"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// cmdTranslate reads every registry once, through the same sync step as run,
// and prints the objects it would produce. It binds no port and fails, naming
// the registries, when one could not be read within sync.timeout.
func cmdTranslate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("translate", flag.ContinueOnError)
	var cf commonFlags
	// Warnings only by default, whatever log.level says: the objects go to
	// stdout, and info lines (labels changed or dropped per service) would
	// bury the errors.
	cf.register(fs, "warn", "log level: debug, info, warn, error; log.level of --config does not apply "+
		"(info adds the labels changed or dropped per service)")
	output := fs.String("o", "yaml", "output format: yaml or json")
	diff := fs.Bool("diff", false, "compare with the cluster (see --kubeconfig) in output.namespace and print what would be created, updated and deleted")
	kubeconfig := fs.String("kubeconfig", "", "with --diff: the cluster's kubeconfig (default: kubernetes.kubeconfig of --config, else $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	allowEmpty := fs.Bool("allow-empty", false, "exit 0 even when the registries hold no services (by default an empty result is an error: an ACL token that sees nothing looks the same)")
	if done, code := parseFlags(fs, args, commandUsage("translate --config FILE [flags]"), stdout, stderr); done {
		return code
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "meshbridge: -o: %q is not one of yaml, json\n", *output)
		return 2
	}
	if *kubeconfig != "" && !*diff {
		fmt.Fprintln(stderr, "meshbridge translate: --kubeconfig applies to --diff only")
		return 2
	}
	cf.noteSet(fs)
	cf.levelSet = true // --log-level's value, given or its default, wins over log.level
	log, _, cfg, code := setup(cf, stderr)
	if cfg == nil {
		return code
	}
	regs, err := buildRegistries(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return 1
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	// The pipeline's Syncer configuration, without persisted state and
	// timeout: a one-shot read persists nothing and waits as readOnce says.
	sc := pipelineOptions(cfg, regs, log).Sync
	sc.StateDir, sc.Timeout = "", 0
	var watchers []registries.Registry
	for _, r := range regs {
		sc.Registries = append(sc.Registries, r.Sync)
		watchers = append(watchers, r.Watcher)
	}
	syncer := syncer.New(store, sc)
	failures := readOnce(watchers, syncer, cfg.Sync.Timeout.Duration)
	if len(failures) > 0 {
		fmt.Fprintf(stderr, "meshbridge: could not read %s\n", strings.Join(failures, "; "))
		return 1
	}
	cfgs := append(store.List(model.KindServiceEntry, ""), store.List(model.KindWorkloadEntry, "")...)
	if len(cfgs) == 0 && !*allowEmpty {
		fmt.Fprintln(stderr, "meshbridge: the registries listed no services, so there is nothing to print; "+
			"if that is expected, pass --allow-empty (a registry ACL token that sees nothing looks the same: see the warnings above)")
		return 1
	}
	if *diff {
		names := make([]string, len(regs))
		for i, r := range regs {
			names[i] = r.Name()
		}
		return printDiff(cfg, *kubeconfig, names, syncer.RegistrySynced, cfgs, stdout, stderr)
	}
	render := translate.ToYAML
	if *output == "json" {
		render = translate.ToJSON
	}
	out, err := render(cfgs)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: render: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// printDiff prints kube.DiffWith of cfgs against the cluster of
// diffRESTConfig (kubeconfig is --kubeconfig), one change per
// line ("create ServiceEntry/ns/name"), then a summary line: the writer's
// decision on the same rules, synced being the registries' first listings.
// It writes nothing to the cluster.
func printDiff(cfg *Config, kubeconfig string, registryNames []string, synced func(string) bool, cfgs []*model.Config, stdout, stderr io.Writer) int {
	rc, err := diffRESTConfig(cfg.Kubernetes, kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return 1
	}
	client, err := versioned.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: kubernetes: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	changes, err := kube.DiffWith(ctx, kube.Options{Client: client, Namespace: cfg.Output.Namespace,
		Instance: cfg.Output.Instance, Registries: registryNames, RegistrySynced: synced}, cfgs)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: diff: %v\n", err)
		return 1
	}
	count := map[string]int{}
	for _, c := range changes {
		count[c.Op]++
		fmt.Fprintln(stdout, c.String())
	}
	fmt.Fprintf(stdout, "# %d to create, %d to update, %d to delete, %d conflicts (names held by objects meshbridge does not own) in namespace %s\n",
		count[kube.OpCreate], count[kube.OpUpdate], count[kube.OpDelete], count[kube.OpConflict], cfg.Output.Namespace)
	return 0
}

// readOnce runs every registry until all have synced, one fails
// permanently (registries.IsPermanent, or Run returned an error), or timeout
// passes, and returns a description of each registry that did not sync,
// with the last error it reported.
func readOnce(regs []registries.Registry, syncer *syncer.Syncer, timeout time.Duration) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	lastErr := map[string]string{}
	stopped := map[string]bool{} // failed permanently
	synced := map[string]bool{}
	permanent := make(chan struct{})
	var stopOnce sync.Once
	fail := func(registry string, err error, final bool) {
		mu.Lock()
		lastErr[registry] = err.Error()
		stopped[registry] = stopped[registry] || final
		mu.Unlock()
		if final {
			stopOnce.Do(func() { close(permanent) })
		}
	}
	sink := registries.SinkFuncs{
		SnapshotFunc: func(s registries.Snapshot) {
			if s.Err != nil {
				fail(s.Registry, s.Err, registries.IsPermanent(s.Err))
			}
			syncer.Snapshot(s)
		},
		SyncedFunc: func(r string) {
			mu.Lock()
			synced[r] = true
			mu.Unlock()
			syncer.Synced(r)
		},
	}
	var wg sync.WaitGroup
	for _, r := range regs {
		wg.Go(func() {
			if err := r.Run(ctx, sink); err != nil {
				fail(r.Name(), err, true)
			}
		})
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-syncer.Ready():
	case <-permanent:
	case <-timer.C:
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var failures []string
	for _, r := range regs {
		if synced[r.Name()] {
			continue
		}
		why := lastErr[r.Name()]
		if hr, ok := r.(registries.HealthReporter); ok && why == "" {
			why = hr.Health().LastError
		}
		switch {
		case why == "":
			why = fmt.Sprintf("no complete listing within sync.timeout (%s), and no error reported", timeout)
		case stopped[r.Name()]:
		default:
			why = fmt.Sprintf("no complete listing within sync.timeout (%s); last error: %s", timeout, why)
		}
		failures = append(failures, fmt.Sprintf("registry %q: %s", r.Name(), why))
	}
	slices.Sort(failures)
	return failures
}

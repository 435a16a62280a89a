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

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// cmdTranslate reads every registry once, through the same sync step as run,
// and prints the objects it would produce. It binds no port and fails, naming
// the registries, when one could not be read within sync.timeout.
func cmdTranslate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("translate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	output := fs.String("o", "yaml", "output format: yaml or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "meshbridge: -o: %q is not one of yaml, json\n", *output)
		return 2
	}
	if cf.logLevel == "info" {
		cf.logLevel = "warn"
	}
	log, cfg, code := setup(cf, stderr)
	if cfg == nil {
		return code
	}
	regs, syncRegs, err := buildRegistries(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge: %v\n", err)
		return 1
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	syncer := serviceentry.NewSyncer(store, serviceentry.SyncerConfig{Registries: syncRegs, Logger: log})
	failures := readOnce(regs, syncer, cfg.Sync.Timeout.Duration)
	if len(failures) > 0 {
		fmt.Fprintf(stderr, "meshbridge: could not read %s\n", strings.Join(failures, "; "))
		return 1
	}
	cfgs := append(store.List(model.KindServiceEntry, ""), store.List(model.KindWorkloadEntry, "")...)
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

// readOnce runs every registry until all have synced or timeout passed, and
// returns a description of each registry that did not sync.
func readOnce(regs []registries.Registry, syncer *serviceentry.Syncer, timeout time.Duration) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	lastErr := map[string]string{}
	synced := map[string]bool{}
	sink := registries.SinkFuncs{
		SnapshotFunc: func(s registries.Snapshot) {
			if s.Err != nil {
				mu.Lock()
				lastErr[s.Registry] = s.Err.Error()
				mu.Unlock()
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
				mu.Lock()
				lastErr[r.Name()] = err.Error()
				mu.Unlock()
			}
		})
	}
	select {
	case <-syncer.Ready():
	case <-time.After(timeout):
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var failures []string
	for _, r := range regs {
		if !synced[r.Name()] {
			why := lastErr[r.Name()]
			if why == "" {
				why = "no complete listing before sync.timeout"
			}
			failures = append(failures, fmt.Sprintf("registry %q: %s", r.Name(), why))
		}
	}
	slices.Sort(failures)
	return failures
}

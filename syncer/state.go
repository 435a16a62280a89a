package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
)

// stateVersion is the version of the persisted ports format; a file of
// another version is ignored.
const stateVersion = 1

// listingVersion is the version of the persisted listing format; a file of
// another version is ignored, but for version 1 without Dubbo services
// (listingV1Compatible). Version 2: a Dubbo service carries its host and
// PortPerProtocol (named by its registry) instead of its Dubbo identity.
const listingVersion = 2

// listingV1Compatible reports whether a version 1 listing reads the same as
// a version 2 one: none of its services carries a Dubbo identity (the only
// field version 2 dropped), so that an upgrade keeps the listings of every
// other registry.
func listingV1Compatible(data []byte) bool {
	var v1 struct {
		Services []struct {
			Dubbo json.RawMessage
		} `json:"services"`
	}
	if json.Unmarshal(data, &v1) != nil {
		return false
	}
	for _, s := range v1.Services {
		if len(s.Dubbo) > 0 && string(s.Dubbo) != "null" {
			return false
		}
	}
	return true
}

// stateWriteDelay coalesces state writes: a change is written at most this
// long after it, with every change made meanwhile.
const stateWriteDelay = 2 * time.Second

// persistedListing is a registry's last complete, authoritative listing as
// written to <StateDir>/<registry>.json (rule 7).
type persistedListing struct {
	Version  int                  `json:"version"`
	Registry string               `json:"registry"`
	Type     string               `json:"type"`
	Written  time.Time            `json:"written"`
	Services []registries.Service `json:"services"`
}

// persistedPorts are the hosts' kept ports (rule 3) as written to
// <StateDir>/ports.json, so that a restarted bridge serves its hosts on the
// ports the last run kept (Config.KeptPorts).
type persistedPorts struct {
	Version int                   `json:"version"`
	Written time.Time             `json:"written"`
	Hosts   map[string]hostPortsJ `json:"hosts"`
}

// hostPortsJ is one host's kept ports in ports.json.
type hostPortsJ struct {
	Port          uint32          `json:"port"`
	Protocol      string          `json:"protocol,omitempty"`
	ProtocolPorts []protocolPortJ `json:"protocolPorts,omitempty"`
}

type protocolPortJ struct {
	Number   uint32 `json:"number"`
	Protocol string `json:"protocol"`
}

// portsPath is the kept ports' state file.
func (s *Syncer) portsPath() string { return filepath.Join(s.stateDir, "ports.json") }

// loadPorts reads the kept ports of the last run into the seeds (those
// Config.KeptPorts gives win); a missing file is none, one that is corrupt
// or of another version is ignored with a warning.
func (s *Syncer) loadPorts() {
	data, err := os.ReadFile(s.portsPath())
	if os.IsNotExist(err) {
		return
	}
	var pp persistedPorts
	if err == nil {
		err = json.Unmarshal(data, &pp)
	}
	if err == nil && pp.Version != stateVersion {
		err = fmt.Errorf("version %d, want %d", pp.Version, stateVersion)
	}
	if err != nil {
		s.log.Warn("Ignored the persisted ports of the hosts", "path", s.portsPath(), "err", err)
		return
	}
	if s.seeds == nil {
		s.seeds = make(KeptPorts, len(pp.Hosts))
	}
	for host, p := range pp.Hosts {
		if _, given := s.seeds[host]; given || p.Port == 0 {
			continue
		}
		st := translate.Sticky{Port: p.Port, Protocol: model.Protocol(p.Protocol)}
		for _, q := range p.ProtocolPorts {
			st.ProtocolPorts = append(st.ProtocolPorts, translate.ProtocolPort{Number: q.Number, Protocol: model.Protocol(q.Protocol)})
		}
		s.seeds[host] = st
	}
	s.log.Info("Read the ports the last run kept for its hosts", "hosts", len(pp.Hosts), "written", pp.Written)
}

// markPortsDirty notes that the kept ports changed. s.mu is held.
func (s *Syncer) markPortsDirty() {
	if s.stateDir == "" {
		return
	}
	s.portsDirty = true
	select {
	case s.stateKick <- struct{}{}:
	default:
	}
}

// takePorts returns the kept ports to write, nil when they did not change.
func (s *Syncer) takePorts() *persistedPorts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.portsDirty || !s.isReady() {
		// Before the Syncer is ready the file keeps the last run's ports
		// of hosts not claimed yet.
		return nil
	}
	s.portsDirty = false
	pp := &persistedPorts{Version: stateVersion, Written: s.clock.Now(), Hosts: map[string]hostPortsJ{}}
	for host, h := range s.hosts {
		if !h.kept || h.ports.Port == 0 {
			continue
		}
		p := hostPortsJ{Port: h.ports.Port, Protocol: string(h.ports.Protocol)}
		for _, q := range h.ports.ProtocolPorts {
			p.ProtocolPorts = append(p.ProtocolPorts, protocolPortJ{Number: q.Number, Protocol: string(q.Protocol)})
		}
		pp.Hosts[host] = p
	}
	return pp
}

// statePath is the registry's state file.
func (s *Syncer) statePath(registry string) string {
	return filepath.Join(s.stateDir, registry+".json")
}

// loadState reads each registry's persisted listing; a file that is missing
// is no listing, one that is corrupt, of another version, or of another
// registry or type is ignored with a warning.
func (s *Syncer) loadState() {
	for name, r := range s.regs.byName {
		data, err := os.ReadFile(s.statePath(name))
		if os.IsNotExist(err) {
			continue
		}
		var pl persistedListing
		if err == nil {
			err = json.Unmarshal(data, &pl)
		}
		switch {
		case err != nil:
		case pl.Version != listingVersion && (pl.Version != 1 || !listingV1Compatible(data)):
			err = fmt.Errorf("version %d, want %d", pl.Version, listingVersion)
		case pl.Registry != name || pl.Type != r.cfg.Type:
			err = fmt.Errorf("written for registry %q of type %q", pl.Registry, pl.Type)
		}
		if err != nil {
			s.log.Warn("Ignored a persisted listing", "registry", name, "path", s.statePath(name), "err", err)
			continue
		}
		r.disk = make(map[registries.ServiceKey]registries.Service, len(pl.Services))
		for _, svc := range pl.Services {
			r.disk[svc.Key()] = svc
		}
		s.log.Info("Read a persisted listing; it is served if the registry does not answer within sync.timeout",
			"registry", name, "services", len(pl.Services), "written", pl.Written)
	}
}

// serveFromDisk serves the persisted listing of every registry that has not
// synced (rule 7). s.mu is held.
func (s *Syncer) serveFromDisk() {
	for name, r := range s.regs.byName {
		if r.status.Synced || len(r.disk) == 0 {
			continue
		}
		r.fromDisk = make(map[registries.ServiceKey]bool, len(r.disk))
		for _, k := range slices.SortedFunc(maps.Keys(r.disk), registries.ServiceKey.Compare) {
			id := serviceID{registry: name, key: k}
			if s.services[id] != nil {
				continue // read from the registry already
			}
			s.upsert(r, id, r.disk[k])
			r.fromDisk[id.key] = true
		}
		r.disk = nil
		r.status.FromDisk = true
		s.noteRegistry(r)
		s.log.Warn("Serving a registry from its persisted listing until it answers", "registry", name,
			"services", len(r.fromDisk))
	}
}

// leaveDisk ends serving from disk once the registry synced. What its
// listings no longer hold they removed already: its run started from the
// persisted listing (Serving, registries.Reporter rule 8); what they hold
// it read before Synced. s.mu is held.
func (s *Syncer) leaveDisk(r *registryState) {
	r.disk = nil
	if !r.status.FromDisk {
		return
	}
	r.fromDisk = nil
	r.status.FromDisk = false
	s.noteRegistry(r)
	s.log.Info("Registry answered; no longer served from its persisted listing", "registry", r.cfg.Name)
}

// markDirty notes that the registry's listing changed. s.mu is held.
func (s *Syncer) markDirty(r *registryState) {
	if s.stateDir == "" {
		return
	}
	r.dirty = true
	select {
	case s.stateKick <- struct{}{}:
	default:
	}
}

// runState writes the dirty registries' listings, stateWriteDelay after
// the first change, until ctx is done.
func (s *Syncer) runState(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stateKick:
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(stateWriteDelay):
		}
		for _, pl := range s.takeDirty() {
			if err := writeAtomic(s.statePath(pl.Registry), pl); err != nil {
				s.log.Warn("Could not persist a registry's listing", "registry", pl.Registry, "err", err)
			}
		}
		if pp := s.takePorts(); pp != nil {
			if err := writeAtomic(s.portsPath(), pp); err != nil {
				s.log.Warn("Could not persist the ports kept for the hosts", "err", err)
				s.mu.Lock()
				s.portsDirty = true
				s.mu.Unlock()
			}
		}
	}
}

// takeDirty returns the listings to write: those of dirty registries whose
// state is complete and authoritative (synced, read, not from disk, no
// stale service, nothing held).
func (s *Syncer) takeDirty() []persistedListing {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []persistedListing
	for name, r := range s.regs.byName {
		if !r.dirty || !r.status.Synced || r.status.FromDisk || len(r.down) > 0 || len(r.stale) > 0 ||
			r.guard != nil || len(r.holding) > 0 {
			continue
		}
		r.dirty = false
		pl := persistedListing{Version: listingVersion, Registry: name, Type: r.cfg.Type, Written: s.clock.Now()}
		for id, st := range s.services {
			if id.registry == name {
				pl.Services = append(pl.Services, st.svc)
			}
		}
		slices.SortFunc(pl.Services, func(a, b registries.Service) int { return a.Key().Compare(b.Key()) })
		out = append(out, pl)
	}
	return out
}

// writeAtomic writes v as JSON to path through a temporary file in the same
// directory, synced and renamed over path.
func writeAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

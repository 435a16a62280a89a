package serviceentry

import (
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// XDSUpdater receives the ServiceEntry controller's push decisions. It is
// declared here, by its caller, and implemented by xds.DiscoveryServer and
// by dns.Updater (package xds/dns), which wraps it in the pipeline. It
// mirrors Istio's pilot/pkg/model.XDSUpdater; every method must return quickly
// and never call back into the controller.
type XDSUpdater interface {
	// EDSUpdate replaces every endpoint that shard contributes to host and
	// requests the push the change needs; which one (none, EDS, full) is the
	// server's rule (package xds, doc rule 1). An empty list keeps the
	// service key, so 0↔N flaps never cause full pushes. start is the
	// requested push's PushRequest.Start: when the change was observed
	// (zero: when the server received it).
	EDSUpdate(shard, host, namespace string, endpoints []*model.Endpoint, start time.Time)
	// EDSCacheUpdate does what EDSUpdate does without requesting any push: a
	// full push that follows picks the endpoints up.
	EDSCacheUpdate(shard, host, namespace string, endpoints []*model.Endpoint)
	// SvcUpdate tells that host was added, updated or deleted. On delete the
	// server drops the host's endpoint shards.
	SvcUpdate(shard, host, namespace string, event model.Event)
	// ConfigUpdate requests a push; req.Full selects a full push.
	ConfigUpdate(req *model.PushRequest)
}

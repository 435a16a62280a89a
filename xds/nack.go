package xds

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
)

// nackedFirstVersion stands in for the empty version_info of a SotW NACK of
// a stream's first response of a type (see nackGuard). Any non-empty value
// works: the caches' versions are numbers.
const nackedFirstVersion = "nacked"

// nackGuard keeps a NACKed resource from being re-sent before it changes.
//
// go-control-plane records the versions a stream was sent when it sends them
// (server/sotw/v3 streamWrapper.send, server/delta/v3 processDelta), so a
// NACK, like an ACK, opens a watch that answers only when a resource differs
// from what was sent: the NACKed version is not re-sent. Delta keeps to that
// in every case. SotW has one gap: resourceCache.CreateWatch, as
// go-control-plane's LinearCache, answers at once when the request's
// version_info is empty ("the client has no state"), and a NACK of the
// stream's first response of a type carries an empty version_info, because
// the client never accepted one. For CDS and LDS that
// answer is the full state again, which the client NACKs again, in a loop.
// nackGuard gives such a request a non-empty version_info.
type nackGuard struct {
	cachev3.Cache
}

// CreateWatch implements cachev3.ConfigWatcher.
func (g nackGuard) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	if req.GetErrorDetail() != nil && req.GetVersionInfo() == "" {
		req = proto.Clone(req).(*discovery.DiscoveryRequest)
		req.VersionInfo = nackedFirstVersion
	}
	return g.Cache.CreateWatch(req, sub, out)
}

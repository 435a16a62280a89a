// Package model is the vocabulary every meshbridge stage shares: the config
// object held by the aggregate store (Config, ConfigKey, Kind), store events
// (Event), the push vocabulary (PushRequest, TriggerReason) and the
// registry-neutral view of a mesh service that the xDS generators consume
// (Service, Port, Endpoint).
//
// Rules:
//  1. A ConfigKey (kind, namespace, name) identifies one object; it is unique in
//     the store (Istio pilot/pkg/model/config.go ConfigStore contract).
//  2. Config objects are read-only once handed to the store or read from it; a
//     writer builds a new object (Istio ConfigStore: "Objects returned ... must
//     not be modified").
//  3. PushRequest.Merge ORs Full, unions ConfigsUpdated, sums Reason counts and
//     keeps the oldest Start (Istio pilot/pkg/model/push_context.go Merge).
//
// Not here: storage, translation, push decisions or xDS encoding; this package
// holds types and their small pure helpers only and imports no other meshbridge
// package.
package model

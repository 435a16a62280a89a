package eureka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file reads Eureka's REST answers (GET /apps and GET /apps/delta with
// Accept: application/json, Eureka's EurekaJacksonCodec):
//
//	{"applications": {"versions__delta": "1", "apps__hashcode": "UP_2_",
//	  "application": [{"name": "ORDERS", "instance": [{"instanceId": "...",
//	    "app": "ORDERS", "hostName": "...", "ipAddr": "10.0.0.5",
//	    "status": "UP", "overriddenStatus": "UNKNOWN",
//	    "port": {"$": 8080, "@enabled": "true"},
//	    "securePort": {"$": 443, "@enabled": "false"},
//	    "dataCenterInfo": {"@class": "...", "name": "MyOwn"},
//	    "metadata": {"zone": "z1"}, "actionType": "ADDED", ...}]}]}}
//
// Older codecs (XStream's JSON) write a one-element list as the element
// itself, and numbers and booleans as strings; both shapes are read.

// Eureka instance statuses (com.netflix.appinfo.InstanceInfo.InstanceStatus).
const (
	StatusUp      = "UP"
	statusUnknown = "UNKNOWN"
)

// Delta action types (InstanceInfo.ActionType).
const (
	actionAdded    = "ADDED"
	actionModified = "MODIFIED"
	actionDeleted  = "DELETED"
)

// applications is an answer of GET /apps or GET /apps/delta.
type applications struct {
	// Hashcode is the server's reconcile hashcode of its whole registry
	// (apps__hashcode), "" when it sent none.
	Hashcode string
	Apps     []application
}

type application struct {
	Name      string
	Instances []instance
}

// instance is what the registry keeps of one Eureka instance: the fields
// the mesh needs, as the server wrote them.
type instance struct {
	App              string
	ID               string // instanceId, else hostName (InstanceInfo.getId)
	HostName         string
	IPAddr           string
	Status           string
	OverriddenStatus string
	Port             uint64
	PortEnabled      bool
	SecurePort       uint64
	SecureEnabled    bool
	// AvailabilityZone is dataCenterInfo's availability-zone (an Amazon
	// data center); "" otherwise.
	AvailabilityZone string
	Metadata         map[string]string
	ActionType       string
}

// decodeApplications reads an answer of GET /apps or /apps/delta.
func decodeApplications(body []byte) (applications, error) {
	var w struct {
		Applications *struct {
			Hashcode    flexString                 `json:"apps__hashcode"`
			Application oneOrMany[wireApplication] `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return applications{}, fmt.Errorf("decode the registry: %w", err)
	}
	if w.Applications == nil {
		return applications{}, fmt.Errorf(`decode the registry: no "applications" object in the answer`)
	}
	out := applications{Hashcode: string(w.Applications.Hashcode), Apps: make([]application, 0, len(w.Applications.Application))}
	for _, a := range w.Applications.Application {
		app := application{Name: a.Name, Instances: make([]instance, 0, len(a.Instance))}
		for _, in := range a.Instance {
			app.Instances = append(app.Instances, in.instance(a.Name))
		}
		out.Apps = append(out.Apps, app)
	}
	return out, nil
}

type wireApplication struct {
	Name     string                  `json:"name"`
	Instance oneOrMany[wireInstance] `json:"instance"`
}

type wireInstance struct {
	InstanceID          flexString            `json:"instanceId"`
	App                 flexString            `json:"app"`
	HostName            flexString            `json:"hostName"`
	IPAddr              flexString            `json:"ipAddr"`
	Status              flexString            `json:"status"`
	OverriddenStatus    flexString            `json:"overriddenStatus"`
	OverriddenStatusOld flexString            `json:"overriddenstatus"`
	Port                wirePort              `json:"port"`
	SecurePort          wirePort              `json:"securePort"`
	DataCenterInfo      wireDataCenter        `json:"dataCenterInfo"`
	Metadata            map[string]flexString `json:"metadata"`
	ActionType          flexString            `json:"actionType"`
}

func (w wireInstance) instance(app string) instance {
	in := instance{
		App:              strings.ToUpper(cmpOr(string(w.App), app)),
		ID:               cmpOr(string(w.InstanceID), string(w.HostName)),
		HostName:         string(w.HostName),
		IPAddr:           string(w.IPAddr),
		Status:           strings.ToUpper(string(w.Status)),
		OverriddenStatus: strings.ToUpper(cmpOr(string(w.OverriddenStatus), string(w.OverriddenStatusOld))),
		Port:             w.Port.Number,
		PortEnabled:      w.Port.Enabled,
		SecurePort:       w.SecurePort.Number,
		SecureEnabled:    w.SecurePort.Enabled,
		ActionType:       strings.ToUpper(string(w.ActionType)),
	}
	in.AvailabilityZone = string(w.DataCenterInfo.Metadata["availability-zone"])
	for k, v := range w.Metadata {
		if strings.HasPrefix(k, "@") { // the codec's type marker ("@class")
			continue
		}
		if in.Metadata == nil {
			in.Metadata = make(map[string]string, len(w.Metadata))
		}
		in.Metadata[k] = string(v)
	}
	return in
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// wirePort is {"$": 8080, "@enabled": "true"}.
type wirePort struct {
	Number  uint64
	Enabled bool
}

func (p *wirePort) UnmarshalJSON(b []byte) error {
	var w struct {
		Number  flexString `json:"$"`
		Enabled flexString `json:"@enabled"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Enabled = strings.EqualFold(string(w.Enabled), "true")
	if w.Number != "" {
		n, err := strconv.ParseUint(string(w.Number), 10, 32)
		if err != nil {
			// An unreadable port is a port the instance does not serve:
			// convert reports the instance as invalid.
			n = 0
		}
		p.Number = n
	}
	return nil
}

type wireDataCenter struct {
	Metadata map[string]flexString `json:"metadata"`
}

// flexString is a JSON string, number or boolean, as text.
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = flexString(v)
		return nil
	}
	if b[0] == '{' || b[0] == '[' {
		return fmt.Errorf("want a string, number or boolean, got %.20s", b)
	}
	*s = flexString(b)
	return nil
}

// oneOrMany is a JSON list, or its one element written alone.
type oneOrMany[T any] []T

func (o *oneOrMany[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		return nil
	case b[0] == '[':
		var v []T
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*o = v
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = oneOrMany[T]{v}
	return nil
}

// reconcileHashcode is Eureka's hashcode of a registry
// (Applications.getReconcileHashCode): for each status in name order, the
// status, "_", the number of instances in it, "_"; "" for none. It counts
// instances per status only, so two registries with the same counts have the
// same hashcode (doc.go rule 3).
func reconcileHashcode(counts map[string]int) string {
	statuses := make([]string, 0, len(counts))
	for s, n := range counts {
		if n > 0 {
			statuses = append(statuses, s)
		}
	}
	slices.Sort(statuses)
	var b strings.Builder
	for _, s := range statuses {
		b.WriteString(s)
		b.WriteByte('_')
		b.WriteString(strconv.Itoa(counts[s]))
		b.WriteByte('_')
	}
	return b.String()
}

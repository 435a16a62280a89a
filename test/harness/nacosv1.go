package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// nacosV1 is the Nacos 1.x HTTP API's read side that both Nacos-protocol
// servers of the harness serve (Nacos, Polaris): do sends one request
// (form in the query for GET) and returns the body of a 200.
type nacosV1 struct {
	do func(method, path string, form url.Values) ([]byte, error)
}

// nacosServiceName is a service's name on the Nacos 1.x HTTP API:
// "group@@service" (the form nacos-sdk-go sends), which Polaris reads the
// group from; it ignores a groupName parameter.
func nacosServiceName(group, service string) string {
	if group == "" {
		group = defaultNacosGroup
	}
	return group + "@@" + service
}

// NacosInstance is an instance as the Nacos 1.x HTTP API lists it.
type NacosInstance struct {
	InstanceID  string            `json:"instanceId"`
	IP          string            `json:"ip"`
	Port        int               `json:"port"`
	Weight      float64           `json:"weight"`
	Healthy     bool              `json:"healthy"`
	Enabled     bool              `json:"enabled"`
	Ephemeral   bool              `json:"ephemeral"`
	ClusterName string            `json:"clusterName"`
	ServiceName string            `json:"serviceName"`
	Metadata    map[string]string `json:"metadata"`
}

// listServices returns the names of the services in group and namespace
// (GET /nacos/v1/ns/service/list, one page of up to 10,000), without the
// group prefix; namespace "" or "public" is the default namespace, group ""
// is DEFAULT_GROUP.
func (a nacosV1) listServices(namespace, group string) ([]string, error) {
	form := url.Values{"pageNo": {"1"}, "pageSize": {"10000"}}
	if namespace != "" {
		form.Set("namespaceId", namespace)
	}
	if group != "" {
		form.Set("groupName", group)
	}
	b, err := a.do(http.MethodGet, "/nacos/v1/ns/service/list", form)
	if err != nil {
		return nil, err
	}
	var page struct {
		Doms []string `json:"doms"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, fmt.Errorf("decode %q: %v", b, err)
	}
	return page.Doms, nil
}

// listInstances returns the enabled instances of service in group and
// namespace, healthy or not (GET /nacos/v1/ns/instance/list).
func (a nacosV1) listInstances(namespace, group, service string) ([]NacosInstance, error) {
	form := url.Values{"serviceName": {nacosServiceName(group, service)}, "healthyOnly": {"false"}}
	if namespace != "" {
		form.Set("namespaceId", namespace)
	}
	b, err := a.do(http.MethodGet, "/nacos/v1/ns/instance/list", form)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s/%s/%s: %v", namespace, group, service, err)
	}
	var svc struct {
		Hosts []NacosInstance `json:"hosts"`
	}
	if err := json.Unmarshal(b, &svc); err != nil {
		return nil, fmt.Errorf("decode instances of %s/%s/%s %q: %v", namespace, group, service, b, err)
	}
	return svc.Hosts, nil
}

package dubbo

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// demoChild is a provider child as Dubbo writes it under
// /dubbo/com.foo.DemoService/providers: the URL encoded once, the methods'
// comma as %2C.
const demoChild = "dubbo%3A%2F%2F127.0.0.1%3A20880%2Fcom.foo.DemoService%3Fanyhost%3Dtrue%26application%3Ddemo%26" +
	"interface%3Dcom.foo.DemoService%26methods%3DsayHello%2Cgreet%26pid%3D123%26side%3Dprovider%26" +
	"timestamp%3D1700000000000%26version%3D1.0.0%26group%3Dg1%26weight%3D0"

// TestParseProviderURL: provider children as ZooKeeper holds them (doc.go
// rules 1 and 2).
func TestParseProviderURL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		child   string
		want    Provider
		notProv bool   // ErrNotProvider
		wantErr string // substring of a malformed URL's error
	}{
		{
			name:  "a Dubbo 2 provider, encoded once, methods' comma as %2C",
			child: demoChild,
			want: Provider{
				Protocol: "dubbo", Address: "127.0.0.1", Port: 20880,
				Interface: "com.foo.DemoService", Group: "g1", Version: "1.0.0", Application: "demo",
				Methods: []string{"greet", "sayHello"},
				Params: map[string]string{"anyhost": "true", "application": "demo", "interface": "com.foo.DemoService",
					"methods": "sayHello,greet", "pid": "123", "side": "provider", "timestamp": "1700000000000",
					"version": "1.0.0", "group": "g1", "weight": "0"},
			},
		},
		{
			name:  "tri scheme, upper-cased, with a weight",
			child: url.QueryEscape("TRI://10.0.0.2:50051/com.foo.DemoService?interface=com.foo.DemoService&side=provider&weight=50"),
			want: Provider{
				Protocol: "tri", Address: "10.0.0.2", Port: 50051, Interface: "com.foo.DemoService", Weight: 50,
				Params: map[string]string{"interface": "com.foo.DemoService", "side": "provider", "weight": "50"},
			},
		},
		{
			name:  "IPv6 address in brackets",
			child: url.QueryEscape("dubbo://[::1]:20880/com.foo.DemoService?side=provider"),
			want: Provider{
				Protocol: "dubbo", Address: "::1", Port: 20880, Interface: "com.foo.DemoService",
				Params: map[string]string{"interface": "com.foo.DemoService", "side": "provider"},
			},
		},
		{
			name: "values encoded twice in the child come out decoded once more, & and , included",
			child: "dubbo%3A%2F%2F10.0.0.3%3A20880%2Fcom.foo.DemoService%3Fside%3Dprovider%26" +
				"tag%3Da%252Cb%2526c%26methods%3Dx%252Cy",
			want: Provider{
				Protocol: "dubbo", Address: "10.0.0.3", Port: 20880, Interface: "com.foo.DemoService",
				Methods: []string{"x", "y"},
				Params:  map[string]string{"interface": "com.foo.DemoService", "side": "provider", "tag": "a,b&c", "methods": "x,y"},
			},
		},
		{
			name:  "the interface parameter wins over the path",
			child: url.QueryEscape("dubbo://10.0.0.4:20880/demo-path?interface=com.foo.Real&side=provider"),
			want: Provider{
				Protocol: "dubbo", Address: "10.0.0.4", Port: 20880, Interface: "com.foo.Real",
				Params: map[string]string{"interface": "com.foo.Real", "side": "provider"},
			},
		},
		{
			name:  "without an interface parameter the path is the interface",
			child: url.QueryEscape("dubbo://10.0.0.5:20880/com.foo.FromPath?side=provider"),
			want: Provider{
				Protocol: "dubbo", Address: "10.0.0.5", Port: 20880, Interface: "com.foo.FromPath",
				Params: map[string]string{"interface": "com.foo.FromPath", "side": "provider"},
			},
		},
		{
			name: "a consumer URL, as Dubbo writes it (no port), is not a provider",
			child: url.QueryEscape("consumer://10.0.0.9/com.foo.DemoService?application=client&category=consumers&" +
				"interface=com.foo.DemoService&methods=sayHello&pid=7&side=consumer&timestamp=1"),
			notProv: true,
		},
		{
			name:    "a configurator (override://0.0.0.0, no port) is not a provider",
			child:   url.QueryEscape("override://0.0.0.0/com.foo.DemoService?category=configurators&disabled=true"),
			notProv: true,
		},
		{
			name:    "a router is not a provider",
			child:   url.QueryEscape("route://0.0.0.0/com.foo.DemoService?category=routers&rule=x"),
			notProv: true,
		},
		{name: "no port", child: url.QueryEscape("dubbo://10.0.0.1/com.foo.DemoService?side=provider"), wantErr: `port "" is not in 1-65535`},
		{name: "port 0", child: url.QueryEscape("dubbo://10.0.0.1:0/com.foo.DemoService"), wantErr: `port "0" is not in 1-65535`},
		{name: "port 70000", child: url.QueryEscape("dubbo://10.0.0.1:70000/com.foo.DemoService"), wantErr: `port "70000" is not in 1-65535`},
		{name: "no host", child: url.QueryEscape("dubbo:///com.foo.DemoService?side=provider"), wantErr: "no protocol or no host"},
		{name: "a port but no host", child: url.QueryEscape("dubbo://:20880/com.foo.DemoService"), wantErr: "no address"},
		{name: "no scheme", child: url.QueryEscape("10.0.0.1:20880/com.foo.DemoService"), wantErr: "provider URL"},
		{name: "a bad escape", child: "dubbo%3A%2F%2F10.0.0.1%3A20880%2Fcom.foo.DemoService%ZZ", wantErr: "not URL-encoded"},
		{name: "no interface", child: url.QueryEscape("dubbo://10.0.0.1:20880/?side=provider"), wantErr: "no interface"},
		{name: "no interface and no path", child: url.QueryEscape("dubbo://10.0.0.1:20880"), wantErr: "no interface"},
		{name: "empty", child: "", wantErr: "no protocol or no host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProviderURL(tc.child)
			switch {
			case tc.notProv:
				if !errors.Is(err, ErrNotProvider) {
					t.Fatalf("ParseProviderURL = %+v, %v; want ErrNotProvider", got, err)
				}
			case tc.wantErr != "":
				if err == nil || errors.Is(err, ErrNotProvider) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseProviderURL = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatalf("ParseProviderURL: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("ParseProviderURL (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestParseProviderURLClipsErrors: a malformed URL's error quotes at most
// 200 characters of it.
func TestParseProviderURLClipsErrors(t *testing.T) {
	long := url.QueryEscape("dubbo://10.0.0.1/com.foo.DemoService?x=" + strings.Repeat("a", 1000))
	_, err := ParseProviderURL(long)
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "…") {
		t.Errorf("ParseProviderURL(long) error = %v, want one clipped to about 200 characters", err)
	}
}

// TestProviderFromParams: a provider from its parts, as Nacos holds it
// (doc.go rules 1, 2 and 6).
func TestProviderFromParams(t *testing.T) {
	for _, tc := range []struct {
		name            string
		protocol, addr  string
		port            uint32
		params          map[string]string
		want            Provider
		notProv         bool
		wantErr         string
		wantServiceName string
	}{
		{
			name: "every field", protocol: "tri", addr: "10.0.0.1", port: 50051,
			params: map[string]string{"interface": "com.foo.X", "group": "g", "version": "2.0", "application": "app",
				"weight": "30", "methods": " b, a,,a ", "side": "provider", "category": "providers"},
			want: Provider{Protocol: "tri", Address: "10.0.0.1", Port: 50051, Interface: "com.foo.X", Group: "g",
				Version: "2.0", Application: "app", Weight: 30, Methods: []string{"a", "b"},
				Params: map[string]string{"interface": "com.foo.X", "group": "g", "version": "2.0", "application": "app",
					"weight": "30", "methods": " b, a,,a ", "side": "provider", "category": "providers"}},
			wantServiceName: "providers:com.foo.X:2.0:g",
		},
		{
			name: "no protocol is dubbo; brackets are trimmed; no side is a provider", addr: "[fd00::1]", port: 20880,
			params:          map[string]string{"interface": "com.foo.X"},
			want:            Provider{Protocol: "dubbo", Address: "fd00::1", Port: 20880, Interface: "com.foo.X", Params: map[string]string{"interface": "com.foo.X"}},
			wantServiceName: "providers:com.foo.X::",
		},
		{
			name: "an invalid weight is 0", protocol: "DUBBO", addr: "10.0.0.1", port: 1,
			params:          map[string]string{"interface": "com.foo.X", "weight": "heavy"},
			want:            Provider{Protocol: "dubbo", Address: "10.0.0.1", Port: 1, Interface: "com.foo.X", Params: map[string]string{"interface": "com.foo.X", "weight": "heavy"}},
			wantServiceName: "providers:com.foo.X::",
		},
		{name: "side=consumer", addr: "10.0.0.1", port: 1, params: map[string]string{"interface": "com.foo.X", "side": "consumer"}, notProv: true},
		{name: "category=routers", addr: "10.0.0.1", port: 1, params: map[string]string{"interface": "com.foo.X", "category": "routers"}, notProv: true},
		{name: "a consumer without an interface is still just not a provider", params: map[string]string{"side": "consumer"}, notProv: true},
		{name: "no interface", addr: "10.0.0.1", port: 1, params: map[string]string{"side": "provider"}, wantErr: "no interface"},
		{name: "no address", port: 1, params: map[string]string{"interface": "com.foo.X"}, wantErr: "no address"},
		{name: "nil params", addr: "10.0.0.1", port: 1, wantErr: "no interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ProviderFromParams(tc.protocol, tc.addr, tc.port, tc.params)
			switch {
			case tc.notProv:
				if !errors.Is(err, ErrNotProvider) {
					t.Fatalf("ProviderFromParams = %+v, %v; want ErrNotProvider", got, err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ProviderFromParams = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatalf("ProviderFromParams: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("ProviderFromParams (-want +got):\n%s", diff)
				}
				if n := got.ServiceName(); n != tc.wantServiceName {
					t.Errorf("ServiceName() = %q, want %q", n, tc.wantServiceName)
				}
			}
		})
	}
}

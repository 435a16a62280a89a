package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshbridge/meshbridge/xds"
)

// defaultStatusAddress is http.debugAddress's default, as a URL.
const defaultStatusAddress = "http://127.0.0.1:15015"

// statusTimeout bounds each request status makes.
const statusTimeout = 10 * time.Second

// statusSources are the debug pages status reads, in the order of its
// tables and under the keys of its JSON output.
var statusSources = []struct{ key, path string }{
	{"registries", "/debug/registryz"},
	{"xds", "/debug/syncz"},
	{"kubernetes", "/debug/kubez"},
}

// cmdStatus is "meshbridge status": the state of a running bridge, read
// from its debug address, as tables of its registries, its xDS streams and
// its Kubernetes writer, or with -o json the pages' data as one object.
func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	address := fs.String("address", defaultStatusAddress, "the bridge's http.debugAddress, as a URL or host:port")
	output := fs.String("o", "table", "output format: table or json")
	if done, code := parseFlags(fs, args, commandUsage("status [--address URL] [-o table|json]"), stdout, stderr); done {
		return code
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "meshbridge status: -o: %q is not one of table, json\n", *output)
		return 2
	}
	base := strings.TrimRight(*address, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Timeout: statusTimeout}
	raw := make(map[string]json.RawMessage, len(statusSources))
	for _, src := range statusSources {
		body, err := fetchDebug(client, base+src.path)
		if err != nil {
			fmt.Fprintf(stderr, "meshbridge status: %v\n", err)
			return 1
		}
		raw[src.key] = body
	}
	if *output == "json" {
		out, err := json.MarshalIndent(raw, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "meshbridge status: %v\n", err)
			return 1
		}
		_, _ = stdout.Write(append(out, '\n'))
		return 0
	}
	if err := printStatus(stdout, raw); err != nil {
		fmt.Fprintf(stderr, "meshbridge status: %v\n", err)
		return 1
	}
	return 0
}

// fetchDebug GETs a debug page and returns its JSON body; the error says
// what failed in words an operator can act on.
func fetchDebug(client *http.Client, url string) (json.RawMessage, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w (is meshbridge running, and is --address its http.debugAddress?)", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		// http.address answers 404 for every debug page: the likeliest
		// mistake is its port.
		return nil, fmt.Errorf("GET %s: %s: is --address the bridge's http.debugAddress (default %s)? "+
			"http.address serves only /metrics, /healthz and /readyz", url, resp.Status, defaultStatusAddress)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("GET %s: %s%s", url, resp.Status, msg)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("GET %s: the answer is not JSON (is --address the debug address, not http.address?)", url)
	}
	return bytes.TrimSpace(body), nil
}

// printStatus prints the tables of the pages' data, keyed as in
// statusSources. Ages are measured from the server's clock (syncz's time).
func printStatus(w io.Writer, raw map[string]json.RawMessage) error {
	var (
		regs []registryzEntry
		sync xds.SyncStatus
		kz   kubez
	)
	for key, v := range map[string]any{"registries": &regs, "xds": &sync, "kubernetes": &kz} {
		if err := json.Unmarshal(raw[key], v); err != nil {
			return fmt.Errorf("decode the %s status: %w", key, err)
		}
	}
	now := sync.Time
	if now.IsZero() {
		now = time.Now()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REGISTRY\tTYPE\tUP\tSTALE\tSERVICES\tINSTANCES\tLAST SYNC\tHELD DELETES\tLAST ERROR")
	for _, r := range regs {
		last := r.LastListing
		if last.IsZero() {
			last = r.LastSuccess
		}
		lastSync := age(now, last)
		if !r.Synced {
			lastSync = "never"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Name, r.Type, yesNo(r.Up), yesNo(r.Stale),
			r.Services, r.Instances, lastSync, heldDeletes(r), cell(r.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if len(sync.Streams) == 0 {
		fmt.Fprintln(w, "No xDS streams.")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPEER\tMODE\tCLIENT\tTYPE\tSENT\tACKED\tLAST ACK\tSUBSTITUTED\tLAST NACK")
		for _, s := range sync.Streams {
			node, peer, mode, client := cmp.Or(s.Node, "-"), cmp.Or(s.Peer, "-"), s.Mode, cmp.Or(s.Client, "-")
			if s.Family != "" && s.Family != s.Client {
				client += "/" + s.Family // "grpc/grpc-js"
			}
			if s.Listener != "" && s.Listener != "xds" {
				client += " (" + s.Listener + " listener)"
			}
			substituted := cell(strings.Join(s.Substituted, ", "))
			if len(s.Types) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\t%s\t-\n", node, peer, mode, client, substituted)
			}
			for i, t := range s.Types {
				if i > 0 {
					node, peer, mode, client, substituted = "", "", "", "", ""
				}
				nack := "-"
				if n := t.NACK; n != nil && n.Version != "" {
					nack = cell(n.Version + ": " + n.Message)
				} else if n != nil {
					nack = cell(n.Message)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", node, peer, mode, client, shortType(t.TypeURL),
					cmp.Or(t.Sent, "-"), cmp.Or(t.Acked, "-"), age(now, t.AckedAt), substituted, nack)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	if !kz.Enabled {
		fmt.Fprintln(w, "Kubernetes output: off (kubernetes.enabled is false).")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KUBERNETES NAMESPACE\tLEADER\tQUEUE\tLAST RESYNC\tLAST ERROR")
	lastErr := "-"
	if kz.LastError != "" {
		lastErr = cell(kz.LastError) + " (" + age(now, kz.LastErrorTime) + " ago)"
	}
	fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", kz.Namespace, yesNo(kz.Leading), kz.Pending, age(now, kz.LastResync), lastErr)
	return tw.Flush()
}

// heldDeletes is a registry's removals waiting: the delete guard's, and
// disappearances in their hold-down.
func heldDeletes(r registryzEntry) string {
	var parts []string
	if g := r.DeleteGuard; g != nil {
		parts = append(parts, fmt.Sprintf("%d services (%d instances) by the delete guard", g.Services, g.Instances))
	}
	if r.HeldDown > 0 {
		parts = append(parts, fmt.Sprintf("%d in hold-down", r.HeldDown))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// shortType names a type URL in a table: CDS, EDS, LDS, RDS for the types
// meshbridge generates, the kind and version of an Istio config type
// (MCP), the message name of any other proto type.
func shortType(typeURL string) string {
	switch {
	case typeURL == "type.googleapis.com/envoy.config.cluster.v3.Cluster":
		return "CDS"
	case typeURL == "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment":
		return "EDS"
	case typeURL == "type.googleapis.com/envoy.config.listener.v3.Listener":
		return "LDS"
	case typeURL == "type.googleapis.com/envoy.config.route.v3.RouteConfiguration":
		return "RDS"
	case strings.HasPrefix(typeURL, "type.googleapis.com/"):
		name := strings.TrimPrefix(typeURL, "type.googleapis.com/")
		return name[strings.LastIndex(name, ".")+1:]
	}
	if parts := strings.Split(typeURL, "/"); len(parts) == 3 {
		return parts[2] + " " + parts[1] // "ServiceEntry v1"
	}
	return typeURL
}

// maxCell bounds a free-text cell; -o json shows the whole text.
const maxCell = 80

// cell is s for a table: "-" when empty, one line, at most maxCell runes.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > maxCell {
		return string(r[:maxCell-1]) + "…"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// age is how long before now t was, in at most two units ("4s", "3m20s",
// "2h5m", "3d4h"), or "-" for a zero t.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0).Round(time.Second)
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + "s"
	case s < 3600:
		return twoUnits(s/60, "m", s%60, "s")
	case s < 86400:
		return twoUnits(s/3600, "h", s%3600/60, "m")
	}
	return twoUnits(s/86400, "d", s%86400/3600, "h")
}

func twoUnits(a int64, ua string, b int64, ub string) string {
	if b == 0 {
		return strconv.FormatInt(a, 10) + ua
	}
	return strconv.FormatInt(a, 10) + ua + strconv.FormatInt(b, 10) + ub
}

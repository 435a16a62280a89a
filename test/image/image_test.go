package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// root is the checkout, relative to this package.
const root = "../.."

// archive is a docker-archive tarball read into memory: its files by name.
type archive map[string][]byte

// manifest is an entry of a docker-archive's manifest.json.
type manifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is what the test reads of an image's configuration (the
// OCI/Docker image config JSON).
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Env          []string            `json:"Env"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// file is a regular file or directory of the unpacked image.
type file struct {
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// TestMakeImage runs make image as an operator would, with no container
// engine, and checks what it wrote with nothing but the standard library: a
// docker-archive tarball (what docker load and kind load image-archive
// take) of one image, tagged <the chart's image.repository>:<VERSION>, whose
// layers match its config's diff IDs; run as 65532:65532 with the binary as
// entrypoint and the chart's config path as command; labelled with the
// version; holding a static binary, CA certificates that parse, and passwd
// and group entries for 65532 (the user the chart's security contexts
// require). The binary unpacked from it reports VERSION.
func TestMakeImage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("no make: %v", err)
	}
	const version = "v0.0.0-1-gimagetest"
	out := filepath.Join(t.TempDir(), "meshbridge-image.tar")
	cmd := exec.Command("make", "-s", "-C", root, "image", "VERSION="+version, "IMAGE_TAR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}
	a := readArchive(t, out)

	var ms []manifest
	if err := json.Unmarshal(a["manifest.json"], &ms); err != nil || len(ms) != 1 {
		t.Fatalf("manifest.json: %v: %s", err, a["manifest.json"])
	}
	m := ms[0]
	repo := chartValue(t, "image", "repository").(string)
	if want := []string{repo + ":" + version}; !slices.Equal(m.RepoTags, want) {
		t.Errorf("RepoTags %v, want %v (the chart's image.repository and the version)", m.RepoTags, want)
	}
	var cfg imageConfig
	if err := json.Unmarshal(a[m.Config], &cfg); err != nil {
		t.Fatalf("config %s: %v", m.Config, err)
	}
	if sum := sha256.Sum256(a[m.Config]); strings.TrimSuffix(strings.TrimPrefix(path.Base(m.Config), "sha256:"), ".json") != hex.EncodeToString(sum[:]) {
		t.Errorf("config %s: its digest is sha256:%x", m.Config, sum)
	}

	// The config: the chart's user, command and ports.
	c := cfg.Config
	uid := chartValue(t, "securityContext", "runAsUser")
	gid := chartValue(t, "securityContext", "runAsGroup")
	if want := fmt.Sprintf("%v:%v", uid, gid); c.User != want || want != "65532:65532" {
		t.Errorf("User %q; the chart runs as %s (distroless nonroot, 65532:65532)", c.User, want)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/meshbridge"}) ||
		!slices.Equal(c.Cmd, []string{"run", "--config", "/etc/meshbridge/config.yaml"}) {
		t.Errorf("Entrypoint %q, Cmd %q; want the binary and run --config /etc/meshbridge/config.yaml (the chart's mount)", c.Entrypoint, c.Cmd)
	}
	for _, p := range []string{"15010/tcp", "15014/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("ExposedPorts %v lack %s", c.ExposedPorts, p)
		}
	}
	rev, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.title":    "meshbridge",
		"org.opencontainers.image.source":   "https://github.com/meshbridge/meshbridge",
		"org.opencontainers.image.revision": strings.TrimSpace(string(rev)),
	} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}

	// The layers: each matches its diff ID; unpacked, they are the root.
	if len(m.Layers) != len(cfg.RootFS.DiffIDs) || len(m.Layers) == 0 {
		t.Fatalf("%d layers, %d diff IDs", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	fsys := map[string]file{}
	for i, l := range m.Layers {
		raw := uncompressed(t, a[l])
		if sum := sha256.Sum256(raw); cfg.RootFS.DiffIDs[i] != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("layer %s: diff ID sha256:%x, the config says %s", l, sum, cfg.RootFS.DiffIDs[i])
		}
		unpack(t, raw, fsys)
	}
	bin, ok := fsys["usr/local/bin/meshbridge"]
	if !ok || bin.mode&0o111 == 0 || bin.uid != 0 {
		t.Fatalf("/usr/local/bin/meshbridge: %+v (present %v)", bin.mode, ok)
	}
	if f := fsys["etc/passwd"]; !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(f.data) {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", f.data)
	}
	if f := fsys["etc/group"]; !regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(f.data) {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", f.data)
	}
	if f := fsys["etc/ssl/certs/ca-certificates.crt"]; !x509.NewCertPool().AppendCertsFromPEM(f.data) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no CA certificate")
	}
	if f := fsys["tmp"]; !f.dir || f.mode&0o1777 != 0o1777 {
		t.Errorf("/tmp: %+v, want a sticky world-writable directory", f)
	}
	if f := fsys["home/nonroot"]; !f.dir || f.uid != 65532 {
		t.Errorf("/home/nonroot: %+v, want a directory of 65532", f)
	}

	// The binary: static (the base is empty: no libc, no loader), and it runs.
	dir := t.TempDir()
	p := filepath.Join(dir, "meshbridge")
	if err := os.WriteFile(p, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range e.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%s): it cannot run on an empty base", prog.Type)
		}
	}
	_ = e.Close()
	got, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "meshbridge "+version+" (") {
		t.Errorf("unpacked meshbridge --version: %v\n%s\nwant meshbridge %s (...)", err, got, version)
	}
}

// readArchive reads a tar file's regular files.
func readArchive(t *testing.T, p string) archive {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := archive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a[h.Name] = b
	}
}

// uncompressed returns a layer's tar, gunzipped when it is gzip.
func uncompressed(t *testing.T, b []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unpack applies a layer's tar to fsys, by clean relative path.
func unpack(t *testing.T, layer []byte, fsys map[string]file) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = file{mode: h.Mode, uid: h.Uid, gid: h.Gid, dir: h.Typeflag == tar.TypeDir, data: data}
	}
}

// chartValue is the chart's default value at path.
func chartValue(t *testing.T, path ...string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts/meshbridge/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	if v == nil {
		t.Fatalf("values.yaml has no %s", strings.Join(path, "."))
	}
	return v
}

// Command image builds meshbridge's container image without a container
// engine, as distroless/static is built: an empty base, one layer holding
// the static binary, CA certificates and /etc/passwd and /etc/group entries
// for root and nonroot (65532), run as 65532:65532. It writes a
// docker-archive tarball, which docker load, podman load and kind load
// image-archive take.
//
//	image --binary FILE --tag REPO:TAG --version V [--revision SHA] [--ca-certificates FILE] --out FILE.tar
//
// make image runs it (tools/build.sh image builds it); test/image unpacks
// what it writes and runs the binary. The image is reproducible: every
// file's time and the image's creation time are --created (default: the
// Unix epoch), so one binary gives one digest.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's contract, which the Helm chart relies on (test/image checks
// both): the binary's path, the user, the default command's configuration
// path, the ports.
const (
	binaryPath = "/usr/local/bin/meshbridge"
	uid        = 65532
	configPath = "/etc/meshbridge/config.yaml"
)

// passwd and group are distroless/static's entries for root and nonroot.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	binary := fs.String("binary", "", "the static meshbridge binary (CGO_ENABLED=0) for --arch")
	tag := fs.String("tag", "", "the image's name and tag, e.g. ghcr.io/meshbridge/meshbridge:v0.1.0")
	version := fs.String("version", "", "the version the binary reports (label org.opencontainers.image.version)")
	revision := fs.String("revision", "", "the commit it was built from (label org.opencontainers.image.revision)")
	cas := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to ship, PEM (Debian's ca-certificates)")
	arch := fs.String("arch", runtime.GOARCH, "the binary's GOARCH")
	created := fs.Int64("created", 0, "the image's creation time and every file's, Unix seconds (SOURCE_DATE_EPOCH)")
	out := fs.String("out", "", "the docker-archive tarball to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *tag == "" || *version == "" || *out == "" {
		return errors.New("--binary, --tag, --version and --out are required")
	}
	ref, err := name.NewTag(*tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("--tag: %w", err)
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	bundle, err := os.ReadFile(*cas)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(bundle) {
		return fmt.Errorf("--ca-certificates %s holds no certificate", *cas)
	}
	at := time.Unix(*created, 0).UTC()
	layerTar, err := rootfs(at, bin, bundle)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: at}, CreatedBy: "meshbridge tools/image: " + binaryPath + ", CA certificates, passwd",
	}})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = *arch, "linux", v1.Time{Time: at}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"run", "--config", configPath},
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		// 15010 xDS (and MCP), 15014 probes and /metrics; the debug
		// address stays on loopback.
		ExposedPorts: map[string]struct{}{"15010/tcp": {}, "15014/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "meshbridge",
			"org.opencontainers.image.description": "Bridges Consul, Nacos and ZooKeeper (Dubbo) registries into an Istio mesh",
			"org.opencontainers.image.version":     *version,
			"org.opencontainers.image.revision":    *revision,
			"org.opencontainers.image.source":      "https://github.com/meshbridge/meshbridge",
			"org.opencontainers.image.licenses":    "Apache-2.0",
		},
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", ref, digest)
	return nil
}

// rootfs is the image's one layer, an uncompressed tar: directories first,
// every entry owned by root but nonroot's home, times at.
func rootfs(at time.Time, bin, bundle []byte) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dir := func(path string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path, Mode: mode, Uid: owner, Gid: owner, ModTime: at, Format: tar.FormatPAX})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: at, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, step := range []func() error{
		func() error { return dir("etc/", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/ssl/", 0o755, 0) },
		func() error { return dir("etc/ssl/certs/", 0o755, 0) },
		func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, bundle) },
		func() error { return dir("home/", 0o755, 0) },
		func() error { return dir("home/nonroot/", 0o700, uid) },
		func() error { return dir("tmp/", 0o1777, 0) },
		func() error { return dir("usr/", 0o755, 0) },
		func() error { return dir("usr/local/", 0o755, 0) },
		func() error { return dir("usr/local/bin/", 0o755, 0) },
		func() error { return file(binaryPath[1:], 0o755, bin) },
		tw.Close,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

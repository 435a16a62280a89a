package harness

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// This file finds the Java peers tools/build.sh builds with Maven (the Nacos
// server; see its header): for peer NAME, the Maven project tools/NAME of
// the checkout, built into
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/NAME-<key>/ whose file
// classpath (written last) is the JVM's classpath. The key covers the
// project's pom.xml and sources, so a peer built from other sources than the
// checkout's is never used.

// javaJVMFlags keep a test peer's JVM small and quick to start, as
// zooKeeperJVMFlags do: a 256 MB heap, the serial collector, the
// class-data sharing archive when there is one, C1 only, no hsperfdata file
// in /tmp, IPv4 sockets.
var javaJVMFlags = []string{
	"-Xmx256m", "-XX:+UseSerialGC", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
	"-Djava.net.preferIPv4Stack=true",
}

// JavaPeerClasspath returns the classpath of Java peer name (see the file
// comment): the contents of DIR/classpath, where DIR is $env when set (make
// test sets it from tools/build.sh's NAME=DIR), else the cache directory
// tools/build.sh NAME builds the checkout's tools/NAME into. When there is
// none, it skips the test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1.
func JavaPeerClasspath(t testing.TB, name, env string) string {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		missing(t, name, "no java on PATH for the Java peer "+name)
	}
	dir := os.Getenv(env)
	if dir == "" {
		root, err := checkoutRoot()
		if err != nil {
			missing(t, name, fmt.Sprintf("no %s: set %s (%v)", name, env, err))
		}
		key, err := mavenSourceKey(filepath.Join(root, "tools", name))
		if err != nil {
			missing(t, name, fmt.Sprintf("no %s: set %s (%v)", name, env, err))
		}
		dir = filepath.Join(cacheDir(), name+"-"+key)
	}
	b, err := os.ReadFile(filepath.Join(dir, "classpath"))
	if err != nil {
		missing(t, name, fmt.Sprintf("no %s built from the checkout's tools/%s (%v): set %s, or build it with tools/build.sh %s",
			name, name, err, env, name))
	}
	return strings.TrimSpace(string(b))
}

// mavenSourceKey is the cache key tools/build.sh (javakey) builds the Maven
// project in dir under: sourceKey over pom.xml and every regular file under
// src/.
func mavenSourceKey(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "pom.xml")); err != nil {
		return "", fmt.Errorf("no Maven project at %s: %w", dir, err)
	}
	files, err := regularFiles(dir, "src", func(string) bool { return true })
	if err != nil {
		return "", err
	}
	return sourceKey(dir, append(files, "pom.xml"))
}

// regularFiles returns the regular files below dir/sub whose names keep
// accepts, as slash-separated paths relative to dir.
func regularFiles(dir, sub string, keep func(name string) bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(filepath.Join(dir, sub), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && keep(d.Name()) {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// sourceKey is the first 12 hex digits of the SHA-256 of what `sha256sum
// <files>` prints in dir, files sorted bytewise (tools/build.sh's srckey
// and javakey).
func sourceKey(dir string, files []string) (string, error) {
	sort.Strings(files)
	sums := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(sums, "%x  %s\n", sha256.Sum256(b), f)
	}
	return fmt.Sprintf("%x", sums.Sum(nil))[:12], nil
}

// Package image tests the container image make image builds, without a
// container engine (there is none on the development machines or in CI):
// it runs make image as an operator would and reads the docker-archive
// tarball with the standard library alone, so that the check does not
// share code with the builder (tools/image, go-containerregistry).
//
// Rules:
//  1. The image is what the chart runs: tagged <image.repository>:<VERSION>
//     (tools/version.sh), user 65532:65532 (the chart's security contexts),
//     entrypoint the binary, command run --config /etc/meshbridge/config.yaml
//     (the chart's mount).
//  2. It is distroless/static's layout on an empty base: a static binary,
//     CA certificates, passwd and group entries for 65532, /tmp, a home.
//  3. Its layers match its config's diff IDs, and the binary unpacked from
//     it runs and reports VERSION.
package image

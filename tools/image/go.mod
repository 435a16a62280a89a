// Module image builds meshbridge's container image without a container
// engine (make image): go-containerregistry assembles it from the static
// binary and writes a docker-archive tarball. It lives apart from the
// product's go.mod so that go-containerregistry's dependencies never reach
// meshbridge users.
module github.com/meshbridge/meshbridge/tools/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)

#!/usr/bin/env bash
# Prints the checkout's version, the one version scheme of every build: the
# binary (make build, make image), the image's tag (make image) and the
# chart's default image tag (Chart.yaml appVersion, a release).
#
#   vX.Y.Z                 at a release tag vX.Y.Z
#   vX.Y.Z-N-gHASH         N commits after it (git describe)
#   v0.0.0-N-gHASH         before the first release tag, N commits in all
#   ...-dirty              with uncommitted changes
#   v0.0.0-unknown         outside a git checkout
#
# Every form is a semantic version, a pre-release sorting before the next
# release, and a valid image tag.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo v0.0.0-unknown
	exit 0
fi
if git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --abbrev=12 --dirty 2>/dev/null; then
	exit 0
fi
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=-dirty
echo "v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=12 HEAD)$dirty"

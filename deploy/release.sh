#!/usr/bin/env bash
# Builds a release of ompsync into dist/ (docs/DEVELOPMENT.md, "Releasing"):
#
#   ompsync_<version>_<os>_<arch>.tar.gz   linux and darwin, amd64 and arm64:
#                                          the binary, man pages, completions
#   ompsync_<version>_windows_<arch>.zip   windows, amd64 and arm64
#   ompsync_<version>_<arch>.deb, .rpm     linux, amd64 and arm64 (nfpm)
#   ompsync.rb                             a Homebrew formula for the archives
#   SHA256SUMS                             the checksums of all of the above
#   VERSION                                the version, as `ompsync version` prints it
#
# Usage:
#   bash deploy/release.sh             a release: HEAD must be tagged vX.Y.Z,
#                                      the tree clean, CHANGELOG.md must have X.Y.Z
#   bash deploy/release.sh --snapshot  a build of whatever is checked out, versioned
#                                      <CHANGELOG's newest>-snapshot.g<commit>
#
# Environment: RELEASE_URL, where the archives will be downloaded from (the
# Homebrew formula's URLs; default: the GitHub release of the tag).
# nfpm is installed with `go install` into GOPATH/bin, once per version, as
# .ci/run installs its S3 servers.
set -euo pipefail

NFPM_VERSION="v2.48.0"
TARGETS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64)

die() {
	echo "release: $*" >&2
	exit 1
}

snapshot=false
case "${1:-}" in
--snapshot) snapshot=true ;;
"") ;;
*) die "unknown argument '$1': run 'bash deploy/release.sh' or 'bash deploy/release.sh --snapshot'" ;;
esac

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

# --- The version: from the tag, or CHANGELOG's newest for a snapshot. ---
changelog_version="$(sed -n 's/^## \([0-9][0-9.]*\) .*/\1/p' CHANGELOG.md | head -n 1)"
[ -n "$changelog_version" ] || die "CHANGELOG.md has no '## X.Y.Z - date' heading"
commit="$(git rev-parse HEAD 2>/dev/null || true)"
if $snapshot; then
	version="$changelog_version-snapshot"
	[ -n "$commit" ] && version="$version.g${commit:0:7}"
else
	[ -n "$commit" ] || die "not a git checkout: a release is built from a tagged commit (or use --snapshot)"
	tag="$(git describe --exact-match --tags --match 'v[0-9]*' HEAD 2>/dev/null)" ||
		die "HEAD has no vX.Y.Z tag: tag it (git tag -a v$changelog_version) or use --snapshot"
	[[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "tag $tag is not vX.Y.Z"
	version="${tag#v}"
	[ -z "$(git status --porcelain)" ] || die "the tree has uncommitted changes: commit or stash them first"
	grep -q "^## $version " CHANGELOG.md || die "CHANGELOG.md has no '## $version' section: add it and tag again"
fi
[ -n "$commit" ] || commit="unknown"
# Dates in the man pages and archives: the commit's, so a release builds the
# same bytes again.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
fi
export SOURCE_DATE_EPOCH
echo "release: ompsync v$version (commit $commit)"

# --- nfpm, cached in GOPATH/bin. ---
gobin="$(go env GOPATH | cut -d: -f1)/bin"
nfpm="$gobin/nfpm"
if ! go version -m "$nfpm" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+github.com/goreleaser/nfpm/v2[[:space:]]+$NFPM_VERSION[[:space:]]"; then
	echo "release: installing nfpm $NFPM_VERSION"
	GOBIN="$gobin" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION" ||
		die "could not install nfpm $NFPM_VERSION with go install: check the network and the Go module proxy"
fi

rm -rf dist
mkdir -p dist
build="$(mktemp -d "${TMPDIR:-/tmp}/ompsync-release.XXXXXX")"
trap 'rm -rf "$build"' EXIT

# --- The binaries: static, without local paths. ---
ldflags="-s -w -X main.version=v$version -X main.commit=$commit"
for target in "${TARGETS[@]}"; do
	os="${target%/*}" arch="${target#*/}"
	exe=""
	[ "$os" = windows ] && exe=".exe"
	echo "release: building $os/$arch"
	# -buildvcs=false: the version and commit are set above, and a checkout
	# git will not read (another owner's) must not stop the build.
	CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$build/${os}_$arch/ompsync$exe" ./cmd/ompsync
done

# --- Man pages and completions, from the binary that runs here. ---
host="$build/$(go env GOHOSTOS)_$(go env GOHOSTARCH)/ompsync"
[ "$(go env GOHOSTOS)" = windows ] && host="$host.exe"
[ -x "$host" ] || die "no build for this machine ($(go env GOHOSTOS)/$(go env GOHOSTARCH)) to write the man pages with"
"$host" man --dir "$build/man"
gzip -9n -k "$build"/man/*.1
mkdir -p "$build/completions"
"$host" completion bash >"$build/completions/ompsync.bash"
"$host" completion zsh >"$build/completions/_ompsync"
"$host" completion fish >"$build/completions/ompsync.fish"

# --- Archives. ---
tar_opts=()
if tar --version 2>/dev/null | grep -q 'GNU tar'; then
	tar_opts=(--sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner)
fi
for target in "${TARGETS[@]}"; do
	os="${target%/*}" arch="${target#*/}"
	stage="$build/archive_${os}_$arch"
	mkdir -p "$stage"
	cp LICENSE README.md CHANGELOG.md "$stage/"
	name="ompsync_${version}_${os}_$arch"
	if [ "$os" = windows ]; then
		cp "$build/${os}_$arch/ompsync.exe" "$stage/"
		# A zip entry keeps its file's mtime, as local time: the commit's, in
		# UTC, in name order, so that the archive is reproducible.
		find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
		(cd "$stage" && find . -type f | LC_ALL=C sort | TZ=UTC zip -q -X -@ "$OLDPWD/dist/$name.zip")
	else
		cp "$build/${os}_$arch/ompsync" "$stage/"
		mkdir -p "$stage/man" && cp "$build"/man/*.1 "$stage/man/"
		cp -r "$build/completions" "$stage/"
		tar "${tar_opts[@]}" -C "$stage" -cf - . | gzip -9n >"dist/$name.tar.gz"
	fi
done

# --- .deb and .rpm. ---
for arch in amd64 arm64; do
	for packager in deb rpm; do
		# nfpm expands variables in some fields only: fill them all in here.
		sed -e "s#\${VERSION}#$version#g" -e "s#\${GOARCH}#$arch#g" -e "s#\${BUILD}#$build#g" \
			deploy/nfpm.yaml >"$build/nfpm_$arch.yaml"
		"$nfpm" package --config "$build/nfpm_$arch.yaml" --packager "$packager" --target dist/ >/dev/null ||
			die "nfpm could not build the $arch $packager"
	done
done

# --- The Homebrew formula, for the darwin and linux archives. ---
url="${RELEASE_URL:-https://github.com/ompsync/ompsync/releases/download/v$version}"
sha() { sha256sum "dist/ompsync_${version}_$1.tar.gz" | cut -d' ' -f1; }
cat >dist/ompsync.rb <<EOF
# Homebrew formula for ompsync $version, written by deploy/release.sh.
class Ompsync < Formula
  desc "Back up, restore and sync coding-agent sessions"
  homepage "https://github.com/ompsync/ompsync"
  version "$version"
  license "MIT"

  on_macos do
    on_arm do
      url "$url/ompsync_${version}_darwin_arm64.tar.gz"
      sha256 "$(sha darwin_arm64)"
    end
    on_intel do
      url "$url/ompsync_${version}_darwin_amd64.tar.gz"
      sha256 "$(sha darwin_amd64)"
    end
  end

  on_linux do
    on_arm do
      url "$url/ompsync_${version}_linux_arm64.tar.gz"
      sha256 "$(sha linux_arm64)"
    end
    on_intel do
      url "$url/ompsync_${version}_linux_amd64.tar.gz"
      sha256 "$(sha linux_amd64)"
    end
  end

  def install
    bin.install "ompsync"
    man1.install Dir["man/*.1"]
    bash_completion.install "completions/ompsync.bash" => "ompsync"
    zsh_completion.install "completions/_ompsync"
    fish_completion.install "completions/ompsync.fish"
  end

  service do
    run [opt_bin/"ompsync", "agent"]
    keep_alive true
    log_path var/"log/ompsync.log"
    error_log_path var/"log/ompsync.log"
  end

  test do
    assert_match "ompsync v#{version}", shell_output("#{bin}/ompsync version")
  end
end
EOF

# --- Checksums. ---
(cd dist && sha256sum -- *.tar.gz *.zip *.deb *.rpm ompsync.rb >SHA256SUMS)
echo "v$version" >dist/VERSION
echo "release: wrote dist/:"
ls -l dist/

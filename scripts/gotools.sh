# shellcheck shell=bash
# The Go tools that scripts/lint and scripts/test install, pinned, and how.
# Sourced by them; the sourcing script defines log and die.
#
# Missing tools, or tools of another version or built by another Go
# release, are installed with `go install` into $(go env GOPATH)/bin, which
# is put first on PATH.

# staticcheck 2026.2.2 is module version v0.8.2: the proxy serves only the
# semantic version, so `go install ...@2026.2.2` does not resolve.
readonly STATICCHECK_VERSION=v0.8.2
readonly BUF_VERSION=v1.75.0
# deadcode is a command of golang.org/x/tools (module version).
readonly DEADCODE_VERSION=v0.52.0
# interop/'s tests call the edge with grpcurl.
readonly GRPCURL_VERSION=v1.9.4

gobin=$(go env GOPATH)
gobin=${gobin%%:*}/bin # GOPATH may be a list; go install uses the first entry.
export PATH="$gobin:$PATH"

# ensure_tool installs module@version's command pkg as $gobin/name unless the
# binary there was built from that module version by this Go release (a tool
# built by an older Go may not understand this Go's code or standard library).
ensure_tool() {
	local name=$1 pkg=$2 module=$3 version=$4 bin info built go_release
	go_release=$(go env GOVERSION)
	[[ $go_release =~ ^go[0-9]+\.[0-9]+ ]] || die "cannot parse the Go version $go_release"
	go_release=${BASH_REMATCH[0]}
	bin=$gobin/$name
	if [[ -x $bin ]] && info=$(go version -m "$bin" 2>/dev/null); then
		built=$(sed -n '1s/^.*: //p' <<<"$info")
		if [[ $built =~ ^go[0-9]+\.[0-9]+ && ${BASH_REMATCH[0]} == "$go_release" ]] &&
			[[ $(awk '$1 == "mod" { print $2, $3 }' <<<"$info") == "$module $version" ]]; then
			return 0
		fi
	fi
	log "installing $pkg@$version"
	GOBIN=$gobin go install "$pkg@$version" || die "could not install $pkg@$version"
}

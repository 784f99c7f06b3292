#!/usr/bin/env bash
# The kubernetes terminal backend's test peer: a one-node cluster built here. No registry
# ships a Kubernetes server binary, so this builds kube-apiserver, kubelet,
# kube-controller-manager and kube-scheduler from Debian's `kubernetes` source package
# (1.20.2, with its vendor/ tree) with Debian's Go, once per machine, cached under
# ~/.cache/hermes-tools/kubernetes-<source version>/bin. etcd, containerd, runc and the CNI
# plugins are Debian's packages. test-peers/kubernetes/cluster.sh starts and stops the
# cluster. Idempotent; runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v go >/dev/null 2>&1 || need+=(golang)
[ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || need+=(golang-github-modern-go-reflect2-dev)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v iptables-save >/dev/null 2>&1 || need+=(iptables)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
# make of the source tree copies its generated output with rsync.
command -v rsync >/dev/null 2>&1 || need+=(rsync)
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -qq -o DPkg::Lock::Timeout=900 </dev/null
    apt-get install -y -qq -o DPkg::Lock::Timeout=900 --no-install-recommends "${need[@]}" </dev/null
fi

# The official Python client, in the test venv (.ci/setup.d/10-python.sh makes it): the
# tests cross-check what the backend made and its exit codes with it. Submodules are
# asked for: run from the checkout, a bare `import kubernetes` finds the crate's folder.
venv=${HERMES_TEST_VENV:-$HOME/.cache/hermes-tools/test-venv}
if [ -x "$venv/bin/python3" ] && ! "$venv/bin/python3" -c 'import kubernetes.client, kubernetes.stream' >/dev/null 2>&1; then
    echo "installing the Python kubernetes client into $venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check 'kubernetes>=30,<40' </dev/null
fi

# The source package's version names the cache.
version_file=/etc/apt/sources.list.d/hermes-tools-deb-src.sources
if [ ! -e "$version_file" ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$version_file"
    apt-get update -qq -o DPkg::Lock::Timeout=900 </dev/null
fi
version=$(apt-cache showsrc kubernetes | sed -n 's/^Version: //p' | sort -V | tail -1)
if [ -z "$version" ]; then
    echo "80-kubernetes: apt-cache has no kubernetes source package" >&2
    exit 1
fi
cache="$HOME/.cache/hermes-tools/kubernetes-$version"
bins=(kube-apiserver kubelet kube-controller-manager kube-scheduler)
missing=0
for b in "${bins[@]}"; do [ -x "$cache/bin/$b" ] || missing=1; done
[ -f "$cache/pause.c" ] || missing=1
if [ "$missing" = 0 ]; then
    echo "kubernetes $version: cached in $cache/bin"
    exit 0
fi

started=$(date +%s)
work=$(mktemp -d /tmp/hermes-kubernetes-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source --download-only "kubernetes=$version" >/dev/null </dev/null)
dpkg-source -x --skip-patches "$work"/kubernetes_*.dsc "$work/src" >/dev/null
src="$work/src"
# Go 1.18+ breaks the vendored reflect2 1.0.1 (a runtime panic in every JSON codec):
# Debian's 1.0.2 works.
rm -rf "$src/vendor/github.com/modern-go/reflect2"
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$src/vendor/github.com/modern-go/reflect2"
# GOPATH mode, as Debian's own rules build it; make runs the code generators (OpenAPI
# and the rest) before the binaries.
mkdir -p "$src/.go/src/k8s.io"
ln -s ../../.. "$src/.go/src/k8s.io/kubernetes"
(
    cd "$src"
    export GOPATH="$src/.go" GO111MODULE=off CGO_ENABLED=0 HOME="$work/home" GOCACHE="$work/gocache"
    make WHAT="$(printf 'cmd/%s ' "${bins[@]}")" </dev/null
)
mkdir -p "$cache/bin.tmp"
for b in "${bins[@]}"; do cp "$src/_output/bin/$b" "$cache/bin.tmp/"; done
# The pod sandbox's pause program, compiled by the cluster script into its image.
cp "$src/build/pause/linux/pause.c" "$cache/pause.c"
rm -rf "$cache/bin"
mv "$cache/bin.tmp" "$cache/bin"
echo "kubernetes $version: built in $(( $(date +%s) - started )) s into $cache/bin"

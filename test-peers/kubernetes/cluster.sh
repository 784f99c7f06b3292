#!/usr/bin/env bash
# A one-node Kubernetes cluster for the kubernetes backend's tests, from the binaries
# .ci/setup.d/80-kubernetes.sh builds (Debian's 1.20 source) and Debian's etcd,
# containerd, runc and CNI plugins.
#
#   cluster.sh start DIR   start it; DIR (new or empty) holds everything: certificates,
#                          etcd data, containerd's root, logs, pids, and DIR/kubeconfig
#                          (cluster admin), DIR/kubeconfig-restricted (a user with no
#                          rights), DIR/image (the test image's name)
#   cluster.sh stop DIR    stop it by the pids it wrote, restore what the kubelet changed
#
# Every component runs in a network namespace of its own (the node's), reached from
# this machine over a veth pair: the kubelet's iptables rules and network sysctls stay
# there. The kernel-wide sysctls the kubelet sets (panic, overcommit, keys) are saved at
# start and restored at stop. Needs root.
set -Eeuo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

version=$(ls -d "$HOME"/.cache/hermes-tools/kubernetes-*/bin 2>/dev/null | sort -V | tail -1 || true)
bin=${HERMES_KUBERNETES_BIN:-$version}
global_sysctls=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

stop() {
    local d=$1
    [ -d "$d" ] || return 0
    # Pods first, while the kubelet still runs, then the components in reverse order.
    for name in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
        local pidfile="$d/pids/$name"
        [ -f "$pidfile" ] || continue
        local pid
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile"
    done
    # The containers' shims and processes (containerd leaves them running by design):
    # the shims by their socket under DIR, the containers by the node's cgroups.
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $d/" || true); do kill -KILL "$pid" 2>/dev/null || true; done
    if [ -f "$d/cgroup-root" ]; then
        local croot
        croot=$(cat "$d/cgroup-root")
        for _ in 1 2 3; do
            for pid in $(find "/sys/fs/cgroup/pids/$croot" -name cgroup.procs -exec cat {} + 2>/dev/null); do
                kill -KILL "$pid" 2>/dev/null || true
            done
            sleep 0.2
        done
    fi
    if [ -f "$d/netns-name" ]; then
        local ns
        ns=$(cat "$d/netns-name")
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        sleep 0.5
        ip link del "$(cat "$d/veth-name")" 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    fi
    # Mounts containerd and the kubelet made under DIR.
    grep -o " $d/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    if [ -f "$d/sysctl.saved" ]; then
        while read -r key value; do sysctl -q -w "$key=$value" >/dev/null 2>&1 || true; done <"$d/sysctl.saved"
        rm -f "$d/sysctl.saved"
    fi
    # The node's cgroups (cgroupfs driver, below a root of its own): only empty ones
    # can go, which they are once the containers are killed.
    if [ -f "$d/cgroup-root" ]; then
        local root
        root=$(cat "$d/cgroup-root")
        for _ in 1 2 3 4 5; do
            for c in /sys/fs/cgroup/*/"$root"; do
                [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
            done
            ls -d /sys/fs/cgroup/*/"$root" >/dev/null 2>&1 || break
            sleep 0.5
        done
    fi
    # The kubelet of 1.20 writes container logs under /var/log/pods (no flag moves it):
    # the folder goes again when this cluster made it, else this cluster's pods' folders.
    if [ -f "$d/made-var-log-pods" ]; then
        rm -rf /var/log/pods
        rm -f "$d/made-var-log-pods"
    else
        rm -rf /var/log/pods/*_hermes-* 2>/dev/null || true
    fi
}

if [ "$cmd" = stop ]; then
    stop "$dir"
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

for b in kube-apiserver kubelet kube-controller-manager kube-scheduler; do
    [ -x "$bin/$b" ] || { echo "$b is missing in ${bin:-~/.cache/hermes-tools/kubernetes-*/bin}: run .ci/setup.d/80-kubernetes.sh" >&2; exit 1; }
done
for b in etcd containerd ctr runc openssl ip nsenter; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || { echo "$b is missing: run .ci/setup.d/80-kubernetes.sh" >&2; exit 1; }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/pids" "$dir/logs" "$dir/pki" "$dir/cni" "$dir/cni-ipam" "$dir/kubelet" "$dir/images"
trap 'echo "cluster: start failed at line $LINENO (logs in $dir/logs)" >&2; stop "$dir"' ERR

# A short id names the namespace and the veth (interface names are at most 15 bytes).
id=$(printf '%s' "$dir" | sha256sum | cut -c1-6)
ns="hermes-k8s-$id"
host_if="hk8s$id"
echo "$ns" >"$dir/netns-name"
echo "$host_if" >"$dir/veth-name"
# A /30 of 10.213.x.y picked from the id, so two clusters at once do not collide.
octet=$(( 0x${id:0:2} ))
quad=$(( (0x${id:2:2} % 64) * 4 ))
host_ip="10.213.$octet.$((quad + 1))"
node_ip="10.213.$octet.$((quad + 2))"
echo "$node_ip" >"$dir/node-ip"
# The node's cgroups live below a root of their own (two clusters at once, or a
# cluster and the machine's other users, never share the kubelet's hierarchy).
cgroup_root="hermes-k8s-$id"
echo "$cgroup_root" >"$dir/cgroup-root"
for c in /sys/fs/cgroup/*/; do
    [ -f "$c/cgroup.procs" ] && mkdir -p "$c$cgroup_root"
done

for key in "${global_sysctls[@]}"; do
    printf '%s %s\n' "$key" "$(sysctl -n "$key")" >>"$dir/sysctl.saved"
done
[ -e /var/log/pods ] || touch "$dir/made-var-log-pods"

ip netns add "$ns"
ip link add "$host_if" type veth peer name eth0 netns "$ns"
ip addr add "$host_ip/30" dev "$host_if"
ip link set "$host_if" up
in_ns() { nsenter --net="/run/netns/$ns" "$@"; }
in_ns ip link set lo up
in_ns ip addr add "$node_ip/30" dev eth0
in_ns ip link set eth0 up
# No default route: the node reaches this machine's end of the veth and nothing else
# (an image pull fails at once instead of leaving the machine).

# ------------------------------------------------------------------ certificates
pki=$dir/pki
cd "$pki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=hermes-test-ca" 2>/dev/null
cert() { # name CN O [SAN]
    local name=$1 cn=$2 o=$3 san=${4:-}
    local subj="/CN=$cn"
    [ -n "$o" ] && subj="/O=$o/CN=$cn"
    openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
    if [ -n "$san" ]; then
        printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$name.ext"
    else
        printf 'extendedKeyUsage=clientAuth\n' >"$name.ext"
    fi
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 2 -extfile "$name.ext" 2>/dev/null
}
cert apiserver kube-apiserver "" "IP:$node_ip,IP:127.0.0.1,IP:10.215.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:localhost"
cert admin hermes-admin system:masters
cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
cert node system:node:hermes-node system:nodes
cert kubelet-serving hermes-node "" "IP:$node_ip,DNS:hermes-node"
cert restricted hermes-restricted ""
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
cd - >/dev/null

kubeconfig() { # file cert server
    local file=$1 name=$2 server=$3
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hermes
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$pki/$name.crt")
    client-key-data: $(base64 -w0 <"$pki/$name.key")
contexts:
- name: hermes
  context: {cluster: hermes, user: $name, namespace: default}
current-context: hermes
EOF
}
server="https://$node_ip:6443"
kubeconfig "$dir/kubeconfig" admin "$server"
kubeconfig "$dir/kubeconfig-restricted" restricted "$server"
kubeconfig "$dir/kubeconfig-node" node "$server"

# ------------------------------------------------------------------ images
# Built from this machine's binaries: a pause image (Kubernetes' pause.c) and a test
# image with bash, coreutils and what the file tools' scripts use.
rootfs() { # dir binaries...
    local root=$1; shift
    mkdir -p "$root/bin" "$root/tmp" "$root/root" "$root/etc" "$root/proc" "$root/sys" "$root/dev"
    chmod 1777 "$root/tmp"
    for b in "$@"; do
        local path
        path=$(command -v "$b")
        cp -L "$path" "$root/bin/"
        { ldd "$path" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r lib; do
            mkdir -p "$root$(dirname "$lib")"
            cp -Ln "$lib" "$root$lib" 2>/dev/null || true
        done
    done
    printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
    printf 'root:x:0:\n' >"$root/etc/group"
}
image_tar() { # rootfs name:tag entrypoint-json out.tar
    python3 - "$@" <<'EOF'
import hashlib, io, json, sys, tarfile
root, ref, entry, out = sys.argv[1:5]
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w") as t:
    t.add(root, arcname=".")
data = layer.getvalue()
diff = "sha256:" + hashlib.sha256(data).hexdigest()
config = {"architecture": "amd64", "os": "linux",
          "config": {"Entrypoint": json.loads(entry), "Env": ["PATH=/bin:/usr/bin", "HOME=/root"], "WorkingDir": "/root"},
          "rootfs": {"type": "layers", "diff_ids": [diff]}}
cfg = json.dumps(config).encode()
cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
manifest = json.dumps([{"Config": cfg_name, "RepoTags": [ref], "Layers": ["layer.tar"]}]).encode()
with tarfile.open(out, "w") as t:
    for name, body in (("layer.tar", data), (cfg_name, cfg), ("manifest.json", manifest)):
        info = tarfile.TarInfo(name); info.size = len(body); t.addfile(info, io.BytesIO(body))
EOF
}
images=$dir/images
mkdir -p "$images/pause/bin" "$images/pause/tmp"
pause_src=$(ls -d "$bin"/../pause.c 2>/dev/null || true)
if [ -n "$pause_src" ] && command -v gcc >/dev/null 2>&1; then
    gcc -static -O2 -o "$images/pause/bin/pause" "$pause_src"
    image_tar "$images/pause" hermes.local/pause:1 '["/bin/pause"]' "$images/pause.tar"
else
    rootfs "$images/pause" sleep
    image_tar "$images/pause" hermes.local/pause:1 '["/bin/sleep", "infinity"]' "$images/pause.tar"
fi
rootfs "$images/test" bash sh sleep cat rm head tail ls mkdir env realpath stat dirname basename tr base64 \
    sha256sum mv cp chmod grep find flock wc sort uniq sed touch id nproc seq timeout pgrep ps
# python3 and its standard library (without tests and caches) for execute_code.
py=$(readlink -f /usr/bin/python3)
pylib=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
mkdir -p "$images/test/usr/bin" "$images/test$(dirname "$pylib")"
cp "$py" "$images/test/usr/bin/python3"
tar -C "$(dirname "$pylib")" --exclude=__pycache__ --exclude=test --exclude=site-packages \
    --exclude=dist-packages --exclude=idlelib --exclude=tkinter --exclude=ensurepip -cf - "$(basename "$pylib")" |
    tar -C "$images/test$(dirname "$pylib")" -xf -
for f in "$py" "$pylib"/lib-dynload/*.so; do
    { ldd "$f" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r lib; do
        mkdir -p "$images/test$(dirname "$lib")"
        cp -Ln "$lib" "$images/test$lib" 2>/dev/null || true
    done
done
image_tar "$images/test" hermes.local/terminal-test:1 '["/bin/sleep", "infinity"]' "$images/test.tar"
echo "hermes.local/terminal-test:1" >"$dir/image"

# ------------------------------------------------------------------ containerd
sock="$dir/containerd.sock"
cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
oom_score = 0
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = "$sock.debug"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "hermes.local/pause:1"
  restrict_oom_score_adj = true
  # The pods' network namespaces under DIR, not /run/netns.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
EOF
cat >"$dir/cni/10-hermes.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "hermes", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.214.0.0/24"}]], "dataDir": "$dir/cni-ipam"}}
]}
EOF
launch() { # name command... (in the node's namespace, in the background)
    local name=$1; shift
    nsenter --net="/run/netns/$ns" "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
    echo $! >"$dir/pids/$name"
}
wait_for() { # what seconds command...
    local what=$1 secs=$2; shift 2
    local i=0
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ "$i" -gt $((secs * 5)) ]; then
            echo "cluster: $what did not come up within $secs s; logs in $dir/logs" >&2
            tail -n 20 "$dir"/logs/*.log >&2 || true
            return 1
        fi
        sleep 0.2
    done
}
launch containerd containerd --config "$dir/containerd.toml"
wait_for containerd 30 ctr -a "$sock" version
ctr -a "$sock" -n k8s.io images import "$images/pause.tar" >/dev/null
ctr -a "$sock" -n k8s.io images import "$images/test.tar" >/dev/null

# ------------------------------------------------------------------ control plane
launch etcd etcd --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380
launch kube-apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$node_ip" \
    --client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.215.0.0/24 --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$pki/apiserver-kubelet.crt" --kubelet-client-key="$pki/apiserver-kubelet.key" \
    --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --enable-admission-plugins=NodeRestriction --allow-privileged=false --profiling=false \
    --insecure-port=0 --cert-dir="$dir/apiserver-certs"
wait_for kube-apiserver 90 kubectl --kubeconfig "$dir/kubeconfig" get --raw /readyz
launch kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" --leader-elect=false \
    --use-service-account-credentials=false --port=0 --secure-port=0 --controllers='*,-csrsigning,-csrapproving,-csrcleaner'
launch kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" --leader-elect=false --port=0 --secure-port=0

# ------------------------------------------------------------------ kubelet
cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 60
serializeImagePulls: false
EOF
launch kubelet "$bin/kubelet" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubeconfig-node" \
    --container-runtime=remote --container-runtime-endpoint="unix://$sock" \
    --hostname-override=hermes-node --node-ip="$node_ip" --root-dir="$dir/kubelet" \
    --cert-dir="$dir/kubelet-certs" --v=1
k() { kubectl --kubeconfig "$dir/kubeconfig" "$@"; }
node_ready() { k get node hermes-node -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q True; }
wait_for "the node" 90 node_ready
wait_for "the default service account" 60 k get serviceaccount default
trap - ERR
echo "cluster up: KUBECONFIG=$dir/kubeconfig (node $node_ip)"

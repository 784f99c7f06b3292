# Sourced by the setup scripts that install npm packages for tests.

# Installs Debian's nodejs and npm when the machine has no npm.
ensure_npm() {
    if ! command -v npm >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq </dev/null
        apt-get install -y -qq --no-install-recommends nodejs npm </dev/null
    fi
}

# npm_install_if DIR MISSING: installs DIR's committed package-lock.json into
# DIR/node_modules when MISSING is "yes" (the caller checked for what its tests run) or
# the lock file is newer than what was installed there.
npm_install_if() {
    local dir=$1 missing=$2
    if [ "$missing" = yes ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        echo "installing npm packages into $dir"
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error </dev/null)
    fi
}

#!/usr/bin/env bash
# One entry point for people and CI: `setup`, `test [pytest args]`, `serve [mqbridge serve args]`.
# Works on a fresh Debian machine: installs system packages (when root) and a virtualenv in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(mosquitto mosquitto-clients activemq libmqtt-client-java libxstream-java libjettison-java
              default-jdk-headless docker-compose)

setup_system() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ]; then
            echo "setup: apt-get install ${missing[*]}"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        else
            echo "setup: missing system packages (install them as root): ${missing[*]}" >&2
        fi
    fi
}

setup_python() {
    local extras="$1"
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
    fi
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[${extras}]"
}

cmd="${1:-help}"; shift || true
case "$cmd" in
    setup)
        setup_system
        setup_python dev
        ;;
    test)
        setup_system
        setup_python dev
        # two workers (MQBRIDGE_TEST_WORKERS; 0 runs in this process); a module stays on one worker, so its
        # module-scoped gateway starts once (loadgroup cannot group more: pytest-xdist 3.8 on pytest 9 drops
        # the groups); each worker that runs Spark tests has its own SparkSession
        exec .venv/bin/python -m pytest -n "${MQBRIDGE_TEST_WORKERS:-2}" --dist loadfile "$@"
        ;;
    serve)
        setup_python speed
        exec .venv/bin/mqbridge serve "$@"
        ;;
    *)
        echo "usage: scripts/dev.sh setup | test [pytest args] | serve [serve args]" >&2
        exit 2
        ;;
esac

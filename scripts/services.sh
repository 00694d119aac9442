#!/usr/bin/env bash
# Start the local services the tests talk to, when this machine has them and they are stopped.
# A machine without them is fine: the tests that need a server skip and say which one.
# Run as root with apt-get, it installs what is missing (Chromium and chromedriver, HAProxy) and
# says so before each install; as anyone else it installs nothing.
set -u
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
  fi
fi
if command -v redis-cli >/dev/null 2>&1 && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
fi
# The lens's browser tests drive Debian's Chromium through chromedriver; without apt they skip.
if ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "services: installing Debian's chromium and chromium-driver with apt-get, as root" \
      "(the lens browser tests drive them; a few hundred MB)"
    (apt-get update -q && apt-get install -y -q chromium chromium-driver) >/dev/null 2>&1 || \
      echo "chromium: apt-get install failed; the lens browser tests will skip"
  else
    echo "chromium: no apt-get as root here; the lens browser tests will skip"
  fi
fi
# HAProxy for the gateway replica tests (tests/gateway/edge/test_gateway_replicas.py), from Debian.
if ! command -v haproxy >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "services: installing Debian's haproxy with apt-get, as root (the replica tests" \
      "balance two gateways with it)"
    apt-get install -y -q haproxy >/dev/null 2>&1 || \
      echo "haproxy not installed: the replica test will skip"
  else
    echo "haproxy: no apt-get as root here; the replica tests will skip"
  fi
fi
# podman, runc and debootstrap for the container tests (tests/container/), from Debian. The
# debootstrapped base and the image are cached in podman's own storage after the first run.
if ! command -v podman >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
    || ! command -v runc >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "services: installing Debian's podman, runc and debootstrap with apt-get, as root" \
      "(the container tests build the image on a debootstrapped base)"
    apt-get install -y -q podman runc debootstrap >/dev/null 2>&1 || \
      echo "podman not installed: the container tests will skip"
  else
    echo "podman: no apt-get as root here; the container tests will skip"
  fi
fi
exit 0

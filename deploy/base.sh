#!/bin/sh
# A local Debian bookworm base for the Containerfile, made with debootstrap from the Debian mirror
# and imported into podman's own storage once (cached by tag): for machines that can reach the
# Debian mirror and PyPI but no container registry. Elsewhere `podman build .` uses the default
# base (python:3.12-slim) and this script is not needed.
#
#   deploy/base.sh                 # prints the tag: localhost/byref-base:bookworm
#   podman build --build-arg BASE=localhost/byref-base:bookworm -t byref .
#
# The base is minbase + python3, python3-venv and ca-certificates. The host's CA bundle is copied
# in (a machine whose HTTPS goes through an inspecting proxy trusts its CA; the image's pip then
# does too) and PIP_CERT/SSL_CERT_FILE point at it. BYREF_BASE_TAG overrides the tag; FORCE=1
# rebuilds it. Needs root, debootstrap and podman.
set -eu
TAG=${BYREF_BASE_TAG:-localhost/byref-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ "${FORCE:-0}" != 1 ] && podman image exists "$TAG"; then
  echo "$TAG"
  exit 0
fi
ROOT=$(mktemp -d /var/tmp/byref-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$ROOT" "$MIRROR" >&2
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
fi
# Smaller: no apt lists, caches, docs, man pages or locales a gateway never reads.
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/* "$ROOT"/usr/share/doc/* \
  "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/usr/share/locale/* "$ROOT"/tmp/*
tar -C "$ROOT" --numeric-owner -c . | podman import \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/sh"]' - "$TAG" >&2
echo "$TAG"

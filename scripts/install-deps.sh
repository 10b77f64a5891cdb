#!/usr/bin/env bash
# Installs the Debian packages iap-worker builds and tests with, when they are missing.
# Safe to run again: it installs nothing that is already there.
set -euo pipefail

need=()
pkg-config --version >/dev/null 2>&1 || need+=(pkg-config)
pkg-config --exists rdkafka 2>/dev/null || need+=(librdkafka-dev)
pkg-config --exists sqlite3 2>/dev/null || need+=(libsqlite3-dev)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# The console's browser test drives Debian's Chromium through its own driver (no browser downloaded by a tool).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# The machine-fault tests put a SQLite ledger on an ext4 image (mkfs.ext4, e2fsck) mounted through a loop device.
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || need+=(mount)
# The clock-step test runs the worker under libfaketime, its wall clock stepped from a file.
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || need+=(libfaketime)

if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

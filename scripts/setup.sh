#!/usr/bin/env bash
# Installs what zk-recipes' tests and demo need on a Debian machine, if it is missing:
# Apache ZooKeeper 3.8 (package `zookeeper`), a JDK (the tests compile a small Curator peer),
# Apache Curator 5.4 (packages `libcurator-recipes-java`, `libcurator-discovery-java`), for the
# `sasl-gssapi` feature an MIT Kerberos KDC and the GSSAPI build dependencies, and kazoo (the
# Python ZooKeeper client, from PyPI) for the kazoo interop tests. Safe to run again.
set -euo pipefail

missing=()
# The server's package (its jars, /usr/share/java/zookeeper.jar, come with Curator's too).
dpkg -s zookeeper >/dev/null 2>&1 || missing+=(zookeeper)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
[ -f /usr/share/java/curator-x-discovery.jar ] || missing+=(libcurator-discovery-java)
[ -f /usr/share/java/slf4j-api.jar ] || missing+=(libslf4j-java)
# The `sasl-gssapi` feature: an MIT Kerberos KDC for its tests (krb5-kdc, krb5-admin-server),
# and the GSSAPI headers and libclang its build needs (libkrb5-dev, libclang-dev).
[ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
[ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || missing+=(libclang-dev)
# The kazoo interop tests' Python peer (kazoo itself comes from PyPI, below).
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The kazoo interop tests (tests/kazoo/interop.rs) run a Python peer on kazoo.
# A Python whose packages the system manages (Debian's own python3) refuses a plain pip
# install; kazoo then goes in beside them, and Debian's python3-kazoo is the last resort.
if ! python3 -c 'import kazoo' >/dev/null 2>&1; then
  echo "setup: installing kazoo" >&2
  export PIP_ROOT_USER_ACTION=ignore
  python3 -m pip install --quiet kazoo 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages kazoo 2>/dev/null \
    || { sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"; $sudo apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-kazoo >/dev/null; } \
    || echo "setup: could not install kazoo; the kazoo interop tests will say so" >&2
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust 1.80 or later with clippy (https://rustup.rs) first" >&2
  exit 1
fi
# The crate needs Rust 1.80 (Debian's own rustc is older on bookworm), the tests run clippy.
rustc_version=$(rustc --version | awk '{ print $2 }')
if [ "$(printf '%s\n' 1.80.0 "$rustc_version" | sort -V | head -n 1)" != 1.80.0 ]; then
  echo "setup: rustc $rustc_version is older than the 1.80 the crate needs (https://rustup.rs)" >&2
  exit 1
fi
if ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    echo "setup: installing clippy" >&2
    rustup component add clippy
  else
    echo "setup: cargo clippy not found; the test script runs it (rustup component add clippy)" >&2
    exit 1
  fi
fi

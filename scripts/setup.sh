#!/usr/bin/env bash
# Installs what zk-recipes' tests and demo need on a Debian machine, if it is missing:
# Apache ZooKeeper 3.8 (package `zookeeper`), a JDK (the tests compile a small Curator peer),
# and Apache Curator 5.4 (packages `libcurator-recipes-java`, `libcurator-discovery-java`). Safe to run
# again.
set -euo pipefail

missing=()
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
[ -f /usr/share/java/curator-x-discovery.jar ] || missing+=(libcurator-discovery-java)
[ -f /usr/share/java/slf4j-api.jar ] || missing+=(libslf4j-java)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi

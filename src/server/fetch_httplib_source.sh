#!/usr/bin/env bash
# Fetches the Debian source of cpp-httplib (the version installed as
# libcpp-httplib-dev) with apt-get source and leaves its header-only
# httplib.h, with Debian's patches applied, and LICENSE in DEST. Used by
# static builds (src/server/httplib.cmake): Debian ships the library only as
# a shared object. Reads the Debian archives from this machine's apt sources
# (as deb-src), with a private apt state: the system's apt setup is untouched.
set -euo pipefail
dest="${1:?usage: fetch_httplib_source.sh DEST}"

version="$(dpkg-query -W -f='${Version}' libcpp-httplib-dev 2>/dev/null || true)"
[ -n "$version" ] || { echo "fetch_httplib_source: libcpp-httplib-dev is not installed" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$work/src"

# The machine's Debian sources, as source entries (one-line and deb822 forms).
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  grep -E '^deb\s' "$f" | grep -E '/debian(-security)?/?\s' | sed -E 's/^deb\s+(\[[^]]*\]\s+)?/deb-src /' \
    >> "$work/parts/debian-src.list" || true
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  grep -qE '^URIs:.*/debian(-security)?/?\s*$' "$f" || continue
  sed -E 's/^Types:.*/Types: deb-src/' "$f" > "$work/parts/$(basename "$f")"
done
[ -n "$(ls -A "$work/parts")" ] || { echo "fetch_httplib_source: no Debian apt sources found" >&2; exit 1; }

apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$work/parts"
          -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root -q)
apt-get "${apt_opts[@]}" update >/dev/null
cd "$work/src"
apt-get "${apt_opts[@]}" source --download-only "cpp-httplib=$version" >/dev/null 2>&1 ||
  apt-get "${apt_opts[@]}" source --download-only cpp-httplib >/dev/null
dpkg-source --no-check -x ./*.dsc tree >/dev/null

header="$work/src/tree/httplib.h"
[ -f "$header" ] || { echo "fetch_httplib_source: no httplib.h in the source package" >&2; exit 1; }
grep -q '^inline bool Server::listen_internal' "$header" ||
  { echo "fetch_httplib_source: httplib.h in the source package is not header-only" >&2; exit 1; }
mkdir -p "$dest"
cp "$header" "$dest/httplib.h"
cp "$work/src/tree/LICENSE" "$dest/LICENSE" 2>/dev/null || true
echo "fetch_httplib_source: cpp-httplib $version (header-only) in $dest"

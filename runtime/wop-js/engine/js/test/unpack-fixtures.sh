#!/bin/sh
# Unpacks the registry archives of every pack named in
# runtime/wop-cli/tests/fixtures/registry-js-cases.json, from the byte-for-byte
# registry copy in runtime/wop-cli/tests/fixtures/openwop-registry/, into
# <out-dir>/<pack name>/ (index.mjs, pack.json, schemas/, …), so that run.mjs and
# expected.mjs can run without the full registry tree:
#
#   sh runtime/wop-js/engine/js/test/unpack-fixtures.sh /tmp/wop-packs
#   WOP_REGISTRY_PACKS=/tmp/wop-packs node runtime/wop-js/engine/js/test/run.mjs
#   WOP_REGISTRY_PACKS=/tmp/wop-packs node runtime/wop-js/engine/js/test/expected.mjs --check
#
# Needs tar and python3. An existing <out-dir>/<pack name>/ is replaced.
set -eu
if [ $# -ne 1 ]; then echo "usage: $0 <out-dir>" >&2; exit 2; fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$(cd "$here/../../../../wop-cli/tests/fixtures" && pwd)
cases=${WOP_JS_CASES:-$fixtures/registry-js-cases.json}
registry=$fixtures/openwop-registry/v1/packs
mkdir -p "$out"
# "<name> <version>" once per pack, in the order the cases file names them.
python3 -c '
import json, sys
seen = set()
for c in json.load(open(sys.argv[1])):
    k = (c["pack"], c["version"])
    if k not in seen:
        seen.add(k)
        print(c["pack"], c["version"])
' "$cases" | while read -r name version; do
  case "$name$version" in */*|*..*) echo "refusing pack name/version: $name $version" >&2; exit 1;; esac
  tgz=$registry/$name/-/$version.tgz
  if [ ! -f "$tgz" ]; then echo "missing fixture archive: $tgz" >&2; exit 1; fi
  rm -rf "$out/$name"
  mkdir -p "$out/$name"
  tar -xzf "$tgz" -C "$out/$name" --no-same-owner
  echo "$name $version -> $out/$name"
done

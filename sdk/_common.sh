# Shared helpers for sdk/<lang>/build.sh. Source it; it defines functions only.
#
# A pack source directory holds `pack.json` plus the language's source. Every
# build derives from pack.json:
#   - the WIT world the component is built against: `export node` plus one
#     `import` per host interface named in `x-wop.capabilities` (log, clock,
#     random, tools, http, mcp) -- so a pack imports only what it declares and
#     the runtime's deny-by-default linking sees nothing else;
#   - the component file name (`runtime.entry`);
#   - the default `describe()` (name, version, nodes[].typeId/version).
# Then `wop pack <src> --wasm <component> --out <out>` assembles the pack
# directory and fills in `x-wop.sha256`.

WOP_SDK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WOP_REPO_ROOT="$(cd "$WOP_SDK_ROOT/.." && pwd)"
WOP_WIT_FILE="$WOP_REPO_ROOT/wit/node-pack.wit"
# The host interfaces a pack can import, in WIT order.
WOP_HOST_INTERFACES=(log clock random tools http mcp)

wop_die() {
  echo "error: $*" >&2
  exit 2
}

# The wop CLI: $WOP, else `wop` on PATH, else a build in the repository's
# target/ directory.
wop_cli() {
  if [[ -n "${WOP:-}" ]]; then
    [[ -x "$WOP" ]] || wop_die "WOP=$WOP is not an executable"
    echo "$WOP"
    return
  fi
  if command -v wop >/dev/null 2>&1; then command -v wop; return; fi
  local c
  for c in "$WOP_REPO_ROOT/target/release/wop" "$WOP_REPO_ROOT/target/debug/wop"; do
    if [[ -x "$c" ]]; then echo "$c"; return; fi
  done
  wop_die "the wop CLI was not found: set WOP=/path/to/wop or put it on PATH (cargo build -p wop-cli)"
}

# wop_manifest <src-dir> <jq-filter>: read pack.json.
wop_manifest() {
  jq -er "$2" "$1/pack.json"
}

# wop_check_src <src-dir>: the source directory is usable.
wop_check_src() {
  [[ -f "$1/pack.json" ]] || wop_die "$1/pack.json not found (a pack source directory holds pack.json and the source)"
  command -v jq >/dev/null || wop_die "jq is required (sdk/install-toolchains.sh installs it)"
  jq -e . "$1/pack.json" >/dev/null || wop_die "$1/pack.json is not valid JSON"
  wop_manifest "$1" '.runtime.entry | strings' >/dev/null || wop_die "$1/pack.json: runtime.entry (the component file name) is required"
}

# wop_imports <src-dir>: the host interfaces the pack declares, one per line.
wop_imports() {
  local caps iface
  caps="$(jq -r '(.["x-wop"].capabilities // [])[]' "$1/pack.json")"
  for iface in "${WOP_HOST_INTERFACES[@]}"; do
    if grep -qx "$iface" <<<"$caps"; then echo "$iface"; fi
  done
}

# wop_world <src-dir> <wit-dir> [all]: write the WIT package plus a world
# `pack` that imports the declared interfaces (or every one with `all`) and
# exports `node`.
wop_world() {
  local src="$1" dir="$2" iface
  mkdir -p "$dir"
  cp "$WOP_WIT_FILE" "$dir/node-pack.wit"
  {
    echo "package openwop:node-pack@0.1.0;"
    echo
    echo "/// Generated from pack.json x-wop.capabilities by sdk/_common.sh."
    echo "world pack {"
    if [[ "${3:-}" == all ]]; then
      for iface in "${WOP_HOST_INTERFACES[@]}"; do echo "    import $iface;"; done
    else
      while read -r iface; do [[ -n "$iface" ]] && echo "    import $iface;"; done < <(wop_imports "$src")
    fi
    echo "    export node;"
    echo "}"
  } >"$dir/pack-world.wit"
}

# wop_assemble <src-dir> <component.wasm> <out-dir>: `wop pack`, then
# `wop inspect` under a policy that grants exactly what pack.json requests
# (capabilities and egress): the build fails if the runtime would refuse the
# component for any other reason (WASI sockets/http, an interface the
# manifest does not request, a describe() that does not match, ...).
# `wop pack` itself exits 3 when the pack is not loadable *without* grants,
# which is expected for packs that request tools/http/mcp.
wop_assemble() {
  local src="$1" wasm="$2" out="$3" wop name policy rc=0
  wop="$(wop_cli)"
  name="$(wop_manifest "$src" '.name')"
  policy="$(mktemp)"
  "$wop" pack "$src" --wasm "$wasm" --out "$out" >"$policy.pack" 2>&1 || rc=$?
  if [[ $rc -ne 0 && $rc -ne 3 ]]; then
    cat "$policy.pack" >&2
    rm -f "$policy" "$policy.pack"
    wop_die "wop pack failed (exit $rc)"
  fi
  rm -f "$policy.pack"
  [[ -f "$out/$name/pack.json" ]] || wop_die "wop pack wrote no $out/$name/pack.json"
  jq -r '
    "[packs.\(.name | tojson)]",
    "capabilities = \([(.["x-wop"].capabilities // [])[] | select(. != "filesystem")] | tojson)",
    (if (.["x-wop"].egress // []) | length > 0 then "egress = \(.["x-wop"].egress | tojson)" else empty end)
  ' "$src/pack.json" >"$policy"
  rc=0
  # A throwaway effect store: inspect runs nothing, and the default store may
  # be locked by another wop process.
  mkdir -p "$policy.store"
  "$wop" inspect --policy "$policy" --store "$policy.store" "$out/$name" >"$policy.out" 2>&1 || rc=$?
  rm -rf "$policy.store"
  if [[ $rc -ne 0 ]]; then
    cat "$policy.out" >&2
    rm -f "$policy" "$policy.out"
    wop_die "the runtime refuses $out/$name even with the capabilities pack.json requests granted (exit $rc)"
  fi
  cat "$policy.out" >&2
  rm -f "$policy" "$policy.out"
  echo "assembled $out/$name (loadable once the operator grants: $(jq -r '(.["x-wop"].capabilities // []) | join(", ")' "$src/pack.json"))" >&2
}

#!/usr/bin/env bash
# Build every JavaScript, Python and C sample pack: sdk/build-all.sh <out-dir>
#
# Installs nothing (run sdk/install-toolchains.sh first). Each pack lands in
# <out-dir>/<lang>/<pack-name>/ (component + pack.json with x-wop.sha256);
# each build also checks with `wop inspect` that the runtime loads it once the
# capabilities its manifest requests are granted. Logs: <out-dir>/<lang>-<name>.log.
# Exits non-zero if any build fails. Then: sdk/verify-samples.sh <out-dir>.
# Environment: WOP=/path/to/wop (else `wop` on PATH); LANGS="js python c".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 <out-dir>" >&2; exit 2; }
out="$(mkdir -p "$1" && cd "$1" && pwd)"
# shellcheck source=_common.sh
source "$here/_common.sh"
wop_cli >/dev/null   # fail early without the CLI

failed=()
for lang in ${LANGS:-js python c}; do
  for src in "$WOP_REPO_ROOT/sample-packs/$lang"/*/; do
    [[ -f "$src/pack.json" ]] || continue
    name="$(jq -r .name "$src/pack.json")"
    echo "== $lang: $(basename "$src") -> $out/$lang/$name" >&2
    start=$(date +%s)
    if "$here/$lang/build.sh" "$src" "$out/$lang" >"$out/$lang-$name.log" 2>&1; then
      echo "   ok ($(( $(date +%s) - start )) s, $(stat -c %s "$out/$lang/$name/$(jq -r .runtime.entry "$src/pack.json")") bytes)" >&2
    else
      echo "   FAILED: see $out/$lang-$name.log" >&2
      tail -20 "$out/$lang-$name.log" >&2
      failed+=("$lang/$name")
    fi
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
echo "all sample packs built in $out" >&2

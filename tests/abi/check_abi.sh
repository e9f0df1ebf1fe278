#!/usr/bin/env bash
# Compares a built library with its committed ABI baseline (abi/<lib>.abi) with libabigail's
# abidiff. Fails on any difference, saying which kind:
# - incompatible (a changed signature, a struct layout changed, a function removed): a break
#   of the C ABI, allowed only with a new major version (the README's "ABI" section);
# - compatible (an addition): fine within 1.x, but the baseline must say so: bump
#   TINYMLIR_ABI_MINOR and run scripts/update-abi-baseline.sh.
# Usage: check_abi.sh SOURCE_DIR BUILD_DIR LIBRARY_NAME
set -u
src=$1 build=$2 lib=$3
baseline="$src/abi/$lib.abi"
report=$(abidiff --exported-interfaces-only --drop-private-types \
  --suppressions "$src/abi/suppressions.txt" \
  --headers-dir2 "$src/capi/include/tinymlir" --headers-dir2 "$src/gpt2/include/tinymlir" \
  --headers-dir2 "$build/include/tinymlir" \
  "$baseline" "$build/capi/$lib.so" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
  echo "abi: $lib.so matches $baseline"
  exit 0
fi
echo "$report"
# abidiff's summaries ("Functions changes summary: 0 Removed, 1 Changed, 2 Added ..."): any
# function or variable removed or changed (a signature, a struct it reaches) is a break;
# only additions are compatible. (Its exit status marks only removals as incompatible.)
broken=$(grep -E "changes summary:" <<<"$report" |
  grep -oE "[0-9]+ (Removed|Changed)" | awk '{n += $1} END {print n + 0}')
if [ $((rc & 3)) -ne 0 ]; then
  echo "abi: abidiff could not compare $lib.so with $baseline (exit status $rc)"
elif [ $((rc & 8)) -ne 0 ] || [ "$broken" -gt 0 ]; then
  echo "abi: INCOMPATIBLE change of $lib.so's C ABI against $baseline (above): a break, which"
  echo "     needs a new major version (SONAME); see the README's ABI section"
else
  echo "abi: compatible change of $lib.so's C ABI not in $baseline (above): if intended, bump"
  echo "     TINYMLIR_ABI_MINOR and run scripts/update-abi-baseline.sh"
fi
exit 1

# Sourced by the command-line tests: `cli_setup ROCMFORGE TESTDATA_DIR
# [FILE...]` sets bin and td, m (stories260K), a temporary directory tmp
# removed at exit and fail() (prints, counts); when stories260K or a FILE of
# the test data is missing the test is skipped (fails under
# ROCMFORGE_REQUIRE=testdata). `cli_finish MESSAGE` ends the test: the
# message when nothing failed, else exit status 1.
cli_setup() {
  bin="$1"; td="$2"; shift 2
  local f
  for f in stories260K.gguf "$@"; do
    [ -f "$td/$f" ] && continue
    echo "test data missing: $td/$f"; [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]] && exit 1; exit 0
  done
  m="$td/stories260K.gguf"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  fails=0
}

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cli_finish() {
  [ "$fails" -eq 0 ] && echo "$1" || exit 1
}

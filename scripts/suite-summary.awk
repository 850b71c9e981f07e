# Reads `ctest -V` output (.ci/run's `suites`): prints each test binary's
# pass count, and every skipped test with its reason (the line GoogleTest
# prints before the skip).
/^ +Start +[0-9]+: / { n = $2; sub(":", "", n); name[n] = $3; next }
{ tag = $1; sub(":", "", tag); line = $0; sub(/^[0-9]+: /, "", line) }
# (An entry that ran one test, as where each test is its own entry, is
# counted by ctest's last line instead.)
line ~ /^\[  PASSED  \] [0-9]+ tests?\.$/ { split(line, w, " "); if (w[4] > 1) print name[tag] ": " w[4] " passed" }
line ~ /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ { split(line, w, " "); print name[tag] ": skipped " w[4] ": " prev[tag] }
{ prev[tag] = line }
/tests passed, [0-9]+ tests? failed/ { print }

#!/usr/bin/env bash
# The unsafe code's lints: clippy refuses an unsafe block without a SAFETY
# comment and an unsafe operation outside an unsafe block; every unsafe fn
# of the extension has a `# Safety` section; the core has no unsafe at all
# (#![forbid(unsafe_code)] in its lib.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --release --lib --quiet -- -A clippy::all \
  -D clippy::undocumented_unsafe_blocks -D clippy::missing_safety_doc -D unsafe_op_in_unsafe_fn
grep -q '^#!\[forbid(unsafe_code)\]' crates/dpnoise-core/src/lib.rs
# An unsafe fn whose doc comment (the /// and #[...] lines just above it) has no "# Safety".
missing=$(awk '
  FNR == 1 { doc = "" }
  /^[[:space:]]*(\/\/\/|#\[)/ { doc = doc $0 "\n"; next }
  /unsafe[[:space:]]+(extern[[:space:]]+"C(-unwind)?"[[:space:]]+)?fn[[:space:]]/ && !/^[[:space:]]*\/\// && !/fn body\(/ {
    if (doc !~ /# Safety/) print FILENAME ":" FNR ": " $0
  }
  { doc = "" }
' src/*.rs src/*/*.rs)
if [ -n "$missing" ]; then
  echo "unsafe fns without a # Safety section:"
  echo "$missing"
  exit 1
fi
echo "lint: every unsafe block and unsafe fn of the extension says why it is sound"

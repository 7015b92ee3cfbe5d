#!/usr/bin/env bash
# Regenerates the long-output corpus: purpose-built failing projects, run
# with the real tools (cargo, rustc, python's unittest, node's test runner,
# make, gcc and ld), their combined output saved in outputs/NAME.log.
# must.txt names the lines a developer must see in each (a substring that
# matches exactly one line of that log); the bench checks the deciders
# against them. Usage: bench/corpus/make-corpus.sh (needs the tools above).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/outputs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
export CARGO_TERM_COLOR=never NO_COLOR=1 TERM=dumb
unset RUST_BACKTRACE

# 1. A workspace: crate `noisy` builds with 300 warnings, crate `app` fails.
mkdir -p "$work/ws/noisy/src" "$work/ws/app/src"
cat > "$work/ws/Cargo.toml" <<'T'
[workspace]
members = ["noisy", "app"]
resolver = "2"
T
printf '[package]\nname = "noisy"\nversion = "0.1.0"\nedition = "2021"\n' > "$work/ws/noisy/Cargo.toml"
printf '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nnoisy = { path = "../noisy" }\n' > "$work/ws/app/Cargo.toml"
{
  for i in $(seq 1 150); do
    printf 'pub fn step_%03d(input: u32) -> u32 {\n    let unused_%03d = input * 2;\n    input + %d\n}\n' "$i" "$i" "$i"
    printf 'fn helper_%03d() -> u32 { %d }\n' "$i" "$i"
  done
} > "$work/ws/noisy/src/lib.rs"
cat > "$work/ws/app/src/main.rs" <<'T'
fn total(values: &[u32]) -> u32 {
    values.iter().sum()
}

fn main() {
    let values = vec![1, 2, 3];
    let moved = values;
    let label: String = noisy::step_001(3);
    println!("{} {}", total(&values), label);
    println!("{:?}", moved);
}
T
(cd "$work/ws" && cargo build --offline 2>&1) > "$out/cargo-build.log"

# 2. cargo test: 400 tests, three failing (an assert_eq, an assert, a panic).
mkdir -p "$work/ct/src"
printf '[package]\nname = "ledger"\nversion = "0.1.0"\nedition = "2021"\n' > "$work/ct/Cargo.toml"
{
  echo 'pub fn balance(entries: &[i64]) -> i64 { entries.iter().sum() }'
  echo '#[cfg(test)]'
  echo 'mod tests {'
  echo '    use super::*;'
  for i in $(seq 1 400); do
    case $i in
      137) printf '    #[test]\n    fn balance_%03d() { assert_eq!(balance(&[%d, 1]), %d, "ledger %d is off"); }\n' "$i" "$i" "$i" "$i" ;;
      250) printf '    #[test]\n    fn balance_%03d() { assert!(balance(&[-%d]) > 0, "overdrawn ledger"); }\n' "$i" "$i" ;;
      333) printf '    #[test]\n    fn balance_%03d() { let v: Vec<i64> = vec![]; let _ = v[%d]; }\n' "$i" "$i" ;;
      *) printf '    #[test]\n    fn balance_%03d() { assert_eq!(balance(&[%d, 1]), %d); }\n' "$i" "$i" "$((i + 1))" ;;
    esac
  done
  echo '}'
} > "$work/ct/src/lib.rs"
(cd "$work/ct" && cargo test --offline 2>&1) > "$out/cargo-test.log"

# 3. python's unittest, verbose: 400 tests, two failures and an error.
{
  echo 'import unittest'
  echo 'def parse_price(text):'
  echo '    return round(float(text.strip("$")), 2)'
  echo 'class PriceTest(unittest.TestCase):'
  for i in $(seq 1 400); do
    case $i in
      88) printf '    def test_price_%03d(self):\n        self.assertEqual(parse_price("$%d.10"), %d.01)\n' "$i" "$i" "$i" ;;
      201) printf '    def test_price_%03d(self):\n        self.assertTrue(parse_price("$0") > 0, "free items are not allowed")\n' "$i" ;;
      350) printf '    def test_price_%03d(self):\n        parse_price(None)\n' "$i" ;;
      *) printf '    def test_price_%03d(self):\n        self.assertEqual(parse_price("$%d.50"), %d.5)\n' "$i" "$i" "$i" ;;
    esac
  done
  echo 'if __name__ == "__main__":'
  echo '    unittest.main(verbosity=2)'
} > "$work/test_prices.py"
(cd "$work" && python3 test_prices.py 2>&1) > "$out/python-unittest.log"

# 4. node's test runner: 400 tests, two failing.
{
  echo "const test = require('node:test');"
  echo "const assert = require('node:assert');"
  echo "function slug(s) { return s.toLowerCase().replace(/ /g, '-'); }"
  for i in $(seq 1 400); do
    case $i in
      120) printf "test('slug %03d', () => { assert.strictEqual(slug('Hello World %d'), 'hello_world_%d'); });\n" "$i" "$i" "$i" ;;
      310) printf "test('slug %03d', () => { assert.ok(slug('') .length > 0, 'empty slug'); });\n" "$i" ;;
      *) printf "test('slug %03d', () => { assert.strictEqual(slug('A B %d'), 'a-b-%d'); });\n" "$i" "$i" "$i" ;;
    esac
  done
} > "$work/slug.test.js"
(cd "$work" && node --test slug.test.js 2>&1) > "$out/node-test.log"

# 5. make: 200 C files compiled one by one; file 150 does not compile.
mkdir -p "$work/mk"
for i in $(seq 1 200); do
  if [ "$i" = 150 ]; then
    printf 'int unit_%03d(int x) {\n    int y = x * 2\n    return y + undeclared_value;\n}\n' "$i" > "$work/mk/unit_$(printf %03d $i).c"
  else
    printf 'int unit_%03d(int x) { return x + %d; }\n' "$i" "$i" > "$work/mk/unit_$(printf %03d $i).c"
  fi
done
printf 'SRCS := $(wildcard unit_*.c)\nOBJS := $(SRCS:.c=.o)\nall: $(OBJS)\n%%.o: %%.c\n\tgcc -Wall -Wextra -O2 -g -fPIC -std=c11 -D_GNU_SOURCE -DLEDGER_VERSION=\\"1.4.2\\" -DLEDGER_FEATURES=0x3f -I../include -I../vendor/zlib/include -I../vendor/openssl/include -c $< -o $@\n' > "$work/mk/Makefile"
(cd "$work/mk" && make -k -j1 2>&1) > "$out/make-c.log"

# 6. A link error after 200 objects build: one symbol is missing.
mkdir -p "$work/ln"
for i in $(seq 1 200); do
  printf 'int part_%03d(int x) { return x + %d; }\n' "$i" "$i" > "$work/ln/part_$(printf %03d $i).c"
done
printf 'int part_001(int);\nint missing_checksum(int);\nint main(void) { return part_001(1) + missing_checksum(2); }\n' > "$work/ln/main.c"
printf 'SRCS := $(wildcard part_*.c) main.c\nOBJS := $(SRCS:.c=.o)\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n%%.o: %%.c\n\tgcc -Wall -O2 -g -fPIC -std=c11 -D_GNU_SOURCE -DPART_TABLE_SIZE=4096 -I../include -I../vendor/zlib/include -I../vendor/openssl/include -c $< -o $@\n' > "$work/ln/Makefile"
(cd "$work/ln" && make -j1 2>&1) > "$out/link-error.log"

# 7. A panic deep in recursion, with a full backtrace.
mkdir -p "$work/pn/src"
printf '[package]\nname = "walker"\nversion = "0.1.0"\nedition = "2021"\n[profile.dev]\ndebug = true\n' > "$work/pn/Cargo.toml"
cat > "$work/pn/src/main.rs" <<'T'
fn descend(depth: u32, path: &mut Vec<u32>) -> u32 {
    path.push(depth);
    if depth == 0 {
        let limits: Vec<u32> = Vec::new();
        return limits[path.len()];
    }
    descend(depth - 1, path) + 1
}

fn main() {
    let mut path = Vec::new();
    println!("walked {}", descend(300, &mut path));
}
T
(cd "$work/pn" && cargo build --offline -q 2>&1 && RUST_BACKTRACE=full ./target/debug/walker 2>&1) > "$out/panic-backtrace.log"

# Paths of this run's temporary folder are replaced, so reruns compare.
sed -i "s|$work|/work|g" "$out"/*.log
wc -l "$out"/*.log

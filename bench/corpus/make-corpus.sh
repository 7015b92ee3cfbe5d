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

# The runners agents meet most, each run for real on a project made here
# with a few failures among many passing tests. Their must-see lines are
# not listed by hand: bench/src/must_see.rs picks them by a rule per tool
# from the log's name (pytest-*, jest-*, vitest-*, go-test-*, nextest-*,
# tsc-*, eslint-*, javac-*). Tools: pytest, go, cargo-nextest, javac, and
# jest, vitest, typescript and eslint from npm ($TOOLS/node_modules/.bin,
# TOOLS defaulting to this folder's tools/, which the script fills).
tools="${TOOLS:-$here/tools}"
if [ ! -x "$tools/node_modules/.bin/jest" ]; then
  mkdir -p "$tools"
  (cd "$tools" && npm init -y >/dev/null && npm install --silent --legacy-peer-deps \
    jest@30 vitest@3 typescript@5 eslint@9 @eslint/js@9 >/dev/null)
fi
if [ ! -x "$tools/venv/bin/pytest" ]; then
  python3 -m venv "$tools/venv" && "$tools/venv/bin/pip" install -q pytest
fi
bin="$tools/node_modules/.bin"

# 8. pytest: a package whose passing tests' ids hold "Error", four
#    failures of different shapes and an error in a fixture; run -v, -q,
#    -x and -rA.
mkdir -p "$work/py/shop" "$work/py/tests"
cat > "$work/py/shop/__init__.py" <<'T'
def parse_code(text):
    if not text.startswith("E"):
        raise ValueError(f"not an error code: {text}")
    return int(text[1:])

def cart_total(items):
    return sum(price * qty for price, qty in items)

def summary(items):
    return {"count": len(items), "total": cart_total(items), "currency": "EUR"}

def lookup(table, key):
    return table[key]
T
touch "$work/py/tests/__init__.py"
{
  echo 'import pytest'
  echo 'from shop import parse_code'
  echo '@pytest.mark.parametrize("code", range(400), ids=lambda c: f"ParseError-{c}")'
  echo 'def test_parse_error_code(code):'
  echo '    assert parse_code(f"E{code}") == code'
  echo 'def test_rejects_plain_text():'
  echo '    with pytest.raises(ValueError):'
  echo '        parse_code("404")'
} > "$work/py/tests/test_parse.py"
{
  echo 'import pytest'
  echo 'from shop import cart_total, summary, lookup'
  echo '@pytest.mark.parametrize("n", range(300), ids=lambda n: f"cart-{n}")'
  echo 'def test_cart_total(n):'
  echo '    items = [(n, 1), (1, 2)]'
  echo '    if n == 211:'
  echo '        items.append((5, 0.5))'
  echo '        assert cart_total(items) == n + 2'
  echo '    else:'
  echo '        assert cart_total(items) == n + 2'
  echo 'def test_summary_of_three_items():'
  echo '    items = [(10, 1), (5, 2), (1, 1)]'
  echo '    assert summary(items) == {"count": 3, "total": 20, "currency": "USD"}'
  echo 'def helper_price(table):'
  echo '    return lookup(table, "gift-card")'
  echo 'def test_gift_card_price():'
  echo '    assert helper_price({"book": 12, "pen": 2}) == 25'
  echo 'def test_negative_quantity_is_refused():'
  echo '    with pytest.raises(ValueError):'
  echo '        cart_total([(3, -1)])'
} > "$work/py/tests/test_cart.py"
{
  echo 'import pytest'
  echo '@pytest.fixture'
  echo 'def warehouse(tmp_path):'
  echo '    return open(tmp_path / "missing" / "stock.csv")'
  echo '@pytest.mark.parametrize("n", range(150), ids=lambda n: f"shelf-{n}")'
  echo 'def test_shelf(n):'
  echo '    assert n >= 0'
  echo 'def test_stock_file(warehouse):'
  echo '    assert warehouse.read()'
} > "$work/py/tests/test_io.py"
for mode in v q x rA; do
  (cd "$work/py" && "$tools/venv/bin/pytest" -p no:cacheprovider --color=no "-$mode" tests 2>&1) > "$out/pytest-$mode.log"
done

# 9. jest --verbose: 30 suites of 12 tests; an object diff, a number and
#    a thrown error fail.
mkdir -p "$work/js/src"
printf '{"name":"cartjs","version":"1.0.0","private":true}\n' > "$work/js/package.json"
cat > "$work/js/src/cart.js" <<'T'
function total(items) { return items.reduce((s, [p, q]) => s + p * q, 0); }
function summary(items) { return { count: items.length, total: total(items), currency: 'EUR' }; }
function lookup(table, key) { if (!(key in table)) { throw new Error(`no price for ${key}`); } return table[key]; }
module.exports = { total, summary, lookup };
T
for s in $(seq 1 30); do
  {
    echo "const { total, summary, lookup } = require('./cart');"
    echo "describe('cart suite $s', () => {"
    for t in $(seq 1 12); do
      case "$s-$t" in
        7-4) echo "  test('summary of two items $t', () => {"; echo "    expect(summary([[2, 1], [3, 1]])).toEqual({ count: 2, total: 5, currency: 'USD' });"; echo "  });" ;;
        19-9) echo "  test('total with a discount $t', () => {"; echo "    const items = [[10, 1], [5, 2]];"; echo "    expect(total(items)).toBe(18);"; echo "  });" ;;
        26-2) echo "  test('price of a gift card $t', () => {"; echo "    expect(lookup({ book: 12 }, 'gift-card')).toBe(25);"; echo "  });" ;;
        *) echo "  test('handles error-free cart $t', () => {"; echo "    expect(total([[$t, 1], [1, $s]])).toBe($t + $s);"; echo "  });" ;;
      esac
    done
    echo "});"
  } > "$work/js/src/cart$s.test.js"
done
(cd "$work/js" && "$bin/jest" --verbose --ci --colors=false --rootDir . 2>&1) > "$out/jest-verbose.log"

# 10. vitest run, verbose: the same project as TypeScript-free ES modules.
mkdir -p "$work/vt/src"
printf '{"name":"cartvt","version":"1.0.0","private":true,"type":"module"}\n' > "$work/vt/package.json"
sed -e 's/^module.exports = .*/export { total, summary, lookup };/' "$work/js/src/cart.js" > "$work/vt/src/cart.js"
for f in "$work"/js/src/cart*.test.js; do
  sed -e "s|^const { total, summary, lookup } = require('./cart');|import { describe, test, expect } from 'vitest';\nimport { total, summary, lookup } from './cart.js';|" "$f" > "$work/vt/src/$(basename "$f")"
done
(cd "$work/vt" && NO_COLOR=1 "$bin/vitest" run --reporter=verbose 2>&1) > "$out/vitest-verbose.log"

# 11. go test -v: 300 tests, some parallel, logging as they go; three fail
#     with messages printed while other tests run.
mkdir -p "$work/go"
printf 'module example.com/ledger\n\ngo 1.19\n' > "$work/go/go.mod"
printf 'package ledger\n\nfunc Balance(entries []int) int {\n\ts := 0\n\tfor _, e := range entries {\n\t\ts += e\n\t}\n\treturn s\n}\n' > "$work/go/ledger.go"
{
  echo 'package ledger'
  echo 'import "testing"'
  for i in $(seq 1 300); do
    echo "func TestBalance$i(t *testing.T) {"
    [ $((i % 3)) = 0 ] && echo '	t.Parallel()'
    echo "	t.Logf(\"checking ledger $i with error budget 0\")"
    case $i in
      42) echo '	if got := Balance([]int{40, 1}); got != 42 {'; echo '		t.Errorf("Balance = %d, want 42 (ledger 42 is off by one)", got)'; echo '	}' ;;
      150) echo '	got := Balance([]int{-150})'; echo '	if got > 0 {'; echo '		t.Log("positive")'; echo '	} else {'; echo '		t.Errorf("overdrawn ledger: balance %d", got)'; echo '	}' ;;
      273) echo '	entries := []int{}'; echo '	if len(entries) == 0 {'; echo '		t.Fatalf("no entries for ledger %d", 273)'; echo '	}' ;;
      *) echo "	if got := Balance([]int{$i, 1}); got != $((i + 1)) {"; echo '		t.Errorf("got %d", got)'; echo '	}' ;;
    esac
    echo '}'
  done
} > "$work/go/ledger_test.go"
(cd "$work/go" && GOFLAGS=-mod=mod GOCACHE="$work/gocache" go test -v ./... 2>&1) > "$out/go-test-v.log"

# 12. cargo nextest: the cargo test crate above, run by nextest.
(cd "$work/ct" && cargo nextest run --offline --no-fail-fast 2>&1) > "$out/nextest-run.log"

# 13. tsc --noEmit --listFiles: 300 modules, four type errors.
mkdir -p "$work/ts/src"
printf '{"compilerOptions":{"strict":true,"target":"es2020","module":"commonjs","noEmit":true},"include":["src"]}\n' > "$work/ts/tsconfig.json"
for i in $(seq 1 300); do
  case $i in
    44) printf 'export interface Item%d { price: number; qty: number }\nexport const item%d: Item%d = { price: "12", qty: 1 };\n' "$i" "$i" "$i" ;;
    118) printf 'export function total%d(xs: number[]): number {\n  return xs.reduce((s, x) => s + x, "");\n}\n' "$i" ;;
    201) printf 'import { missingHelper } from "./helpers";\nexport const v%d = missingHelper(%d);\n' "$i" "$i" ;;
    260) printf 'export class Cart%d {\n  items: string[] = [];\n  add(x: number) { this.items.push(x); }\n}\n' "$i" ;;
    *) printf 'export function step%d(x: number): number {\n  return x + %d;\n}\n' "$i" "$i" ;;
  esac > "$work/ts/src/mod$i.ts"
done
(cd "$work/ts" && "$bin/tsc" -p . --listFiles --pretty false 2>&1) > "$out/tsc-listfiles.log"

# 14. eslint (stylish): 250 files with an unused variable each (warnings),
#     three with undefined names (errors).
mkdir -p "$work/es/src"
cat > "$work/es/eslint.config.js" <<'T'
module.exports = [{
  files: ["src/**/*.js"],
  languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly" } },
  rules: { "no-unused-vars": "warn", "no-undef": "error", "prefer-const": "warn" },
}];
T
for i in $(seq 1 250); do
  case $i in
    37|121|240) printf 'let unused%d = 1;\nfunction run%d() {\n  return missingValue%d + 1;\n}\nmodule.exports = run%d;\n' "$i" "$i" "$i" "$i" ;;
    *) printf 'let unused%d = 1;\nlet kept%d = 2;\nfunction run%d() {\n  return kept%d + 1;\n}\nmodule.exports = run%d;\n' "$i" "$i" "$i" "$i" "$i" ;;
  esac > "$work/es/src/file$i.js"
done
(cd "$work/es" && "$bin/eslint" --no-color src 2>&1) > "$out/eslint-stylish.log"

# 15. javac -Xlint:all: 200 classes with raw-type warnings, three errors
#     (a missing symbol, incompatible types, a missing method).
mkdir -p "$work/jv/src/shop"
for i in $(seq 1 200); do
  case $i in
    58) printf 'package shop;\nimport java.util.*;\npublic class Part%d {\n    List items = new ArrayList();\n    int total() { return totl + 1; }\n}\n' "$i" ;;
    99) printf 'package shop;\nimport java.util.*;\npublic class Part%d {\n    List items = new ArrayList();\n    int count() { int n = "three"; return n; }\n}\n' "$i" ;;
    177) printf 'package shop;\nimport java.util.*;\npublic class Part%d {\n    List items = new ArrayList();\n    int size() { return items.length(); }\n}\n' "$i" ;;
    *) printf 'package shop;\nimport java.util.*;\npublic class Part%d {\n    List items = new ArrayList();\n    void add(Object o) { items.add(o); }\n}\n' "$i" ;;
  esac > "$work/jv/src/shop/Part$i.java"
done
(cd "$work/jv" && javac -Xlint:all -Xmaxwarns 1000 -d "$work/jv/out" src/shop/*.java 2>&1) > "$out/javac-xlint.log"

# Paths of this run's temporary folder are replaced, so reruns compare.
sed -i "s|$work|/work|g" "$out"/*.log
wc -l "$out"/*.log

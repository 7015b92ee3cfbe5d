#!/usr/bin/env node
// nib's launcher in the npm package: finds the binary of this platform's
// package (an optional dependency of this one) and runs it with the same
// arguments and stdio, so `npx -y nib-mcp` serves MCP on stdio and
// `npx nib-mcp setup` runs a verb. It downloads nothing.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const me = require('../package.json');
const key = `${process.platform}-${process.arch}`;
const packages = me.nibPlatforms || {};
const name = packages[key];

function fail(message) {
  process.stderr.write(`nib: ${message}\n`);
  process.exit(1);
}

if (!name) {
  fail(
    `no prebuilt nib for this platform (${key}); ${me.name} ${me.version} ships ` +
      `${Object.keys(packages).join(', ')}. Build nib from source instead: ` +
      'a checkout of nib, then cargo install --path . --locked (docs/install.md)',
  );
}

let dir;
try {
  dir = path.dirname(require.resolve(`${name}/package.json`));
} catch {
  fail(
    `the package ${name}@${me.version} (nib's binary for ${key}) is not installed; ` +
      `${me.name} gets it as an optional dependency, which an install with ` +
      `--omit=optional (or --no-optional) leaves out. Install it beside ${me.name}: ` +
      `npm install ${name}@${me.version}`,
  );
}

const bin = path.join(dir, 'bin', 'nib');
for (const file of [bin, path.join(dir, 'bin', 'nib-confine')]) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    try {
      fs.chmodSync(file, 0o755);
    } catch {
      fail(`${file} is missing or cannot be made executable; reinstall ${name}@${me.version}`);
    }
  }
}

const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (e) => fail(`cannot start ${bin}: ${e.message}`));
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});

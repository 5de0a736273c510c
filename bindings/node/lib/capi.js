'use strict';
// The thin layer: libagentrt loaded with koffi, one function per prototype of agentrt.h (lib/prototypes.js).
// The library is found through AGENTRT_LIBRARY (a path to libagentrt.so), next to this package, or by the
// system's loader; its ABI version is checked at load.

const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');
const { CALLBACKS, PROTOTYPES } = require('./prototypes');

// The ABI generation this binding was written for (AGENTRT_ABI_VERSION in agentrt.h).
const ABI_VERSION = 1;

// Status codes (agentrt_status in agentrt.h).
const STATUS = Object.freeze({
  OK: 0,
  E_INVALID_ARGUMENT: -1,
  E_NOT_FOUND: -2,
  E_CONFLICT: -3,
  E_EXPIRED: -4,
  E_TOO_LARGE: -5,
  E_CANCELLED: -6,
  E_TIMEOUT: -7,
  E_IO: -8,
  E_INVALID_STATE: -9,
  E_MODEL: -10,
  E_UNAUTHORIZED: -11,
  E_UNSUPPORTED: -12,
  E_INTERNAL: -13,
});

function libraryCandidates() {
  if (process.env.AGENTRT_LIBRARY) return [process.env.AGENTRT_LIBRARY];
  const here = path.join(__dirname, '..');
  const local = [`libagentrt.so.${ABI_VERSION}`, 'libagentrt.so', 'libagentrt.dylib', 'agentrt.dll']
    .map((n) => path.join(here, n))
    .filter((p) => fs.existsSync(p));
  return [...local, `libagentrt.so.${ABI_VERSION}`];
}

function loadLibrary() {
  const errors = [];
  for (const candidate of libraryCandidates()) {
    try {
      return { lib: koffi.load(candidate), path: candidate };
    } catch (e) {
      errors.push(`${candidate}: ${e.message}`);
    }
  }
  throw new Error(`agentrt: cannot load libagentrt (set AGENTRT_LIBRARY to its path): ${errors.join('; ')}`);
}

function checkAbi(found, expected, where = 'libagentrt') {
  if (found !== expected) throw new Error(`agentrt: ${where} has ABI version ${found}, this binding needs ${expected}`);
}

const loaded = loadLibrary();
const types = {};
for (const [name, proto] of Object.entries(CALLBACKS)) types[name] = koffi.proto(proto);
const fns = {};
for (const [name, proto] of Object.entries(PROTOTYPES)) fns[name] = loaded.lib.func(proto);
checkAbi(fns.agentrt_abi_version(), ABI_VERSION, loaded.path);

// Copies a library-owned string (a pointer) into a JS string and frees it with agentrt_free.
function takeString(ptr) {
  if (ptr === null || ptr === undefined) return null;
  try {
    return koffi.decode(ptr, 'char', -1);
  } finally {
    fns.agentrt_free(ptr);
  }
}

module.exports = {
  ABI_VERSION, STATUS, PROTOTYPES, CALLBACKS, koffi, fns, types, takeString, checkAbi, libraryPath: loaded.path,
};

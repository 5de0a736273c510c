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

// The values each integer parameter type holds. koffi converts a JS number into one by cutting it (2 ** 32 + 5
// arrives as 5, 1.5 as 1, NaN as 0): an argument the type cannot hold exactly is refused before the call instead.
// A 64-bit one is a safe integer or a BigInt.
const INT_RANGES = {
  int32_t: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32_t: [0n, 2n ** 32n - 1n],
  int64_t: [-(2n ** 63n), 2n ** 63n - 1n],
  size_t: [0n, 2n ** 64n - 1n],
};

// The integer parameters of a prototype: [{index, type, name}].
function integerParams(proto) {
  const inside = proto.slice(proto.indexOf('(') + 1, proto.lastIndexOf(')')).trim();
  if (inside === '' || inside === 'void') return [];
  return inside
    .split(',')
    .map((param, index) => {
      const m = /^\s*(int32_t|uint32_t|int64_t|size_t)\s+(\w+)\s*$/.exec(param);
      return m && { index, type: m[1], name: m[2] };
    })
    .filter(Boolean);
}

// Why `value` cannot be passed as `type`, or null (a value of another kind is left to koffi's own check).
function rangeProblem(type, value) {
  const [lo, hi] = INT_RANGES[type];
  let v = value;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) return 'not an integer';
    if (!Number.isSafeInteger(v)) return 'beyond the integers a number holds exactly (pass a BigInt)';
    v = BigInt(v);
  } else if (typeof v !== 'bigint') {
    return null;
  }
  return v < lo || v > hi ? `outside ${lo}..${hi} (${type})` : null;
}

// `fn` (and its .async) behind a check of its integer arguments: InvalidArgument naming the function, the
// parameter and its value for one the C type cannot hold. `fn` itself when it takes no integer.
function rangeChecked(name, fn, params) {
  if (params.length === 0) return fn;
  const checkArgs = (args) => {
    for (const p of params) {
      const problem = rangeProblem(p.type, args[p.index]);
      if (problem) {
        const { InvalidArgument } = require('./errors'); // errors.js requires this module
        throw new InvalidArgument(`${name}: ${p.name} is ${String(args[p.index])}, ${problem}`);
      }
    }
  };
  const checked = (...args) => {
    checkArgs(args);
    return fn(...args);
  };
  checked.async = (...args) => {
    checkArgs(args);
    return fn.async(...args);
  };
  return checked;
}

const loaded = loadLibrary();
const types = {};
for (const [name, proto] of Object.entries(CALLBACKS)) types[name] = koffi.proto(proto);
const fns = {};
for (const [name, proto] of Object.entries(PROTOTYPES)) {
  fns[name] = rangeChecked(name, loaded.lib.func(proto), integerParams(proto));
}
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
  ABI_VERSION, STATUS, PROTOTYPES, CALLBACKS, koffi, fns, types, takeString, checkAbi, integerParams, libraryPath: loaded.path,
};
